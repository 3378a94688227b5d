"""Stored text as a terminal or a plain-text pipe may receive it, with no Rich in sight (the CLI's
renderers, `memsearch.cli.literal`, and eval's reports use it).

No character of stored text may drive the terminal: every control character (C0, DEL, C1), the
line and paragraph separators and the bidirectional overrides are shown as a Python-style escape,
`\\x1b` or `\\u202e`. JSON output keeps the real text.
"""

from __future__ import annotations

import re

__all__ = ["BLANKS", "multiline", "one_line", "one_line_offsets", "visible"]

# Characters that move the cursor, change the terminal's state or reorder what is shown.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# White space folded into one space on one-line views (a cell, a preview, a plain-text row).
BLANKS = re.compile("[ \t\n\r\v\f\x85\u2028\u2029]+")
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
    flat = BLANKS.sub(" ", "" if value is None else str(value)).strip()
    if limit is not None and len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return visible(flat)


def one_line_offsets(text: str, limit: int | None = None) -> tuple[str, list[int]]:
    """`one_line(text, limit)` and, for each offset into `text` (0 to its length), the offset in
    the line where that character begins (or would have, for one folded away or cut off)."""
    pieces = list(text)  # what each character shows as: a run of white space shows as one space
    for run in BLANKS.finditer(text):
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


def multiline(text: str) -> str:
    """The text with its line breaks and tabs kept (CR LF as LF) and every other control character visible."""
    return _MULTILINE_CONTROL.sub(_escape, text.replace("\r\n", "\n"))
