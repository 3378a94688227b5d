"""Rendering of library results: Rich tables for people, JSON / JSONL / CSV for scripts.

Only data goes to stdout; messages go to stderr (see `messages`).
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, JustifyMethod
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from memsearch.profiles import leg_kind

if TYPE_CHECKING:
    from memsearch.api import Consolidation, ProfileInfo, Timeline
    from memsearch.config import Config
    from memsearch.doctor import DoctorReport
    from memsearch.models import Memory

_TEXT_PREVIEW = 160

messages = Console(stderr=True, highlight=False, soft_wrap=True)  # one message, one line


def stdout_console() -> Console:
    return Console(highlight=False)


def write_json(document: Any, *, compact: bool = False) -> None:
    text = json.dumps(
        document, ensure_ascii=False, separators=(",", ":") if compact else None, indent=None if compact else 2
    )
    sys.stdout.write(text + "\n")


def _cell(value: Any) -> Any:
    """A CSV cell: lists joined with ";", mappings as JSON, None empty."""
    if isinstance(value, list | tuple):
        return ";".join(map(str, value))
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else value


def write_output(
    fmt: str,
    *,
    document: Any,
    lines: Sequence[Any] | None = None,
    records: Sequence[Any] | None = None,
    columns: Sequence[str],
    rows: Iterable[Mapping[str, Any]],
) -> None:
    """The one writer of machine output: json prints `document`; jsonl prints each of `lines`
    (default: the document) on a line of its own; ndjson prints each of `records` (default: the
    lines) on a line of its own; csv prints `columns` and a line per row."""
    if fmt == "json":
        write_json(document)
    elif fmt in ("jsonl", "ndjson"):
        chosen = records if fmt == "ndjson" and records is not None else lines
        for line in [document] if chosen is None else chosen:
            write_json(line, compact=True)
    elif fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows([_cell(row.get(column)) for column in columns] for row in rows)
    else:
        raise ValueError(f"not a machine format: {fmt!r}")


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _TEXT_PREVIEW else flat[: _TEXT_PREVIEW - 1] + "…"


def _short_time(iso: str) -> str:
    return iso[:16].replace("T", " ")


# -- memories (get, list) ------------------------------------------------------------------

MEMORY_CSV_COLUMNS = (
    "id",
    "key",
    "created_at",
    "project",
    "namespace",
    "session",
    "role",
    "tags",
    "importance",
    "priority",
    "pinned",
    "text",
)


def render_memories(memories: Sequence[Memory], fmt: str, *, single: bool = False) -> None:
    if fmt != "table":
        documents = [m.to_dict() for m in memories]
        write_output(
            fmt,
            document=documents[0] if single else documents,
            lines=documents,
            columns=MEMORY_CSV_COLUMNS,
            rows=documents,
        )
    elif single:
        stdout_console().print(_memory_detail(memories[0]))
    else:
        table = Table(show_lines=False)
        for column in ("id", "created", "key", "project", "tags", "text"):
            table.add_column(column, overflow="fold" if column == "text" else "ellipsis", no_wrap=column != "text")
        for m in memories:
            table.add_row(
                str(m.id),
                _short_time(m.to_dict()["created_at"]),
                m.key or "",
                m.project or "",
                ", ".join(m.tags),
                _preview(m.text),
            )
        stdout_console().print(table)


def _memory_detail(memory: Memory) -> Table:
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for name, value in memory.to_dict().items():
        if isinstance(value, list | dict):
            value = json.dumps(value, ensure_ascii=False)
        table.add_row(name, Text("" if value is None else str(value)))
    return table


def render_stats(stats: dict[str, Any], fmt: str) -> None:
    if fmt != "table":
        rows = [{"name": name, "value": value} for name, value in stats.items()]
        write_output(fmt, document=stats, columns=("name", "value"), rows=rows)
        return
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    for name, value in stats.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k or '(none)'}: {n}" for k, n in value.items()) or "—"
        table.add_row(name.replace("_", " "), "—" if value is None else str(value))
    stdout_console().print(table)


# -- search --------------------------------------------------------------------------------

SEARCH_CSV_COLUMNS = ("query", "rank", "id", "key", "score", "created_at", "tags", "text")


def render_search(documents: Sequence[dict[str, Any]], fmt: str, *, raw: bool, explain: bool, batch: bool) -> None:
    """Render search documents (`SearchOutcome.to_dict(raw=raw)`, from this process or from a server)."""
    if fmt == "table":
        console = stdout_console()
        for document in documents:
            _search_tables(console, document, raw=raw, explain=explain)
        return
    rows = [
        {**row, "query": document["query"], "rank": row.get("rank", position), "score": repr(row["score"])}
        for document in documents
        for position, row in enumerate(document["candidates"] if raw else document["results"], start=1)
    ]
    columns = (*SEARCH_CSV_COLUMNS, "dropped") if raw else SEARCH_CSV_COLUMNS
    hits = [
        {"query": document["query"], "rank": row.get("rank", position), **row}
        for document in documents
        for position, row in enumerate(document["candidates"] if raw else document["results"], start=1)
    ]
    write_output(
        fmt,
        document=list(documents) if batch else documents[0],
        lines=documents,
        records=hits,
        columns=columns,
        rows=rows,
    )


def _search_tables(console: Console, document: dict[str, Any], *, raw: bool, explain: bool) -> None:
    title = Text.assemble(
        (document["query"], "bold"), "  →  ", (document["strategy"], "cyan"), f"  ({document['strategy_reason']})"
    )
    results = document["results"]
    table = Table(title=title, title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("#", "right"),
        ("id", "right"),
        ("score", "right"),
        ("created", "left"),
        ("tags", "left"),
        ("text", "left"),
    )
    for column, justify in columns:
        table.add_column(
            column, justify=justify, overflow="fold" if column == "text" else "ellipsis", no_wrap=column != "text"
        )
    for row in results:
        table.add_row(
            str(row["rank"]),
            str(row["id"]),
            f"{row['score']:.4f}",
            _short_time(row["created_at"]),
            ", ".join(row["tags"]),
            _preview(row["text"]),
        )
    if results:
        console.print(table)
    else:
        console.print(Text.assemble(title, "\n", ("no results", "yellow")))
    if explain:
        if document.get("embedded_query") is not None:
            console.print(Text.assemble(("vector legs embedded: ", "bold"), document["embedded_query"]))
        for line in stage_lines(document):
            console.print(Text(line))
        legs = _profile_legs(document["profile"])
        for expansion in document.get("expansions", ()):
            legs.update(expansion["legs"])
        for row in results:
            console.print(explain_table(row, legs))
    if raw:
        console.print(_raw_table(document, console.width))
        if moves := rerank_moves(document):
            console.print(Text("re-ranking moved: " + ", ".join(moves)))


def stage_lines(document: dict[str, Any]) -> list[str]:
    """The LLM stages' trace (`expansion: skipped (timeout after 2.0 s)`) and each expansion's text."""
    lines = []
    for stage in document.get("stages", ()):
        name = "expansion" if stage["stage"] == "synthesis" else stage["stage"]
        if stage["status"] == "skipped":
            lines.append(f"{name}: skipped ({stage['reason']})")
        else:
            timing = "cached" if stage["status"] == "cached" else f"{stage['ms']:.0f} ms" if stage["ms"] else "ran"
            lines.append(f"{name}: {timing}" + (f" ({stage['reason']})" if stage["reason"] else ""))
    for expansion in document.get("expansions", ()):
        lines.append(f"  leg {expansion['name']} ({expansion['stage']}): {expansion['text']}")
    return lines


def rerank_moves(document: dict[str, Any]) -> list[str]:
    """`id 12 7→1` for every candidate re-ranking moved."""
    moves = []
    for candidate in document.get("candidates", ()):
        move = candidate["explain"]["fusion"].get("detail", {}).get("rerank")
        if move and move["from"] != move["to"]:
            moves.append((move["to"], f"id {candidate['id']} {move['from']}→{move['to']}"))
    return [text for _, text in sorted(moves)]


def _profile_legs(name: str) -> dict[str, str]:
    """The leg specs of the profile a document names (documents carry leg names, not specs)."""
    from memsearch.profiles import load_profile

    return dict(load_profile(name).legs)


def _shown(values: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items())


def explain_table(row: dict[str, Any], leg_specs: dict[str, str]) -> Table:
    """Each leg's rank and score, the fusion, every factor in order, and the final score."""
    explain = row["explain"]
    fusion = explain["fusion"]
    terms: dict[str, float] = fusion["terms"]
    table = Table(title=f"#{row['rank']}  id {row['id']}: {_preview(row['text'])[:70]}", title_justify="left")
    table.add_column("stage")
    table.add_column("rank", justify="right")
    table.add_column("value", justify="right")
    table.add_column("detail")
    for leg, hit in explain["legs"].items():
        spec = leg_specs.get(leg, leg)
        measure = {"vector": "cosine", "lexical": "bm25", "time": "in a date the query names"}[leg_kind(spec)]
        table.add_row(
            f"{leg} leg", str(hit["rank"]), f"{hit['score']:.4g}", f"{measure} ({spec})" if spec != leg else measure
        )
    detail = fusion.get("detail", {})
    rerank = detail.get("rerank")
    fused = rerank["score_before"] if rerank else fusion["score"]  # before re-ranking moved it
    if fusion["method"] == "rrf":
        weights = fusion["weights"]
        parts = [
            f"{weights.get(leg, 1.0):g}/({fusion['k']:g}+{hit['rank']}) [{leg}]" for leg, hit in explain["legs"].items()
        ]
        parts += [f"{value:g} [{name}]" for name, value in terms.items() if ":" in name]
        parts = parts or ["no leg (found through its turns)"]
        title = f"rrf (k={fusion['k']:g})"
    else:
        parts = [f"{fusion['weights'][n]:g}·{detail[n]:.4g} [{n}]" for n in terms]
        title = "weighted sum"
    if "turn_support" in detail:
        table.add_row(title, "", f"{detail['session_rrf_score']:.6f}", escape(" + ".join(parts)))
        shown = (
            f"min(cap, share · {detail['supporting_turn_count']} turns' best) "
            f"[best turn {detail['best_turn_id']}: {', '.join(detail['best_turn_routes'])}]"
        )
        table.add_row("+ turn support", "", f"{detail['turn_support']:.6f}", escape(shown))
    elif "norm_rrf" in detail:
        table.add_row(title, "", f"{detail['rrf']:.6f}", escape(" + ".join(parts)))
        blend = detail["blend_vector"]
        mix = f"{1 - blend:g}·{detail['norm_rrf']:.4f} [min-max rrf] + {blend:g}·{detail['vector_score']:.4f} [cosine]"
        table.add_row("blend", "", f"{fused:.6f}", escape(mix))
    else:
        table.add_row(title, "", f"{fused:.6f}", escape(" + ".join(parts)))
    if rerank:
        moved = f"{rerank['method']}: from place {rerank['from']} to {rerank['to']}, with that place's score"
        table.add_row("re-rank", "", f"{fusion['score']:.6f}", escape(moved))
    for factor in explain["factors"]:
        symbol = "×" if factor["op"] == "mul" else "+"
        table.add_row(
            f"{symbol} {factor['name']}", "", f"{factor['value']:.6f}", escape(_shown(factor.get("detail", {})))
        )
    table.add_row(Text("final", style="bold"), "", Text(f"{explain['final']:.6f}", style="bold"), "")
    if explain.get("selection"):
        table.add_row("selection", "", "", escape(_shown(explain["selection"])))
    return table


