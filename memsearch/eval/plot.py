"""`memsearch eval --plot FILE`: the report as a picture, SVG or PNG by the file's suffix.

On top, the recall@k curves: k on x (a log scale, ticks at the report's cut-offs), recall on y,
a line per profile, mode and granularity (a colour per profile and mode, a dash per
granularity). Below, for each granularity, R@5 and R@10 by category: a bar per profile and mode
in each category's group, R@10 light and R@5 solid in front of it.

matplotlib is the optional `plot` extra. It is imported only here, drawn off screen (the Agg
canvas; no window, no pyplot state), and `check_plot_target` finds out before a long run whether
it is installed. Every curve and bar carries a gid (`recall-curve-…`, `category-bar-…`), which an
SVG keeps as the element's id.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.errors import InvalidInputError, MemsearchError
from memsearch.eval.report import categories_of, check_target
from memsearch.eval.runner import EvalReport, EvalRow

if TYPE_CHECKING:
    from matplotlib.axes import Axes

PLOT_SUFFIXES = (".svg", ".png")
EXTRA_HINT = 'pip install "memsearch[plot]"'
DASHES = {"turn": "-", "session": "--"}  # and markers: lines of equal values stay told apart
MARKERS = {"turn": "o", "session": "s"}
DPI = 120
TICK_WIDTH = 15  # characters of a category's name on one line under its bars


def check_plot_target(path: Path) -> None:
    """Fail now, not after the run, if `path` cannot be plotted to or matplotlib is missing."""
    if path.suffix.lower() not in PLOT_SUFFIXES:
        raise InvalidInputError(f"cannot plot to {path}: the file name must end in .svg or .png")
    check_target(path)
    try:
        import matplotlib  # noqa: F401 - only whether it is there
    except ImportError:
        raise MemsearchError(f"plotting needs matplotlib, the plot extra: {EXTRA_HINT}") from None


def _wrapped(name: str, width: int = TICK_WIDTH) -> str:
    """A category name on lines of about `width` characters, broken after its hyphens
    (LongMemEval's `single-session-preference`), so that six categories' names do not overlap."""
    lines = [""]
    for part in name.replace("-", "-\n").splitlines():
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def _label(row: EvalRow) -> str:
    return row.name if row.mode is None else f"{row.name} / {row.mode}"


def plot_report(report: EvalReport, path: Path) -> None:
    """Draw the report's recall@k curves and per-category bars into `path` (.svg or .png)."""
    check_plot_target(path)
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    granularities = report.granularities
    figure = Figure(figsize=(11, 4.6 + 3.8 * len(granularities)), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1 + len(granularities), 1, squeeze=False, height_ratios=[1.2] + [1] * len(granularities))
    labels = list(dict.fromkeys(_label(row) for row in report.rows))
    colours = {label: f"C{i % 10}" for i, label in enumerate(labels)}
    _curves(axes[0][0], report, colours)
    for granularity, (bars,) in zip(granularities, axes[1:], strict=True):
        _category_bars(bars, report, granularity, colours)
    figure.suptitle(f"{report.dataset} · {report.protocol} · {report.conversations} conversations")
    suffix = path.suffix.lower().lstrip(".")
    # An SVG keeps its text as text (searchable, selectable, smaller) and no date (the same report
    # draws the same file).
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "memsearch"}):
        figure.savefig(path, dpi=DPI, format=suffix, metadata={"Date": None} if suffix == "svg" else None)


def _curves(axes: Axes, report: EvalReport, colours: dict[str, str]) -> None:
    recall = report.recall_metric
    for index, row in enumerate(report.rows):
        points = [(k, value) for k in report.ks if (value := row.mean(f"{recall}@{k}")) is not None]
        if not points:
            continue
        ks, values = zip(*points, strict=True)
        (line,) = axes.plot(
            ks,
            values,
            DASHES.get(row.granularity, ":"),
            marker=MARKERS.get(row.granularity, "^"),
            markersize=5 if row.granularity == "session" else 4,
            color=colours[_label(row)],
            label=f"{_label(row)} · {row.granularity}",
        )
        line.set_gid(f"recall-curve-{index}")
    axes.set_xscale("log")
    axes.set_xticks(list(report.ks), [str(k) for k in report.ks])
    axes.minorticks_off()
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("k (results looked at)")
    axes.set_ylabel("recall@k" if recall == "recall" else f"recall@k ({recall})")
    axes.set_title("Recall@k", loc="left")
    axes.grid(alpha=0.3)
    axes.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small", frameon=False)


def _category_bars(axes: Axes, report: EvalReport, granularity: str, colours: dict[str, str]) -> None:
    recall, names = report.recall_metric, report.category_labels
    rows = report.rows_for(granularity)
    categories = categories_of(rows)
    slot = 0.8 / max(1, len(rows))
    for index, row in enumerate(rows):
        offset = -0.4 + slot * (index + 0.5)
        for position, (category, _) in enumerate(categories):
            r5, r10 = row.mean(f"{recall}@5", category), row.mean(f"{recall}@10", category)
            if r5 is None or r10 is None:
                continue
            colour = colours[_label(row)]
            (light,) = axes.bar(position + offset, r10, slot * 0.92, color=colour, alpha=0.35)
            (solid,) = axes.bar(position + offset, r5, slot * 0.92, color=colour, label=_label(row))
            light.set_gid(f"category-bar-{granularity}-{index}-{position}-r10")
            solid.set_gid(f"category-bar-{granularity}-{index}-{position}-r5")
            if r10 == 0:  # a bar of no height: say 0, or it reads as no data
                axes.annotate("0", (position + offset, 0), ha="center", va="bottom", fontsize="x-small")
    ticks = [f"{_wrapped(names.get(c, str(c)))}\n(n={n})" for c, n in categories]
    axes.set_xticks(range(len(categories)), ticks, fontsize="small")
    axes.set_ylim(0, 1.02)
    axes.set_ylabel("recall")
    axes.set_title(f"{granularity} level · R@5 (solid) and R@10 (light) by category", loc="left")
    axes.grid(axis="y", alpha=0.3)
    handles, labels = axes.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))  # a label per row, not per category
    axes.legend(
        unique.values(), unique.keys(), loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small", frameon=False
    )
