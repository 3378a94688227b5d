"""JSON as every front end reads it (`decode_json`: HTTP bodies, MCP messages, import files,
`--queries`), and JSON Lines with their line numbers.

Lines are split on "\\n" only: `str.splitlines()` would also break on U+2028, U+2029 and NEL, which
are valid inside JSON strings. A trailing "\\r" (Windows line ends) and a UTF-8 byte-order mark at
the start are accepted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from memsearch.errors import ImportLineError, NumberTooLongError

BOM = "\ufeff"
# Python turns at most this many digits into an int (sys.int_info.default_max_str_digits: beyond,
# the conversion's time grows with the square of the length); a longer JSON number is refused.
MAX_INTEGER_DIGITS = 4300
TOO_DEEP = "nested too deeply"  # the message of the JSONDecodeError for nesting past the recursion limit


def split_lines(content: str | Iterable[str]) -> list[str]:
    """The lines of a text (or of an open text file), without their line ends or a leading BOM."""
    lines = content.split("\n") if isinstance(content, str) else [line.removesuffix("\n") for line in content]
    if lines and lines[0].startswith(BOM):
        lines[0] = lines[0][len(BOM) :]
    return [line.removesuffix("\r") for line in lines]


def decode_json(text: str | bytes, *, parse_constant: Callable[[str], Any] | None = None) -> Any:
    """`json.loads`, with nesting too deep for the decoder (Python's recursion limit, about a
    thousand levels) reported as a JSONDecodeError like any other malformed text, and a whole
    number of more than MAX_INTEGER_DIGITS digits refused as out of range (NumberTooLongError,
    naming where it is), as a schema refuses a number past its bounds. `parse_constant` reads
    NaN and Infinity, as json.loads's does."""
    too_long: list[int] = []  # the digits of the first number over the limit

    def whole_number(digits: str) -> object:
        if len(digits) - digits.startswith("-") <= MAX_INTEGER_DIGITS:
            return int(digits)
        too_long.append(len(digits) - digits.startswith("-"))
        return _TOO_LONG

    try:
        value = json.loads(text, parse_int=whole_number, parse_constant=parse_constant)
    except RecursionError:
        raise json.JSONDecodeError(TOO_DEEP, text if isinstance(text, str) else "", 0) from None
    if too_long:
        path = _path_to(value, _TOO_LONG)
        if path is not None:  # else a later duplicate key replaced it
            raise NumberTooLongError(path, too_long[0], MAX_INTEGER_DIGITS)
    return value


_TOO_LONG = object()  # stands for a number over the limit until the decoder is done


def _path_to(value: Any, target: object) -> tuple[str | int, ...] | None:
    """The keys and indexes from `value` down to the first `target` in document order, if any."""
    pending: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while pending:
        item, path = pending.pop()
        if item is target:
            return path
        if isinstance(item, dict):
            pending.extend((child, (*path, key)) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            pending.extend((item[index], (*path, index)) for index in reversed(range(len(item))))
    return None


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
        except NumberTooLongError as error:
            raise ImportLineError(source, number, str(error)) from None
    return rows
