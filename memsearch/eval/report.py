"""Show an `EvalReport`: Rich tables (one pair per granularity) on a terminal, plain lines in a
pipe or a file (a header and one tab-separated line per row, as every command's tables), or the
JSON document."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO

from rich import box
from rich.console import Console
from rich.table import Table

from memsearch.errors import InvalidInputError
from memsearch.eval.runner import EvalReport, EvalRow
from memsearch.eval.strata import STRATA
from memsearch.plain_text import one_line

REPORT_FORMATS = ("table", "json")
DASH = "—"


def _number(value: float | None, digits: int = 3) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def _title(report: EvalReport, granularity: str) -> str:
    scored = {row.questions for row in report.rows_for(granularity) if row.kind == "profile"}
    count = f"{scored.pop()} scored questions" if len(scored) == 1 else "questions: see n"
    return (
        f"{report.dataset} · {granularity} level · {report.protocol} · "
        f"{report.conversations} conversations, {count}, k={report.parameters.get('k')}"
    )


def _caption(report: EvalReport) -> str | None:
    if report.format == "longmemeval":
        return f"R = {report.recall_metric}, NDCG = {report.ndcg_metric}; abstention questions skipped"
    return None


def _table(report: EvalReport, granularity: str, title: str, caption: str | None) -> Table:
    """A table with the profile and mode columns, wide enough that profile names never get cut
    (the long baseline name wraps instead)."""
    rows = report.rows_for(granularity)
    table = Table(
        title=title, caption=caption, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True
    )
    widest = max((len(row.name) for row in rows if row.kind == "profile"), default=4)
    table.add_column("profile", min_width=max(widest, len("profile")))
    table.add_column("mode", min_width=max((len(row.mode or "") for row in rows), default=4))
    return table


def overall_table(report: EvalReport, granularity: str) -> Table:
    table = _table(report, granularity, _title(report, granularity), _caption(report))
    table.add_column("n", justify="right")
    for k in report.ks:
        table.add_column(f"R@{k}", justify="right")
    table.add_column("NDCG@10", justify="right")
    table.add_column("p50 ms", justify="right")
    table.add_column("p95 ms", justify="right")
    for row in report.rows_for(granularity):
        table.add_row(*_overall_cells(report, row))
    return table


def _overall_cells(report: EvalReport, row: EvalRow) -> list[str]:
    """One row's cells after its granularity: the table and the plain lines show the same."""
    latency = row.latency_ms
    return [
        row.name,
        row.mode or DASH,
        str(row.questions),
        *(_number(row.mean(f"{report.recall_metric}@{k}")) for k in report.ks),
        _number(row.mean(f"{report.ndcg_metric}@10")),
        _number(latency.p50 if latency else None, 1),
        _number(latency.p95 if latency else None, 1),
    ]


def categories_of(rows: list[EvalRow]) -> list[tuple[str | int, int]]:
    """Every category of the rows with its question count (from the first row that has it)."""
    found: dict[str | int, int] = {}
    for row in rows:
        if row.aggregate is not None:
            for category, group in row.aggregate.by_category.items():
                found.setdefault(category, group.count)
    return sorted(found.items(), key=lambda item: (isinstance(item[0], str), item[0]))


def category_table(report: EvalReport, granularity: str) -> Table:
    recall = report.recall_metric
    rows = report.rows_for(granularity)
    labels = report.category_labels
    title = f"{report.dataset} · {granularity} level · R@5 / R@10 by category"
    table = _table(report, granularity, title, _caption(report))
    categories = categories_of(rows)
    for category, count in categories:
        name = labels.get(category, str(category))
        table.add_column(f"{name} (n={count})", justify="right")
    for row in rows:
        cells = []
        for category, _ in categories:
            r5, r10 = row.mean(f"{recall}@5", category), row.mean(f"{recall}@10", category)
            cells.append(DASH if r5 is None else f"{_number(r5)} / {_number(r10)}")
        table.add_row(row.name, row.mode or DASH, *cells)
    return table


def strata_of(rows: list[EvalRow]) -> list[tuple[str, str]]:
    """Every (stratum, value) the rows' questions have, in the order eval.strata gives them."""
    found = {
        (stratum, value)
        for row in rows
        if row.aggregate is not None
        for stratum, by_category in row.aggregate.by_stratum.items()
        for values in by_category.values()
        for value in values
    }
    known = [(stratum, value) for stratum, values in STRATA.items() for value in values]
    return [pair for pair in known if pair in found] + sorted(found - set(known))


def stratum_recall(
    row: EvalRow, metric: str, category: str | int, stratum: str, value: str
) -> tuple[int, float, float] | None:
    """(count, R@5, R@10) of the row's questions of a category with this value of a stratum."""
    if row.aggregate is None:
        return None
    group = row.aggregate.by_stratum.get(stratum, {}).get(category, {}).get(value)
    if group is None:
        return None
    return group.count, group.means[f"{metric}@5"], group.means[f"{metric}@10"]


def strata_table(report: EvalReport, granularity: str) -> Table:
    recall, labels = report.recall_metric, report.category_labels
    rows = report.rows_for(granularity)
    title = f"{report.dataset} · {granularity} level · R@5 / R@10 (n) by category and by what the evidence says"
    table = _table(report, granularity, title, _caption(report))
    table.add_column("category")
    pairs = strata_of(rows)
    for stratum, value in pairs:
        table.add_column(f"{stratum}: {value}", justify="right")
    for row in rows:
        for category, _ in categories_of([row]):
            cells = []
            for stratum, value in pairs:
                found = stratum_recall(row, recall, category, stratum, value)
                cells.append(DASH if found is None else f"{_number(found[1])} / {_number(found[2])} ({found[0]})")
            table.add_row(row.name, row.mode or DASH, labels.get(category, str(category)), *cells)
    return table


