"""Rendering of library results: tables for people (plain lines in a pipe, see `grid`), JSON /
JSONL / CSV for scripts.

Only data goes to stdout; messages go to stderr (see `consoles.messages`). Search documents are
rendered by `results`. Stored text reaches the
terminal only through `literal` (as literal text, control characters visible), never as markup.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memsearch.cli.consoles import is_terminal, messages, stdout_console
from memsearch.cli.grid import Column, print_grid
from memsearch.cli.literal import literal, one_line, visible

if TYPE_CHECKING:  # Rich is imported where a table is drawn: machine output never loads it
    from memsearch.api import Consolidation, ProfileInfo, Timeline
    from memsearch.config import Config
    from memsearch.doctor import DoctorReport
    from memsearch.ingest.indexing import IndexOutcome
    from memsearch.ingest.roots import Forgotten, RootInfo
    from memsearch.models import Memory


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
        import csv

        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows([_cell(row.get(column)) for column in columns] for row in rows)
    else:
        raise ValueError(f"not a machine format: {fmt!r}")


def short_time(iso: str | None) -> str:
    return "" if iso is None else iso[:16].replace("T", " ")


# -- memories (get, list) ------------------------------------------------------------------

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
        from memsearch.models import CSV_FIELDS  # (a search's rendering needs no memory model)

        documents = [m.to_dict() for m in memories]
        write_output(
            fmt,
            document=documents[0] if single else documents,
            lines=documents,
            columns=CSV_FIELDS,
            rows=documents,
        )
    elif single:
        _memory_detail(memories[0])
    else:
        rows = [
            (m.id, short_time(m.to_dict()["created_at"]), m.key or "", m.project or "", ", ".join(m.tags), m.text)
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


TAG_COLUMNS = (Column("tag", "text"), Column("memories", "key", "right"))


def render_tags(tags: Mapping[str, int], fmt: str) -> None:
    rows = [{"tag": tag, "memories": count} for tag, count in tags.items()]
    if fmt != "table":
        write_output(fmt, document=rows, lines=rows, columns=("tag", "memories"), rows=rows)
        return
    print_grid(TAG_COLUMNS, [(row["tag"], row["memories"]) for row in rows])


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
        cells = (m.id, short_time(m.to_dict()["created_at"]), m.session or "", m.position, m.role or "", m.text)
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
    heading = [f"config file: {config.path}{'' if config.exists else ' (none)'}", f"store: {store}"]
    for line in heading:
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
    for path, reason in outcome.skipped:  # a file name is data: its escape sequences must not reach the terminal
        messages().print(visible(f"skipped {shown_path(path)}: {reason}"), markup=False)
    for where, reason in outcome.warnings:  # front matter left unused: the note is indexed all the same
        messages().print(visible(f"{shown_path(where)}: {reason}"), markup=False)
    messages().print(outcome.summary, markup=False)


ROOT_COLUMNS = (
    Column("path", "text"),
    Column("state", "text"),
    Column("files", "key", "right"),
    Column("memories", "key", "right"),
    Column("include"),
    Column("exclude"),
)


def render_roots(roots: Sequence[RootInfo], fmt: str) -> None:
    """The remembered folders of notes (`index --roots`); JSON: a list of their objects."""
    rows = [root.to_dict() for root in roots]
    if fmt != "table":
        write_json(rows)
        return
    if not roots:
        messages().print("no folder of notes is remembered; `memsearch index PATH` indexes one", markup=False)
        return
    print_grid(
        ROOT_COLUMNS,
        [
            (
                shown_path(root.path),
                (f"refused: {root.reason}" if root.reason else root.state, "green" if root.state == "ok" else "yellow"),
                root.files,
                root.memories,
                ", ".join(root.include),
                ", ".join(root.exclude),
            )
            for root in roots
        ],
    )


def render_forgotten(forgotten: Forgotten, fmt: str) -> None:
    """What `index --forget` or `--prune` removed: a line on stderr per folder; JSON: the outcome."""
    if fmt != "table":
        write_json(forgotten.to_dict())
        return
    if not forgotten.roots:
        messages().print("no remembered folder is missing; nothing was forgotten", markup=False)
    for root in forgotten.roots:
        messages().print(visible(f"forgot {shown_path(root.path)} ({root.state})"), markup=False)
    memories, files = forgotten.memories_removed, forgotten.files_removed
    removed = f"{memories:,} {'memory' if memories == 1 else 'memories'} of {files:,} file{'' if files == 1 else 's'}"
    messages().print(f"removed {removed}", markup=False)
