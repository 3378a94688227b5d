"""Stored text shown as literal text: the one place every renderer turns data into something a
terminal (or a plain-text pipe) receives.

Stored text is data. It is never parsed as Rich markup (`[/usr/local/etc]`, `[link=…]` stay as
typed), and no character in it may drive the terminal: every control character (C0, DEL, C1),
the line and paragraph separators and the bidirectional overrides are shown as a Python-style
escape, `\\x1b` or `\\u202e`. JSON output keeps the real text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memsearch.plain_text import BLANKS, multiline, one_line, one_line_offsets, visible

if TYPE_CHECKING:  # Rich is imported when a table is drawn (machine output never loads it)
    from rich.text import Text

__all__ = ["literal", "literal_marked", "multiline", "one_line", "one_line_offsets", "visible"]


def literal_marked(
    value: str, spans: Sequence[tuple[int, int]], *, style: str = "", mark: str, limit: int | None = None
) -> Text:
    """`literal(value, style=style, limit=limit)` with the characters of `spans` (offsets into
    `value`) styled `mark`: the text stays literal, only styles are added."""
    from rich.text import Text

    value, spans = _snippet(value, spans, limit)
    line, at = one_line_offsets(value, limit)
    shown = Text(line, style=style)
    for start, end in spans:
        if 0 <= start < end <= len(value) and at[start] < at[end]:
            shown.stylize(mark, at[start], at[end])
    return shown


def _snippet(value: str, spans: Sequence[tuple[int, int]], limit: int | None) -> tuple[str, list[tuple[int, int]]]:
    """The text from a little before its first span, after "…", when the span would be cut off
    or nearly (a preview `limit` characters long): what a search result shows is its match."""
    first = min((start for start, _ in spans), default=0)
    if limit is None or first < limit * 2 // 3:
        return value, list(spans)
    cut = first - limit // 3
    blank = BLANKS.search(value, cut, first)  # start at a word when one begins near
    start = blank.end() if blank is not None else cut
    return "…" + value[start:], [(s - start + 1, e - start + 1) for s, e in spans if s >= start]


def literal(value: object, *, style: str = "", limit: int | None = None, lines: bool = False) -> Text:
    """A Rich Text of stored data, never markup: one line (see `one_line`) or, with `lines`, the
    text's own lines (see `multiline`)."""
    from rich.text import Text

    text = "" if value is None else str(value)
    return Text(multiline(text) if lines else one_line(text, limit), style=style)
