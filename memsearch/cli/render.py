"""Rendering of library results: tables for people (plain lines in a pipe, see `grid`), JSON /
JSONL / CSV for scripts.

Only data goes to stdout; messages go to stderr (see `messages`). Stored text reaches the
terminal only through `literal` (as literal text, control characters visible), never as markup.
"""

from __future__ import annotations

import csv
import functools
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memsearch.cli.grid import Column, is_terminal, print_grid, stdout_console
from memsearch.cli.literal import literal, one_line
from memsearch.models import CSV_FIELDS

if TYPE_CHECKING:  # Rich is imported where a table is drawn: machine output never loads it
    from rich.console import Console

    from memsearch.api import Consolidation, ProfileInfo, Timeline
    from memsearch.config import Config
    from memsearch.doctor import DoctorReport
    from memsearch.ingest.indexing import IndexOutcome
    from memsearch.models import Memory


@functools.cache
def messages() -> Console:
    """Stderr, for messages: one message, one line; messages quote stored text (keys, file names),
    so never markup."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)


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


def _short_time(iso: str | None) -> str:
    return "" if iso is None else iso[:16].replace("T", " ")


# -- memories (get, list) ------------------------------------------------------------------

MEMORY_CSV_COLUMNS = CSV_FIELDS
MEMORY_COLUMNS = (
    Column("id", "key", "right"),
    Column("created", min_width=16),
    Column("key"),
    Column("project"),
    Column("tags"),
    Column("text", "text"),
)
NAME_VALUE = (Column("name", "key"), Column("value", "text"))


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
        _memory_detail(memories[0])
    else:
        rows = [
            (m.id, _short_time(m.to_dict()["created_at"]), m.key or "", m.project or "", ", ".join(m.tags), m.text)
            for m in memories
        ]
        print_grid(MEMORY_COLUMNS, rows)


def _field_value(value: Any) -> str:
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return "" if value is None else str(value)


def _memory_detail(memory: Memory) -> None:
    """Every field on a line of its own; on a terminal the text keeps its own lines."""
    from rich.table import Table

    fields = memory.to_dict()
    if not is_terminal():
        print_grid(NAME_VALUE, [(name, _field_value(value)) for name, value in fields.items()], show_header=False)
        return
    table = Table(show_header=False, box=None)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for name, value in fields.items():
        if name == "text":  # its own lines; a final line break would show as an empty row
            table.add_row(name, literal(value.rstrip("\r\n"), lines=True))
        else:
            table.add_row(name, literal(_field_value(value)))
    stdout_console().print(table)


def render_stats(stats: dict[str, Any], fmt: str) -> None:
    if fmt != "table":
        pairs = [{"name": name, "value": value} for name, value in stats.items()]
        write_output(fmt, document=stats, columns=("name", "value"), rows=pairs)
        return
    from memsearch.cli.charts import stats_rows, stats_table

    if is_terminal():  # the added-per-period counts as a sparkline, the kinds and projects as bars
        stdout_console().print(stats_table(stats))
    else:
        print_grid(NAME_VALUE, stats_rows(stats), show_header=False)


# -- search --------------------------------------------------------------------------------

SEARCH_CSV_COLUMNS = ("query", "rank", "id", "key", "score", "created_at", "tags", "text")
RESULT_COLUMNS = (
    Column("#", "key", "right"),
    Column("id", "key", "right"),
    Column("score", "key", "right"),
    Column("created", min_width=16),
    Column("tags"),
    Column("text", "text"),
)
RAW_COLUMNS = (
    Column("id", "key", "right"),
    Column("ranks", "key"),
    Column("fused", "key", "right"),
    Column("final", "key", "right"),
    Column("dropped", "key"),
    Column("text", "text", wrap=False),  # every candidate on one line, to scan down
)
EXPLAIN_COLUMNS = (
    Column("stage", "key"),
    Column("rank", "key", "right"),
    Column("value", "key", "right"),
    Column("detail", "text"),
)


def render_search(documents: Sequence[dict[str, Any]], fmt: str, *, raw: bool, explain: bool, batch: bool) -> None:
    """Render search documents (`SearchOutcome.to_dict(raw=raw)`, from this process or from a server)."""
    if fmt == "table":
        if is_terminal():
            console = stdout_console()
            for document in documents:
                _search_tables(console, document, raw=raw, explain=explain)
        else:
            _search_lines(documents, raw=raw, explain=explain, batch=batch)
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


def _result_row(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["rank"], row["id"], f"{row['score']:.4f}", _short_time(row["created_at"]), ", ".join(row["tags"]),
            _located(row))  # fmt: skip


def _located(row: dict[str, Any]) -> str:
    """The text, after `path:line` for a memory indexed from a file (its metadata says where)."""
    metadata = row.get("metadata") or {}
    path, line = metadata.get("path"), metadata.get("start_line")
    if not isinstance(path, str):
        return str(row["text"])
    where = shown_path(path) + (f":{line}" if isinstance(line, int) else "")
    return f"{where}  {row['text']}"


def _search_lines(documents: Sequence[dict[str, Any]], *, raw: bool, explain: bool, batch: bool) -> None:
    """Plain text for pipes: the results, then (with --explain) every result's stages, then (with
    --raw) every candidate, each block a header and a line per row (a query column in a batch)."""
    query = (Column("query", "key"),) if batch else ()
    first = [(document["query"],) if batch else () for document in documents]
    print_grid(
        (*query, *RESULT_COLUMNS),
        [(*q, *_result_row(row)) for q, document in zip(first, documents, strict=True) for row in document["results"]],
    )
    if explain:
        sys.stdout.write("\n")
        rows = []
        for q, document in zip(first, documents, strict=True):
            sys.stdout.write("".join(one_line(line) + "\n" for line in stage_lines(document)))
            legs = _leg_specs(document)
            rows += [(*q, row["id"], *stage) for row in document["results"] for stage in _explain_rows(row, legs)]
        print_grid((*query, Column("id", "key", "right"), *EXPLAIN_COLUMNS), rows)
    if raw:
        sys.stdout.write("\n")
        print_grid(
            (*query, *RAW_COLUMNS),
            [(*q, *_raw_row(c, _raw_legs(d))) for q, d in zip(first, documents, strict=True) for c in d["candidates"]],
        )
        for document in documents:
            if moves := rerank_moves(document):
                sys.stdout.write("re-ranking moved: " + ", ".join(moves) + "\n")


def _search_tables(console: Console, document: dict[str, Any], *, raw: bool, explain: bool) -> None:
    from rich.text import Text

    title = Text.assemble(
        literal(document["query"], style="bold"),
        "  →  ",
        (document["strategy"], "cyan"),
        f"  ({document['strategy_reason']})",
    )
    results = document["results"]
    if results:
        print_grid(RESULT_COLUMNS, [_result_row(row) for row in results], title=title, console=console)
    else:
        console.print(Text.assemble(title, "\n", ("no results", "yellow")))
    if explain:
        if document.get("embedded_query") is not None:
            console.print(Text.assemble(("vector legs embedded: ", "bold"), literal(document["embedded_query"])))
        for line in stage_lines(document):
            console.print(Text(line))
        legs = _leg_specs(document)
        for row in results:
            title = Text.assemble(f"#{row['rank']}  id {row['id']}: ", literal(_located(row), limit=70))
            print_grid(EXPLAIN_COLUMNS, _explain_rows(row, legs), title=title, console=console)
    if raw:
        ranked = _raw_legs(document)
        title = Text(
            f"all {len(document['candidates'])} candidates before filtering; leg ranks: {', '.join(ranked) or 'none'}"
        )
        print_grid(RAW_COLUMNS, [_raw_row(c, ranked) for c in document["candidates"]], title=title, console=console)
        if moves := rerank_moves(document):
            console.print(Text("re-ranking moved: " + ", ".join(moves)))


ENGINE_WORDS = {
    "exact": "exact search",
    "index": "the approximate index",
    "bounded": "a bounded read of long posting lists (scores exact, top k not proven)",
}


def engine_summary(engines: dict[str, str]) -> str:
    """`vector: the approximate index, vector_context: exact search`."""
    return ", ".join(f"{leg}: {ENGINE_WORDS.get(engine, engine)}" for leg, engine in engines.items())


def stage_lines(document: dict[str, Any]) -> list[str]:
    """How the vector legs were searched, the LLM stages' trace (`expansion: skipped (timeout
    after 2.0 s)`) and each expansion's text."""
    lines = []
    if engines := document.get("vector_search"):
        lines.append(f"vector legs answered by {engine_summary(engines)}")
    lexical = document.get("lexical_search", {})
    if "bounded" in lexical.values():  # exact BM25 goes without saying
        lines.append(f"lexical legs answered by {engine_summary(lexical)}")
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


def _leg_specs(document: dict[str, Any]) -> dict[str, str]:
    """The spec of each leg a document names: its profile's, and its LLM expansions' (documents
    carry leg names, not specs)."""
    from memsearch.profiles import load_profile

    legs = dict(load_profile(document["profile"]).legs)
    for expansion in document.get("expansions", ()):
        legs.update(expansion["legs"])
    return legs


def _shown(values: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items())


def _explain_rows(row: dict[str, Any], leg_specs: dict[str, str]) -> list[tuple[Any, ...]]:
    """Each leg's rank and score, the fusion, every factor in order, and the final score."""
    from memsearch.profiles import leg_kind

    explain = row["explain"]
    fusion = explain["fusion"]
    terms: dict[str, float] = fusion["terms"]
    rows: list[tuple[Any, ...]] = []
    for leg, hit in explain["legs"].items():
        spec = leg_specs.get(leg, leg)
        measure = {"vector": "cosine", "lexical": "bm25", "time": "cosine in a named date"}[leg_kind(spec)]
        rows.append(
            (f"{leg} leg", hit["rank"], f"{hit['score']:.4g}", f"{measure} ({spec})" if spec != leg else measure)
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
        rows.append((title, "", f"{detail['session_rrf_score']:.6f}", " + ".join(parts)))
        shown = (
            f"min(cap, share · {detail['supporting_turn_count']} turns' best) "
            f"[best turn {detail['best_turn_id']}: {', '.join(detail['best_turn_routes'])}]"
        )
        rows.append(("+ turn support", "", f"{detail['turn_support']:.6f}", shown))
    elif "norm_rrf" in detail:
        rows.append((title, "", f"{detail['rrf']:.6f}", " + ".join(parts)))
        blend = detail["blend_vector"]
        mix = f"{1 - blend:g}·{detail['norm_rrf']:.4f} [min-max rrf] + {blend:g}·{detail['vector_score']:.4f} [cosine]"
        rows.append(("blend", "", f"{fused:.6f}", mix))
    else:
        rows.append((title, "", f"{fused:.6f}", " + ".join(parts)))
    if rerank:
        moved = f"{rerank['method']}: from place {rerank['from']} to {rerank['to']}, with that place's score"
        rows.append(("re-rank", "", f"{fusion['score']:.6f}", moved))
    for factor in explain["factors"]:
        symbol = "×" if factor["op"] == "mul" else "+"
        rows.append((f"{symbol} {factor['name']}", "", f"{factor['value']:.6f}", _shown(factor.get("detail", {}))))
    rows.append((("final", "bold"), "", (f"{explain['final']:.6f}", "bold"), ""))
    if explain.get("selection"):
        rows.append(("selection", "", "", _shown(explain["selection"])))
    return rows


def _raw_legs(document: dict[str, Any]) -> list[str]:
    return sorted({leg for c in document["candidates"] for leg in c["explain"]["legs"]})


def _raw_row(candidate: dict[str, Any], legs: Sequence[str]) -> tuple[Any, ...]:
    """A candidate on one line: the legs' ranks in one column (so any number of legs fits), the
    scores, why it was dropped, and its text."""
    ranks = candidate["explain"]["legs"]
    return (
        candidate["id"],
        " ".join(str(ranks[leg]["rank"]) if leg in ranks else "—" for leg in legs),
        f"{candidate['explain']['fusion']['score']:.6f}",
        f"{candidate['score']:.6f}",
        (candidate["dropped"] or "kept", "dim" if candidate["dropped"] else "green"),
        candidate["text"],
    )


# -- profiles and consolidation -------------------------------------------------------------

PROFILE_COLUMNS = (Column("profile", "key"), Column("follows"), Column("summary", "text"))


def render_profiles(profiles: Sequence[ProfileInfo], fmt: str) -> None:
    rows = [info.to_dict() for info in profiles]
    if fmt != "table":
        columns = ("name", "summary", "seed", "path", "error")
        write_output(fmt, document=rows, lines=rows, columns=columns, rows=rows)
        return
    print_grid(
        PROFILE_COLUMNS,
        [
            (row["name"], row["seed"].removesuffix(".txt"), row["summary"])
            if row["error"] is None
            else (row["name"], ("broken", "red"), (row["error"], "red"))
            for row in rows
        ],
    )


def render_profile(info: ProfileInfo, fmt: str) -> None:
    """`table`: the profile as TOML that can be pasted into a profile file (a comment line names
    it); the other formats: its resolved parameters."""
    from memsearch.profiles import profile_toml

    profile = info.profile
    assert profile is not None, "a broken profile is an error, never shown"
    document = {**profile.to_dict(), "path": str(info.path)}
    if fmt == "table":
        comment = f"# {one_line(profile.name)} — {one_line(profile.summary)}\n# from {one_line(info.path)}\n"
        sys.stdout.write(comment + profile_toml(profile))
    elif fmt == "csv":
        rows = [{"name": name, "value": value} for name, value in _flat(document)]
        write_output(fmt, document=document, columns=("name", "value"), rows=rows)
    else:
        write_output(fmt, document=document, columns=(), rows=())


def _flat(document: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Nested parameters as dotted names (`fusion.rrf_k`), for one name-value row each."""
    pairs: list[tuple[str, Any]] = []
    for name, value in document.items():
        if isinstance(value, Mapping) and value:
            pairs += _flat(value, f"{prefix}{name}.")
        elif isinstance(value, list | tuple) and value and all(isinstance(v, Mapping) for v in value):
            for position, item in enumerate(value):
                pairs += _flat(item, f"{prefix}{name}.{position}.")
        else:
            pairs.append(
                (f"{prefix}{name}", json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else value)
            )
    return pairs


CONSOLIDATION_CSV_COLUMNS = ("id", "superseded_by", "group_id", "text", "newer_text")
CONSOLIDATION_COLUMNS = (
    Column("id", "key", "right"),
    Column("by", "key", "right"),
    Column("older text", "text"),
    Column("newer text", "text"),
)


def render_consolidation(result: Consolidation, fmt: str) -> None:
    groups, texts, dry_run = result.groups, result.texts, result.dry_run
    if fmt != "table":
        group_of = {memory_id: group for group, ids in groups.items() for memory_id in ids}
        rows = [
            {
                "id": memory_id,
                "superseded_by": result.superseded.get(memory_id),
                "group_id": group_of.get(memory_id),
                "text": texts.get(memory_id),
                "newer_text": texts.get(result.superseded[memory_id]) if memory_id in result.superseded else None,
            }
            for memory_id in sorted({*result.superseded, *group_of})
        ]
        write_output(fmt, document=result.to_dict(), lines=rows, columns=CONSOLIDATION_CSV_COLUMNS, rows=rows)
        return
    verb = "would mark" if dry_run else "marked"
    messages().print(f"{verb} {len(result.superseded)} superseded; {len(groups)} groups of related memories")
    if result.superseded:
        from rich.text import Text

        print_grid(
            CONSOLIDATION_COLUMNS,
            [(old, new, texts.get(old, ""), texts.get(new, "")) for old, new in sorted(result.superseded.items())],
            title=Text("superseded (older → newer)"),
        )


TIMELINE_CSV_COLUMNS = ("id", "current", "created_at", "session", "position", "role", "text")
TIMELINE_COLUMNS = (
    Column("id", "key", "right"),
    Column("when", min_width=16),
    Column("session"),
    Column("#", "key", "right"),
    Column("who"),
    Column("text", "text"),
)


def render_timeline(timeline: Timeline, fmt: str) -> None:
    memories, current = timeline.memories, timeline.current
    if fmt != "table":
        document = timeline.to_dict()
        rows = document["memories"]
        write_output(fmt, document=document, lines=rows, columns=TIMELINE_CSV_COLUMNS, rows=rows)
        return
    rows = []
    for m in memories:
        style = "bold" if m.id == current else ""
        cells = (m.id, _short_time(m.to_dict()["created_at"]), m.session or "", m.position, m.role or "", m.text)
        rows.append(tuple((cell, style) for cell in cells))
    print_grid(TIMELINE_COLUMNS, rows)


# -- export, config, doctor ------------------------------------------------------------------

CONFIG_COLUMNS = (Column("setting", "key"), Column("value", "text"), Column("from", "text"))


def render_config(config: Config, store: str, fmt: str) -> None:
    """The effective settings and where each comes from (file and line, variable, or default)."""
    rows = [setting.to_dict() for setting in config.settings.values()]
    if fmt != "table":
        document = {**config.to_dict(), "store": store}
        write_output(fmt, document=document, lines=rows, columns=("name", "value", "source", "origin"), rows=rows)
        return
    messages = [f"config file: {config.path}{'' if config.exists else ' (none)'}", f"store: {store}"]
    for line in messages:
        if is_terminal():
            stdout_console().print(literal(line))
        else:
            sys.stdout.write(one_line(line) + "\n")
    cells = [
        (
            row["name"],
            "—" if row["value"] is None else row["value"],
            row["source"] if row["origin"] is None else f"{row['source']}: {row['origin']}",
        )
        for row in rows
    ]
    print_grid(CONFIG_COLUMNS, cells)


_LEVEL_STYLE = {"ok": "green", "warning": "yellow", "problem": "bold red"}
FINDING_COLUMNS = (Column("level", "key"), Column("check", "key"), Column("detail", "text"))


def render_doctor(report: DoctorReport, fmt: str) -> None:
    document = report.to_dict()
    if fmt != "table":
        findings = document["findings"]
        write_output(fmt, document=document, records=findings, columns=("name", "level", "detail"), rows=findings)
        return
    store, model = document["store"], document["model"]
    lines: list[tuple[str, object]] = [("store", report.location)]
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
    print_grid(NAME_VALUE, lines, show_header=False)
    rows = [((f.level, _LEVEL_STYLE[f.level]), (f.name, "bold"), f.detail) for f in report.findings]
    print_grid(FINDING_COLUMNS, rows, show_header=False)


# -- index ---------------------------------------------------------------------------------

INDEX_COLUMNS = (
    Column("change", "key"),
    Column("+chunks", "key", "right"),
    Column("-chunks", "key", "right"),
    Column("path", "text"),
)


def shown_path(path: str) -> str:
    """A stored file path as a person types it here: relative to the current folder when under it."""
    import os

    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith("..") else relative


def render_index(outcome: IndexOutcome, fmt: str) -> None:
    """The summary line and the skipped files on stderr; on a dry run, each file that would change."""
    if fmt != "table":
        write_json(outcome.to_dict())
        return
    if outcome.dry_run and outcome.files:
        rows = [
            (line.status, line.chunks_added, line.chunks_removed, shown_path(line.path))
            for line in outcome.files
            if line.status != "skipped"
        ]
        print_grid(INDEX_COLUMNS, rows)
    for path, reason in outcome.skipped:
        messages().print(f"skipped {shown_path(path)}: {reason}", markup=False)
    messages().print(outcome.summary, markup=False)
