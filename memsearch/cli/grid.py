"""Tables of results for people, and the same rows as plain text for pipes.

On a terminal a table is fitted to its width by `fit_widths`: the columns that identify a row
(id, rank, score) keep their full width, the stored text keeps a fair share and wraps, and the
metadata columns (key, project, tags, dates) are cut with "…" first and dropped when even that
does not fit. When stdout is not a terminal (`memsearch list > file`, `| grep`), `table` output
is a header and one tab-separated line per row, every cell on one line, the text in full.
Set TTY_COMPATIBLE=1 (Rich's switch) to get the table in a pipe, TTY_COMPATIBLE=0 for plain text
on a terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from memsearch.cli.consoles import is_terminal, stdout_console
from memsearch.cli.literal import literal, literal_marked, one_line, visible

if TYPE_CHECKING:  # Rich is imported when a table is drawn (machine output never loads it)
    from rich.console import Console, JustifyMethod
    from rich.text import Text

Role = Literal["key", "text", "meta"]
MATCH_STYLE = "bold red"  # the words a search matched, as rg and grep show them


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class Marked:
    """A stored text with ranges to highlight (offsets into `text`, see memsearch.store.matches):
    a table styles them MATCH_STYLE and previews the text around the first; plain text is the text."""

    text: str
    spans: Sequence[tuple[int, int]] = ()
    prefix: str = ""  # shown before the text, whole, even when the text is previewed from its first match


# A cell: a stored or computed value shown literally, optionally with a style.
Cell = object | tuple[object, str]

TEXT_PREVIEW = 160  # characters of a text shown in a table cell (plain text gets it all)
META_CAP = 24  # metadata columns grow past this only when the text has all it can use
TEXT_MIN = 24  # the least the text columns share (unless the terminal is narrower still)
COLUMN_OVERHEAD = 3  # a column's padding (1 + 1) and the rule to its right
EDGE = 1  # the table's left edge


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class Column:
    """`key` columns (id, rank, score) are never cut; `text` columns take the room left and wrap;
    `meta` columns are cut to no less than `min_width` first, and dropped from the right when
    the terminal is too narrow even for that."""

    header: str
    role: Role = "meta"
    justify: JustifyMethod = "left"
    min_width: int = 10  # narrower, a key or a project name says too little to keep
    wrap: bool = True  # a text column wraps; one that does not is cut with "…" (a row per line)


def _fill(widths: list[int], indices: Sequence[int], caps: Sequence[int], budget: int) -> int:
    """Raise the widths at `indices` evenly toward their caps within `budget`; returns what is left."""
    while budget > 0:
        growing = [i for i, cap in zip(indices, caps, strict=True) if widths[i] < cap]
        if not growing:
            break
        share = max(1, budget // len(growing))
        for i in sorted(growing, key=lambda i: widths[i]):
            step = min(share, caps[indices.index(i)] - widths[i], budget)
            widths[i] += step
            budget -= step
            if budget == 0:
                break
    return budget


def fit_widths(roles: Sequence[Role], naturals: Sequence[int], width: int, min_widths: Sequence[int]) -> list[int]:
    """The content width of each column in a table `width` cells wide, 0 for a dropped column.

    `naturals` are the widths each column's longest cell needs. Key columns get theirs; the text
    columns at least half of the rest (TEXT_MIN at the least, or all there is); metadata columns
    at least their `min_widths` (metadata columns are dropped from the right until that fits);
    then the room left goes to metadata up to META_CAP, to the text up to its natural width, and
    to the metadata up to theirs."""
    shown = list(range(len(roles)))
    texts = [i for i in shown if roles[i] == "text"]
    fixed = sum(naturals[i] for i in shown if roles[i] == "key")

    def floor(i: int, room: int) -> int:
        if roles[i] == "key":
            return naturals[i]
        if roles[i] == "text":
            return min(naturals[i], max(TEXT_MIN, (room - fixed) // 2) // len(texts))
        return min(naturals[i], min_widths[i])

    while True:
        room = width - EDGE - COLUMN_OVERHEAD * len(shown)
        metas = [i for i in shown if roles[i] == "meta"]
        if sum(floor(i, room) for i in shown) <= room or not metas:
            break
        shown.remove(metas[-1])
    widths = [0] * len(roles)
    for i in shown:
        widths[i] = floor(i, room)
    budget = room - sum(widths)
    if budget < 0 and texts:  # narrower than the key columns and a minimal text: the text takes what is left
        for i in texts:
            widths[i] = max(1, widths[i] + budget // len(texts))
        return widths
    metas = [i for i in shown if roles[i] == "meta"]
    budget = _fill(widths, metas, [min(naturals[i], max(META_CAP, min_widths[i])) for i in metas], budget)
    budget = _fill(widths, texts, [naturals[i] for i in texts], budget)
    _fill(widths, metas, [naturals[i] for i in metas], budget)
    return widths


def _split(cell: Cell) -> tuple[object, str]:
    return cell if isinstance(cell, tuple) else (cell, "")


def _plain(value: object) -> object:
    return value.prefix + value.text if isinstance(value, Marked) else value


def _shown(value: object, style: str, limit: int | None) -> Text:
    if isinstance(value, Marked):
        from rich.text import Text

        prefix = Text(visible(value.prefix), style=style)  # its spaces kept: it lines the texts up
        room = None if limit is None else max(1, limit - len(prefix))
        return Text.assemble(prefix, literal_marked(value.text, value.spans, style=style, mark=MATCH_STYLE, limit=room))
    return literal(value, style=style, limit=limit)


def print_grid(
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    *,
    title: Text | None = None,
    show_header: bool = True,
    console: Console | None = None,
) -> None:
    """Rows as a fitted table on a terminal, else as a header and tab-separated lines (without
    importing Rich, when no console is given: see consoles.is_terminal)."""
    if console is None and not is_terminal():
        console_is_terminal = False
    else:
        console = console or stdout_console()
        console_is_terminal = console.is_terminal
    if not console_is_terminal:
        lines = ["\t".join(c.header for c in columns)] if show_header else []
        lines += ["\t".join(one_line(_plain(_split(cell)[0])) for cell in row) for row in rows]
        sys.stdout.write("".join(line + "\n" for line in lines))
        return
    from rich import box
    from rich.table import Table

    assert console is not None
    cells = [
        [
            _shown(value, style, TEXT_PREVIEW if column.role == "text" else None)
            for (value, style), column in zip(map(_split, row), columns, strict=True)
        ]
        for row in rows
    ]
    naturals = [
        max([len(c.header) if show_header else 1, *(cells[r][i].cell_len for r in range(len(cells)))])
        for i, c in enumerate(columns)
    ]
    minimums = [max(c.min_width, len(c.header)) for c in columns]  # a header is never cut
    widths = fit_widths([c.role for c in columns], naturals, console.width, minimums)
    table = Table(
        title=title,
        title_justify="left",
        show_header=show_header,
        box=box.SQUARE if show_header else None,
        show_edge=show_header,
    )
    kept = [i for i, w in enumerate(widths) if w > 0]
    for i in kept:
        column = columns[i]
        table.add_column(
            column.header,
            justify=column.justify,
            width=widths[i],
            no_wrap=not (column.role == "text" and column.wrap),
            overflow="fold" if column.role == "text" and column.wrap else "ellipsis",
        )
    for row in cells:
        table.add_row(*(row[i] for i in kept))
    console.print(table)
