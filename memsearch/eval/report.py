"""Show an `EvalReport`: Rich tables (one pair per granularity) or the JSON document."""

from __future__ import annotations

import json
import sys

from rich import box
from rich.console import Console
from rich.table import Table

from memsearch.errors import InvalidInputError
from memsearch.eval.runner import EvalReport, EvalRow

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
    recall, ndcg = report.recall_metric, report.ndcg_metric
    table = _table(report, granularity, _title(report, granularity), _caption(report))
    table.add_column("n", justify="right")
    for k in report.ks:
        table.add_column(f"R@{k}", justify="right")
    table.add_column("NDCG@10", justify="right")
    table.add_column("p50 ms", justify="right")
    table.add_column("p95 ms", justify="right")
    for row in report.rows_for(granularity):
        latency = row.latency_ms
        table.add_row(
            row.name,
            row.mode or DASH,
            str(row.questions),
            *(_number(row.mean(f"{recall}@{k}")) for k in report.ks),
            _number(row.mean(f"{ndcg}@10")),
            _number(latency.p50 if latency else None, 1),
            _number(latency.p95 if latency else None, 1),
        )
    return table


def _categories(rows: list[EvalRow]) -> list[tuple[str | int, int]]:
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
    categories = _categories(rows)
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


def render_report(report: EvalReport, fmt: str = "table", *, console: Console | None = None) -> None:
    """Print the report to stdout (or `console`): "table" as Rich tables, "json" as the JSON document."""
    if fmt not in REPORT_FORMATS:
        raise InvalidInputError(f"unknown report format {fmt!r} (choose from {', '.join(REPORT_FORMATS)})")
    if fmt == "json":
        out = console.file if console is not None else sys.stdout
        out.write(json.dumps(report.to_dict(), indent=2) + "\n")
        return
    console = console or Console(markup=False, emoji=False)  # profile and category names are data, not markup
    for granularity in report.granularities:
        console.print(overall_table(report, granularity))
        console.print(category_table(report, granularity))
    timing = report.timing
    console.print(
        f"ingest {timing.get('ingest', 0):.1f} s · search {timing.get('search', 0):.1f} s · "
        f"baseline {timing.get('baseline', 0):.1f} s · total {timing.get('total', 0):.1f} s"
    )
