"""Small charts drawn with block characters, for `memsearch stats` on a terminal: a sparkline of
the memories added per period and a bar per kind, project or namespace.

The functions that draw are pure (strings in, strings out); `stats_table` lays them out in a Rich
table beside the store's other figures. Labels are stored data and pass through `literal`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memsearch.cli.literal import literal

if TYPE_CHECKING:
    from rich.table import Table

SPARKS = "▁▂▃▄▅▆▇█"  # a period's count, in eighths of the busiest period's
EMPTY_PERIOD = "·"  # a period that added nothing (▁ is the smallest count above none)
EIGHTHS = "▏▎▍▌▋▊▉█"  # a bar's last cell
BAR_WIDTH = 24  # cells of the longest bar
LABEL_WIDTH = 20  # a longer project name is cut with "…"
SHOWN_BARS = 8  # bars per breakdown; the rest are counted on a line of their own
BREAKDOWNS = ("kinds", "projects", "namespaces")


def sparkline(counts: Sequence[int]) -> str:
    """One character per count: ▁ to █ by its share of the largest, · for none."""
    largest = max(counts, default=0)
    if largest <= 0:
        return EMPTY_PERIOD * len(counts)
    return "".join(EMPTY_PERIOD if n <= 0 else SPARKS[max(0, math.ceil(n / largest * len(SPARKS)) - 1)] for n in counts)


def bar(count: int, largest: int, width: int = BAR_WIDTH) -> str:
    """A horizontal bar `count / largest` of `width` cells, in eighths; at least a sliver above 0."""
    if count <= 0 or largest <= 0:
        return ""
    eighths = max(1, round(count / largest * width * 8))
    full, rest = divmod(eighths, 8)
    return "█" * full + (EIGHTHS[rest - 1] if rest else "")


def growth_caption(growth: Mapping[str, Any]) -> str:
    """`2022-01 … 2026-11, peak 4464 in 2022-01`: the sparkline's ends and its busiest period."""
    counts: Mapping[str, int] = growth["counts"]
    labels = list(counts)
    peak = max(labels, key=lambda label: counts[label])
    span = labels[0] if len(labels) == 1 else f"{labels[0]} … {labels[-1]}"
    return f"{span}, peak {counts[peak]} in {peak}"


def growth_title(growth: Mapping[str, Any]) -> str:
    return f"added per {growth['period']}"


def _in_order(stats: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The stats' items with the growth right after the newest memory's time, beside the span it
    draws; the store's other models one a line."""
    items = [(name, _models(value) if name == "extra_models" else value) for name, value in stats.items()]
    items = [(name, value) for name, value in items if name != "growth"]
    if "growth" in stats:
        after = next((i + 1 for i, (name, _) in enumerate(items) if name == "newest"), len(items))
        items.insert(after, ("growth", stats["growth"]))
    return items


def _models(models: Sequence[Mapping[str, Any]]) -> str | None:
    """The store's other models (stats' extra_models) as text: `gemma (768-d, version …, 812 vectors)`."""
    shown = []
    for model in models:
        version = f", version {model['version'][:12]}" if model["version"] else ""
        shown.append(f"{model['name']} ({model['dim']}-d{version}, {model['vectors']} vectors)")
    return "; ".join(shown) or None


def _bars(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    return sorted(((name or "(none)", n) for name, n in counts.items()), key=lambda item: (-item[1], item[0]))


def stats_table(stats: Mapping[str, Any]) -> Table:
    """The store's figures, a name and a value a row; the added-per-period counts as a sparkline
    and the kinds, projects and namespaces as bars."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_header=False, box=None)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    for name, value in _in_order(stats):
        if name == "growth":
            if value["counts"]:
                chart = Text(sparkline(list(value["counts"].values())), no_wrap=True, overflow="ellipsis")
                table.add_row(growth_title(value), Text.assemble(chart, "\n", growth_caption(value)))
        elif name in BREAKDOWNS and isinstance(value, Mapping):
            table.add_row(name, _breakdown(value) if value else Text("—"))
        else:
            shown = value if not isinstance(value, Mapping) else ", ".join(f"{k}: {n}" for k, n in value.items())
            table.add_row(name.replace("_", " "), literal("—" if shown is None else shown))
    return table


def _breakdown(counts: Mapping[str, int]) -> Any:
    """A bar a name, the largest first: `note      ████████ 812`; the names past SHOWN_BARS in a count."""
    from rich.table import Table

    rows = _bars(counts)
    largest = rows[0][1]
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, overflow="ellipsis", max_width=LABEL_WIDTH)
    grid.add_column(no_wrap=True)
    grid.add_column(justify="right", no_wrap=True)
    for label, n in rows[:SHOWN_BARS]:
        grid.add_row(literal(label), bar(n, largest), str(n))
    if len(rows) > SHOWN_BARS:
        hidden = sum(n for _, n in rows[SHOWN_BARS:])
        grid.add_row(f"{len(rows) - SHOWN_BARS} more", "", str(hidden))
    return grid


def stats_rows(stats: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The plain-text form for `print_grid`: a name and a value a row (breakdowns as `name: n, …`,
    the growth as `label: n, …`)."""
    rows: list[tuple[str, str]] = []
    for name, value in _in_order(stats):
        if name == "growth":
            if value["counts"]:
                rows.append((growth_title(value), ", ".join(f"{k}: {n}" for k, n in value["counts"].items())))
        elif isinstance(value, Mapping):
            rows.append((name, ", ".join(f"{k or '(none)'}: {n}" for k, n in value.items()) or "—"))
        else:
            rows.append((name.replace("_", " "), "—" if value is None else str(value)))
    return rows