# -- plain lines: every cell on one line, the granularity a column, a category a row ----------------


def _overall_header(report: EvalReport) -> list[str]:
    return ["granularity", "profile", "mode", "n", *(f"R@{k}" for k in report.ks), "NDCG@10", "p50 ms", "p95 ms"]


def overall_rows(report: EvalReport) -> list[list[str]]:
    return [[row.granularity, *_overall_cells(report, row)] for row in report.rows]


CATEGORY_HEADER = ["granularity", "profile", "mode", "category", "n", "R@5", "R@10"]


def category_rows(report: EvalReport) -> list[list[str]]:
    """A row per profile, mode, granularity and category that has questions (R@5 and R@10 apart,
    not "0.500 / 1.000" in one cell)."""
    recall, labels = report.recall_metric, report.category_labels
    rows = []
    for granularity in report.granularities:
        table_rows = report.rows_for(granularity)
        categories = categories_of(table_rows)
        for row in table_rows:
            for category, count in categories:
                r5 = row.mean(f"{recall}@5", category)
                if r5 is not None:
                    name = labels.get(category, str(category))
                    r10 = _number(row.mean(f"{recall}@10", category))
                    rows.append([granularity, row.name, row.mode or DASH, name, str(count), _number(r5), r10])
    return rows


STRATA_HEADER = ["granularity", "profile", "mode", "category", "stratum", "value", "n", "R@5", "R@10"]


def strata_rows(report: EvalReport) -> list[list[str]]:
    """A row per profile, mode, granularity, category and value of a stratum that has questions."""
    recall, labels = report.recall_metric, report.category_labels
    rows = []
    for granularity in report.granularities:
        table_rows = report.rows_for(granularity)
        pairs = strata_of(table_rows)
        for row in table_rows:
            for category, _ in categories_of([row]):
                for stratum, value in pairs:
                    if (found := stratum_recall(row, recall, category, stratum, value)) is not None:
                        count, r5, r10 = found
                        name = labels.get(category, str(category))
                        rows.append([granularity, row.name, row.mode or DASH, name, stratum, value, str(count),
                                     _number(r5), _number(r10)])  # fmt: skip
    return rows


def plain_lines(report: EvalReport, *, strata: bool = False) -> list[str]:
    """The tables as plain text: header and rows, a blank line, header and rows (and with `strata`
    a third block, by category and stratum)."""
    blocks = [[_overall_header(report), *overall_rows(report)], [CATEGORY_HEADER, *category_rows(report)]]
    if strata:
        blocks.append([STRATA_HEADER, *strata_rows(report)])
    text = ["\n".join("\t".join(one_line(cell) for cell in line) for line in block) for block in blocks]
    return "\n\n".join(text).splitlines()


def notes(report: EvalReport) -> list[str]:
    """What the tables' titles and captions say, for stderr when the tables are plain lines."""
    scored = {row.questions for row in report.rows if row.kind == "profile"}
    count = f"{scored.pop()} scored questions" if len(scored) == 1 else "questions: see n"
    k = report.parameters.get("k")
    lines = [f"{report.dataset} · {report.protocol} · {report.conversations} conversations, {count}, k={k}"]
    if caption := _caption(report):
        lines.append(caption)
    return [*lines, _timing(report)]


def _timing(report: EvalReport) -> str:
    timing = report.timing
    return (
        f"ingest {timing.get('ingest', 0):.1f} s · search {timing.get('search', 0):.1f} s · "
        f"baseline {timing.get('baseline', 0):.1f} s · total {timing.get('total', 0):.1f} s"
    )


def check_target(path: Path) -> None:
    """Fail before a run whose report or plot could not be written to `path`."""
    if path.is_dir():
        raise InvalidInputError(f"cannot write {path}: it is a folder")
    if not path.parent.is_dir():
        raise InvalidInputError(f"cannot write {path}: there is no folder {path.parent}")


def _check_format(fmt: str) -> None:
    if fmt not in REPORT_FORMATS:
        raise InvalidInputError(f"unknown report format {fmt!r} (choose from {', '.join(REPORT_FORMATS)})")


def write_report(report: EvalReport, fmt: str, out: IO[str], *, strata: bool = False) -> None:
    """Write the report to a file (or any text stream): "json" as the JSON document (which always
    holds the strata), "table" as plain lines (with the strata's block if `strata`)."""
    _check_format(fmt)
    if fmt == "json":
        out.write(json.dumps(report.to_dict(), indent=2) + "\n")
    else:
        out.write("".join(line + "\n" for line in plain_lines(report, strata=strata)))


def render_report(
    report: EvalReport, fmt: str = "table", *, console: Console | None = None, strata: bool = False
) -> None:
    """Print the report to stdout (or `console`): "json" as the JSON document; "table" as Rich
    tables on a terminal, else as plain lines, with the titles and timing on stderr; `strata` adds
    the table by category and stratum."""
    _check_format(fmt)
    console = console or Console(markup=False, emoji=False)  # profile and category names are data, not markup
    if fmt == "json" or not console.is_terminal:
        write_report(report, fmt, console.file, strata=strata)
        if fmt == "table":
            sys.stderr.write("".join(line + "\n" for line in notes(report)))
        return
    for granularity in report.granularities:
        console.print(overall_table(report, granularity))
        console.print(category_table(report, granularity))
        if strata:
            console.print(strata_table(report, granularity))
    console.print(_timing(report))
