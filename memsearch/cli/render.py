"""Rendering of library results: Rich tables for people, JSON / JSONL / CSV for scripts.

Only data goes to stdout; messages go to stderr (see `messages`).
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from memsearch.profiles import leg_kind

if TYPE_CHECKING:
    from pathlib import Path

    from memsearch.consolidate import ConsolidationPlan
    from memsearch.models import Memory
    from memsearch.profiles import Profile

FORMATS = ("table", "json", "jsonl", "csv")
_TEXT_PREVIEW = 160

messages = Console(stderr=True, highlight=False, soft_wrap=True)  # one message, one line


def stdout_console() -> Console:
    return Console(highlight=False)


def write_json(document: Any, *, compact: bool = False) -> None:
    text = json.dumps(
        document, ensure_ascii=False, separators=(",", ":") if compact else None, indent=None if compact else 2
    )
    sys.stdout.write(text + "\n")


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
    if fmt == "json":
        write_json(memories[0].to_dict() if single else [m.to_dict() for m in memories])
    elif fmt == "jsonl":
        for memory in memories:
            write_json(memory.to_dict(), compact=True)
    elif fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(MEMORY_CSV_COLUMNS)
        for memory in memories:
            row = memory.to_dict()
            row["tags"] = ";".join(memory.tags)
            writer.writerow([row[column] for column in MEMORY_CSV_COLUMNS])
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
    if fmt in ("json", "jsonl"):
        write_json(stats, compact=fmt == "jsonl")
        return
    if fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(("name", "value"))
        for name, value in stats.items():
            writer.writerow((name, json.dumps(value) if isinstance(value, dict) else value))
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
    if fmt == "json":
        write_json(list(documents) if batch else documents[0])
    elif fmt == "jsonl":
        for document in documents:
            write_json(document, compact=True)
    elif fmt == "csv":
        _search_csv(documents, raw=raw)
    else:
        console = stdout_console()
        for document in documents:
            _search_tables(console, document, raw=raw, explain=explain)


def _search_csv(documents: Sequence[dict[str, Any]], *, raw: bool) -> None:
    writer = csv.writer(sys.stdout)
    writer.writerow((*SEARCH_CSV_COLUMNS, "dropped") if raw else SEARCH_CSV_COLUMNS)
    for document in documents:
        rows = document["candidates"] if raw else document["results"]
        for position, row in enumerate(rows, start=1):
            values = [
                document["query"],
                row.get("rank", position),
                row["id"],
                row["key"],
                repr(row["score"]),
                row["created_at"],
                ";".join(row["tags"]),
                row["text"],
            ]
            writer.writerow((*values, row["dropped"] or "") if raw else values)


def _search_tables(console: Console, document: dict[str, Any], *, raw: bool, explain: bool) -> None:
    title = Text.assemble(
        (document["query"], "bold"), "  →  ", (document["strategy"], "cyan"), f"  ({document['strategy_reason']})"
    )
    results = document["results"]
    table = Table(title=title, title_justify="left")
    for column, justify in (
        ("#", "right"),
        ("id", "right"),
        ("score", "right"),
        ("created", "left"),
        ("tags", "left"),
        ("text", "left"),
    ):
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
        legs = _profile_legs(document["profile"])
        for row in results:
            console.print(explain_table(row, legs))
    if raw:
        console.print(_raw_table(document))


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
        table.add_row("blend", "", f"{fusion['score']:.6f}", escape(mix))
    else:
        table.add_row(title, "", f"{fusion['score']:.6f}", escape(" + ".join(parts)))
    for factor in explain["factors"]:
        symbol = "×" if factor["op"] == "mul" else "+"
        table.add_row(
            f"{symbol} {factor['name']}", "", f"{factor['value']:.6f}", escape(_shown(factor.get("detail", {})))
        )
    table.add_row(Text("final", style="bold"), "", Text(f"{explain['final']:.6f}", style="bold"), "")
    if explain.get("selection"):
        table.add_row("selection", "", "", escape(_shown(explain["selection"])))
    return table


def _raw_table(document: dict[str, Any]) -> Table:
    candidates = document["candidates"]
    legs = sorted({leg for c in candidates for leg in c["explain"]["legs"]})
    title = f"all {len(candidates)} candidates before filtering (columns per leg: its rank)"
    table = Table(title=title, title_justify="left")
    table.add_column("id", justify="right", min_width=3)
    for leg in legs:
        table.add_column(leg, justify="right", min_width=len(leg))
    table.add_column("fused", justify="right", min_width=8)
    table.add_column("final", justify="right", min_width=8)
    table.add_column("dropped", min_width=7)
    table.add_column("text")
    for candidate in candidates:
        hits = candidate["explain"]["legs"]
        ranks = [str(hits[leg]["rank"]) if leg in hits else "—" for leg in legs]
        dropped = Text(candidate["dropped"] or "kept", style="dim" if candidate["dropped"] else "green")
        table.add_row(
            str(candidate["id"]),
            *ranks,
            f"{candidate['explain']['fusion']['score']:.6f}",
            f"{candidate['score']:.6f}",
            dropped,
            _preview(candidate["text"]),
        )
    return table


# -- profiles and consolidation -------------------------------------------------------------


def render_profiles(profiles: Sequence[tuple[Profile, Path]], fmt: str) -> None:
    rows = [{"name": p.name, "summary": p.summary, "seed": p.seed, "path": str(path)} for p, path in profiles]
    if fmt in ("json", "jsonl"):
        if fmt == "json":
            write_json(rows)
        for row in rows if fmt == "jsonl" else ():
            write_json(row, compact=True)
        return
    if fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(("name", "summary", "seed", "path"))
        writer.writerows([row.values() for row in rows])
        return
    table = Table()
    table.add_column("profile", style="bold", no_wrap=True)
    table.add_column("follows", no_wrap=True)
    table.add_column("summary")
    for row in rows:
        table.add_row(row["name"], row["seed"].removesuffix(".txt"), row["summary"])
    stdout_console().print(table)


def render_profile(profile: Profile, path: Path, fmt: str) -> None:
    document = {**profile.to_dict(), "path": str(path)}
    if fmt != "table":
        write_json(document, compact=fmt != "json")
        return
    from rich.pretty import Pretty

    stdout_console().print(Text(f"{profile.name} — {profile.summary}", style="bold"))
    stdout_console().print(Pretty(document, expand_all=True))


def render_consolidation(result: ConsolidationPlan, older: dict[int, Memory], fmt: str, *, dry_run: bool) -> None:
    groups: dict[int, list[int]] = {}
    for memory_id, group in sorted(result.groups.items()):
        groups.setdefault(group, []).append(memory_id)
    if fmt != "table":
        document = {
            "dry_run": dry_run,
            "superseded": [{"id": old, "superseded_by": new} for old, new in sorted(result.superseded.items())],
            "groups": [{"group_id": group, "ids": ids} for group, ids in groups.items()],
        }
        write_json(document, compact=fmt != "json")
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


def render_timeline(memories: Sequence[Memory], current: int, fmt: str) -> None:
    if fmt != "table":
        documents = [{**m.to_dict(), "current": m.id == current} for m in memories]
        if fmt == "json":
            write_json(documents)
        elif fmt == "jsonl":
            for document in documents:
                write_json(document, compact=True)
        else:
            writer = csv.writer(sys.stdout)
            writer.writerow(("id", "current", "created_at", "session", "position", "role", "text"))
            for d in documents:
                writer.writerow([d[c] for c in ("id", "current", "created_at", "session", "position", "role", "text")])
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
