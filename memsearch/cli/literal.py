"""Stored text shown as literal text: the one place every renderer turns data into something a
terminal (or a plain-text pipe) receives.

Stored text is data. It is never parsed as Rich markup (`[/usr/local/etc]`, `[link=…]` stay as
typed), and no character in it may drive the terminal: every control character (C0, DEL, C1),
the line and paragraph separators and the bidirectional overrides are shown as a Python-style
escape, `\\x1b` or `\\u202e`. JSON output keeps the real text.
"""

from __future__ import annotations

import re
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


def multiline(text: str) -> str:
    """The text with its line breaks and tabs kept (CR LF as LF) and every other control character visible."""
    return _MULTILINE_CONTROL.sub(_escape, text.replace("\r\n", "\n"))


def literal(value: object, *, style: str = "", limit: int | None = None, lines: bool = False) -> Text:
    """A Rich Text of stored data, never markup: one line (see `one_line`) or, with `lines`, the
    text's own lines (see `multiline`)."""
    from rich.text import Text

    text = "" if value is None else str(value)
    return Text(multiline(text) if lines else one_line(text, limit), style=style)
