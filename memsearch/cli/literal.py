"""Stored text shown as literal text: the one place every renderer turns data into something a
terminal (or a plain-text pipe) receives.

Stored text is data. It is never parsed as Rich markup (`[/usr/local/etc]`, `[link=…]` stay as
typed), and no character in it may drive the terminal: every control character (C0, DEL, C1),
the line and paragraph separators and the bidirectional overrides are shown as a Python-style
escape, `\\x1b` or `\\u202e`. JSON output keeps the real text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Rich is imported when a table is drawn (machine output never loads it)
    from rich.text import Text

# Characters that move the cursor, change the terminal's state or reorder what is shown.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# White space folded into one space on one-line views (a cell, a preview, a plain-text row).
_BLANKS = re.compile("[ \t\n\r\v\f\x85\u2028\u2029]+")
_MULTILINE_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """The text with every control character as an escape (ESC as `\\x1b`)."""
    return _CONTROL.sub(_escape, text)


def one_line(value: object, limit: int | None = None) -> str:
    """The value as one line: runs of white space (line breaks, tabs) as one space, control
    characters visible, cut to `limit` characters of the original with "…"."""
    flat = _BLANKS.sub(" ", "" if value is None else str(value)).strip()
    if limit is not None and len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return visible(flat)


def one_line_offsets(text: str, limit: int | None = None) -> tuple[str, list[int]]:
    """`one_line(text, limit)` and, for each offset into `text` (0 to its length), the offset in
    the line where that character begins (or would have, for one folded away or cut off)."""
    pieces = list(text)  # what each character shows as: a run of white space shows as one space
    for run in _BLANKS.finditer(text):
        pieces[run.start() : run.end()] = [" "] + [""] * (run.end() - run.start() - 1)
    for order in (range(len(pieces)), range(len(pieces) - 1, -1, -1)):  # strip, as str.strip does
        for i in order:
            if pieces[i] and not pieces[i].isspace():
                break
            pieces[i] = ""
    suffix = ""
    if limit is not None and sum(1 for piece in pieces if piece) > limit:
        kept = 0
        for i, piece in enumerate(pieces):
            if piece:
                kept += 1
                if kept > limit - 1:
                    pieces[i] = ""
        suffix = "…"
    at, offset = [], 0
    for piece in pieces:
        at.append(offset)
        offset += len(visible(piece))
    at.append(offset)
    return "".join(visible(piece) for piece in pieces) + suffix, at


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
    blank = _BLANKS.search(value, cut, first)  # start at a word when one begins near
    start = blank.end() if blank is not None else cut
    return "…" + value[start:], [(s - start + 1, e - start + 1) for s, e in spans if s >= start]


def multiline(text: str) -> str:
    """The text with its line breaks and tabs kept (CR LF as LF) and every other control character visible."""
    return _MULTILINE_CONTROL.sub(_escape, text.replace("\r\n", "\n"))


def literal(value: object, *, style: str = "", limit: int | None = None, lines: bool = False) -> Text:
    """A Rich Text of stored data, never markup: one line (see `one_line`) or, with `lines`, the
    text's own lines (see `multiline`)."""
    from rich.text import Text

    text = "" if value is None else str(value)
    return Text(multiline(text) if lines else one_line(text, limit), style=style)
