"""Rendering of search documents (`SearchOutcome.to_dict`, from this process or from a server):
the results, and with --explain each result's legs, fusion and factors, with --raw every
candidate. A document carries all the renderer needs (the legs' specs too): rendering never
loads a profile, so a server's profile this machine lacks renders the same.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memsearch.cli.consoles import is_terminal, stdout_console
from memsearch.cli.grid import Column, Marked, print_grid
from memsearch.cli.literal import literal, one_line
from memsearch.cli.render import short_time, shown_path, write_output

if TYPE_CHECKING:  # Rich is imported where a table is drawn: machine output never loads it
    from rich.console import Console


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
SHOWN_QUERY_CHARS = 300  # of a long query (a document searched by example), in a table's title
EXPLAIN_COLUMNS = (
    Column("stage", "key"),
    Column("rank", "key", "right"),
    Column("value", "key", "right"),
    Column("detail", "text"),
)


PER_FILE_ON_A_TERMINAL = 3  # sections shown under each file when --per-file is not given


def render_search(
    documents: Sequence[dict[str, Any]], fmt: str, *, raw: bool, explain: bool, batch: bool, per_file: int | None = None
) -> None:
    """Render search documents (`SearchOutcome.to_dict(raw=raw)`, from this process or from a server).
    With `per_file` (a terminal's table: PER_FILE_ON_A_TERMINAL unless given; 0: none), note
    sections are shown a row per file with its best sections under it, and JSON documents get
    `groups` (`sections.group_by_file`)."""
    if fmt == "table":
        if is_terminal():
            console = stdout_console()
            for document in documents:
                grouped = PER_FILE_ON_A_TERMINAL if per_file is None else per_file
                _search_tables(console, document, raw=raw, explain=explain, per_file=grouped)
        else:
            _search_lines(documents, raw=raw, explain=explain, batch=batch, per_file=per_file or 0)
        return
    if per_file and fmt in ("json", "jsonl"):
        from memsearch.sections import group_by_file

        documents = [{**document, "groups": group_by_file(document["results"], per_file)} for document in documents]
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
    return (row["rank"], row["id"], f"{row['score']:.4f}", short_time(row["created_at"]), ", ".join(row["tags"]),
            _marked(row))  # fmt: skip


def _located(row: dict[str, Any]) -> str:
    """The text, after `path:line` for a memory indexed from a file (its metadata says where)."""
    marked = _marked(row)
    return marked.prefix + marked.text


def _marked(row: dict[str, Any], where: str | None = None) -> Marked:
    """The text with the query's matched words (`matches`, absent from an older server's documents)
    to highlight, after `where` (default: `path:line` for a memory indexed from a file), which a
    preview from the first match keeps."""
    if where is None:
        metadata = row.get("metadata") or {}
        path, line = metadata.get("path"), metadata.get("start_line")
        where = ""
        if isinstance(path, str):
            where = shown_path(path) + (f":{line}" if isinstance(line, int) else "") + "  "
    return Marked(row["text"], [(start, end) for start, end in row.get("matches", ())], prefix=where)


def _result_rows(document: dict[str, Any], per_file: int) -> list[tuple[Any, ...]]:
    """The result rows: one per result, or with `per_file` (and a note section among them) a row
    per file (`path  title`, its best score) with its best sections under it (`:line  text`)."""
    results = document["results"]
    if not per_file:
        return [_result_row(row) for row in results]
    from memsearch.sections import group_by_file

    groups = group_by_file(results, per_file)
    if all(group["path"] is None for group in groups):
        return [_result_row(row) for row in results]
    by_id = {row["id"]: row for row in results}
    rows: list[tuple[Any, ...]] = []
    for group in groups:
        if group["path"] is None:
            rows.append((group["rank"], *_result_row(by_id[group["ids"][0]])[1:]))
            continue
        title = f" — {group['title']}" if group["title"] else ""
        rows.append((group["rank"], "", f"{group['score']:.4f}", "", "", (shown_path(group["path"]) + title, "bold")))
        for memory_id in group["ids"]:
            row = by_id[memory_id]
            line = (row.get("metadata") or {}).get("start_line")
            rows.append(("", *_result_row(row)[1:-1], _marked(row, f"  :{line}  ")))
        if group["more"]:
            rows.append(("", "", "", "", "", (f"  … {group['more']} more of this file", "dim")))
    return rows


def _search_lines(documents: Sequence[dict[str, Any]], *, raw: bool, explain: bool, batch: bool, per_file: int) -> None:
    """Plain text for pipes: the results, then (with --explain) every result's stages, then (with
    --raw) every candidate, each block a header and a line per row (a query column in a batch)."""
    query = (Column("query", "key"),) if batch else ()
    first = [(document["query"],) if batch else () for document in documents]
    print_grid(
        (*query, *RESULT_COLUMNS),
        [(*q, *row) for q, document in zip(first, documents, strict=True) for row in _result_rows(document, per_file)],
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


def _search_tables(console: Console, document: dict[str, Any], *, raw: bool, explain: bool, per_file: int) -> None:
    from rich.text import Text

    title = Text.assemble(
        literal(document["query"], style="bold", limit=SHOWN_QUERY_CHARS),
        "  →  ",
        (document["strategy"], "cyan"),
        f"  ({document['strategy_reason']})",
    )
    results = document["results"]
    if results:
        print_grid(RESULT_COLUMNS, _result_rows(document, per_file), title=title, console=console)
    else:
        console.print(Text.assemble(title, "\n", ("no results", "yellow")))
    if explain:
        if document.get("embedded_query") is not None:
            embedded = literal(document["embedded_query"], limit=SHOWN_QUERY_CHARS)
            console.print(Text.assemble(("vector legs embedded: ", "bold"), embedded))
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
    if pending := document.get("vectors_pending"):
        waiting = "memory waits" if pending == 1 else "memories wait"
        lines.append(
            f"{pending:,} {waiting} for vectors (`memsearch index` makes them): "
            "vector search saw only the memories that have theirs"
        )
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
    """The spec of each leg a document names: its profile's (`legs`) and its LLM expansions'.
    A document without `legs` (a server older than the field) leaves the legs named only."""
    legs = dict(document.get("legs", {}))
    for expansion in document.get("expansions", ()):
        legs.update(expansion["legs"])
    return legs


# What each kind of leg scores (a spec's kind is its head: `vector@context:user` is a vector leg).
MEASURE_OF_KIND = {"vector": "cosine", "lexical": "bm25", "time": "cosine in a named date"}


def _measure(spec: str) -> str:
    kind = spec.partition(":")[0].partition("@")[0]
    return MEASURE_OF_KIND.get(kind, "score")


def _shown(values: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in values.items())


def _explain_rows(row: dict[str, Any], leg_specs: dict[str, str]) -> list[tuple[Any, ...]]:
    """Each leg's rank and score, the fusion, every factor in order, and the final score."""
    explain = row["explain"]
    fusion = explain["fusion"]
    terms: dict[str, float] = fusion["terms"]
    rows: list[tuple[Any, ...]] = []
    for leg, hit in explain["legs"].items():
        spec = leg_specs.get(leg, leg)
        measure = _measure(spec)
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
        Marked(candidate["text"], [(start, end) for start, end in candidate.get("matches", ())]),
    )