def _raw_table(document: dict[str, Any], width: int) -> Table:
    """Every candidate on one line: the legs' ranks in one column (so any number of legs fits), the
    scores, why it was dropped, and as much of the text as the terminal has room for."""
    candidates = document["candidates"]
    legs = sorted({leg for c in candidates for leg in c["explain"]["legs"]})
    title = f"all {len(candidates)} candidates before filtering; leg ranks: {', '.join(legs) or 'none'}"
    rows = [
        [
            str(c["id"]),
            " ".join(str(c["explain"]["legs"][leg]["rank"]) if leg in c["explain"]["legs"] else "—" for leg in legs),
            f"{c['explain']['fusion']['score']:.6f}",
            f"{c['score']:.6f}",
            c["dropped"] or "kept",
        ]
        for c in candidates
    ]
    headers = ["id", "ranks", "fused", "final", "dropped"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    room = max(12, width - sum(widths) - 3 * len(widths) - 4)  # what the fixed columns and borders leave
    table = Table(title=title, title_justify="left")
    for header, justify in zip(headers, ("right", "left", "right", "right", "left"), strict=True):
        table.add_column(header, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    table.add_column("text", no_wrap=True, overflow="ellipsis", max_width=room)
    for candidate, row in zip(candidates, rows, strict=True):
        style = "dim" if candidate["dropped"] else "green"
        table.add_row(*row[:4], Text(row[4], style=style), _preview(candidate["text"]))
    return table


# -- profiles and consolidation -------------------------------------------------------------


def render_profiles(profiles: Sequence[ProfileInfo], fmt: str) -> None:
    rows = [info.to_dict() for info in profiles]
    if fmt != "table":
        write_output(fmt, document=rows, lines=rows, columns=("name", "summary", "seed", "path"), rows=rows)
        return
    table = Table()
    table.add_column("profile", style="bold", no_wrap=True)
    table.add_column("follows", no_wrap=True)
    table.add_column("summary")
    for row in rows:
        table.add_row(row["name"], row["seed"].removesuffix(".txt"), row["summary"])
    stdout_console().print(table)


def render_profile(info: ProfileInfo, fmt: str) -> None:
    profile = info.profile
    document = {**profile.to_dict(), "path": str(info.path)}
    if fmt != "table":
        rows = [{"name": name, "value": value} for name, value in document.items()]
        write_output(fmt, document=document, columns=("name", "value"), rows=rows)
        return
    from rich.pretty import Pretty

    stdout_console().print(Text(f"{profile.name} — {profile.summary}", style="bold"))
    stdout_console().print(Pretty(document, expand_all=True))


CONSOLIDATION_CSV_COLUMNS = ("id", "superseded_by", "group_id", "text")


def render_consolidation(result: Consolidation, fmt: str) -> None:
    groups, older, dry_run = result.groups, result.older, result.dry_run
    if fmt != "table":
        group_of = {memory_id: group for group, ids in groups.items() for memory_id in ids}
        rows = [
            {
                "id": memory_id,
                "superseded_by": result.superseded.get(memory_id),
                "group_id": group_of.get(memory_id),
                "text": older[memory_id].text if memory_id in older else None,
            }
            for memory_id in sorted({*result.superseded, *group_of})
        ]
        write_output(fmt, document=result.to_dict(), columns=CONSOLIDATION_CSV_COLUMNS, rows=rows)
        return
    verb = "would mark" if dry_run else "marked"
    messages.print(f"{verb} {len(result.superseded)} superseded; {len(groups)} groups of related memories")
    if result.superseded:
        table = Table(title="superseded (older → newer)", title_justify="left")
        table.add_column("id", justify="right")
        table.add_column("by", justify="right")
        table.add_column("older text")
        for old, new in sorted(result.superseded.items()):
            table.add_row(str(old), str(new), _preview(older[old].text) if old in older else "")
        stdout_console().print(table)


TIMELINE_CSV_COLUMNS = ("id", "current", "created_at", "session", "position", "role", "text")


def render_timeline(timeline: Timeline, fmt: str) -> None:
    memories, current = timeline.memories, timeline.current
    if fmt != "table":
        documents = timeline.to_dict()
        write_output(fmt, document=documents, lines=documents, columns=TIMELINE_CSV_COLUMNS, rows=documents)
        return
    table = Table()
    for column in ("id", "when", "session", "#", "who", "text"):
        table.add_column(column, justify="right" if column in ("id", "#") else "left", no_wrap=column != "text")
    for m in memories:
        style = "bold" if m.id == current else None
        table.add_row(
            str(m.id),
            _short_time(m.to_dict()["created_at"]),
            m.session or "",
            "" if m.position is None else str(m.position),
            m.role or "",
            Text(m.text, style=style or ""),
            style=style,
        )
    stdout_console().print(table)


# -- export, config, doctor ------------------------------------------------------------------


def render_config(config: Config, store: str, fmt: str) -> None:
    """The effective settings and where each comes from (file and line, variable, or default)."""
    rows = [setting.to_dict() for setting in config.settings.values()]
    if fmt != "table":
        document = {**config.to_dict(), "store": store}
        write_output(fmt, document=document, lines=rows, columns=("name", "value", "source", "origin"), rows=rows)
        return
    console = stdout_console()
    console.print(Text(f"config file: {config.path}{'' if config.exists else ' (none)'}"))
    console.print(Text(f"store: {store}"))
    table = Table()
    for column in ("setting", "value", "from"):
        table.add_column(column, overflow="fold")
    for row in rows:
        source = row["source"] if row["origin"] is None else f"{row['source']}: {row['origin']}"
        table.add_row(row["name"], Text("—" if row["value"] is None else str(row["value"])), Text(source))
    console.print(table)


_LEVEL_STYLE = {"ok": "green", "warning": "yellow", "problem": "bold red"}


def render_doctor(report: DoctorReport, fmt: str) -> None:
    document = report.to_dict()
    if fmt != "table":
        findings = document["findings"]
        write_output(fmt, document=document, records=findings, columns=("name", "level", "detail"), rows=findings)
        return
    console = stdout_console()
    store, model = document["store"], document["model"]
    lines = [("store", report.location)]
    if store is not None:
        memories = ", ".join(f"{n} {kind}{'s' * (n != 1)}" for kind, n in store["memories"].items()) or "none"
        lines += [
            ("backend", f"{store['backend']}, schema {store['schema_version']}, {store['size_bytes']:,} bytes"),
            ("memories", memories),
            (
                "vectors",
                f"{store['vectors']} own, {store['view_vectors']} of views; {store['fts_rows']} full-text rows",
            ),
            ("vectors by", f"{store['embedding_model']} ({store['embedding_dim']} dimensions)"),
        ]
        if store["wal_bytes"] is not None:
            lines.append(("wal", f"{store['wal_bytes']:,} bytes"))
    if model is not None:
        lines.append(("model", f"{model['name']} ({'exported' if model['exported'] else 'not exported yet'})"))
    summary = Table(show_header=False, box=None)
    summary.add_column(style="bold")
    summary.add_column(overflow="fold")
    for name, value in lines:
        summary.add_row(name, Text(value))
    console.print(summary)
    findings = Table(show_header=False, box=None)
    findings.add_column(no_wrap=True)
    findings.add_column(no_wrap=True, style="bold")
    findings.add_column(overflow="fold")
    for finding in report.findings:
        findings.add_row(Text(finding.level, style=_LEVEL_STYLE[finding.level]), finding.name, Text(finding.detail))
    console.print(findings)
