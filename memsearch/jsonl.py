"""JSON Lines with their line numbers, read the one way every JSONL input is (imports, `--queries`).

Lines are split on "\\n" only: `str.splitlines()` would also break on U+2028, U+2029 and NEL, which
are valid inside JSON strings. A trailing "\\r" (Windows line ends) and a UTF-8 byte-order mark at
the start are accepted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from memsearch.errors import ImportLineError

BOM = "\ufeff"


def split_lines(content: str | Iterable[str]) -> list[str]:
    """The lines of a text (or of an open text file), without their line ends or a leading BOM."""
    lines = content.split("\n") if isinstance(content, str) else [line.removesuffix("\n") for line in content]
    if lines and lines[0].startswith(BOM):
        lines[0] = lines[0][len(BOM) :]
    return [line.removesuffix("\r") for line in lines]


def decode_json(text: str) -> Any:
    """`json.loads`, with nesting too deep for the decoder (Python's recursion limit, about a
    thousand levels) reported as a JSONDecodeError like any other malformed text."""
    try:
        return json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None


def parse_jsonl(content: str | Iterable[str], source: str) -> list[tuple[int, Any]]:
    """The decoded objects of a JSONL text with their line numbers; blank lines are skipped."""
    rows = []
    for number, line in enumerate(split_lines(content), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, decode_json(line)))
        except json.JSONDecodeError as error:
            raise ImportLineError(source, number, f"not valid JSON ({error.msg} at column {error.colno})") from None
    return rows
