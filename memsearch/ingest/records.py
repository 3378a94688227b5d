"""JSONL records with their line numbers: memories to import and `--queries` search requests.

Lines are split on "\\n" only: `str.splitlines()` would also break on U+2028, U+2029 and NEL, which
are valid inside JSON strings. A trailing "\\r" (Windows line ends) and a UTF-8 byte-order mark at
the start are accepted. Every line is checked before anything is used.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from memsearch.arguments import check_request
from memsearch.errors import ImportLineError, InvalidInputError
from memsearch.models import GIVEN_FIELDS, NewMemory, check_text, default_view_text, is_chunk_view

if TYPE_CHECKING:
    from memsearch.retrieval.pipeline import SearchRequest
    from memsearch.store.base import ExportedMemory

BOM = "\ufeff"
QUERY_FIELDS = ("query", "k", "mode")


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


def parse_memories(content: str | Iterable[str], source: str) -> tuple[list[int], list[NewMemory]]:
    """The memories of a JSONL text and their line numbers; the first bad line is an error."""
    numbers = []
    memories = []
    seen_keys: dict[str, int] = {}
    for number, obj in parse_jsonl(content, source):
        try:
            memory = NewMemory.from_json(obj)
        except InvalidInputError as error:
            raise ImportLineError(source, number, str(error)) from None
        if memory.key is not None:
            if memory.key in seen_keys:
                raise ImportLineError(source, number, f"key {memory.key!r} is used on line {seen_keys[memory.key]} too")
            seen_keys[memory.key] = number
        numbers.append(number)
        memories.append(memory)
    return numbers, memories


def export_record(exported: ExportedMemory, parent_key: str | None) -> dict[str, Any]:
    """A memory as a JSONL import line that stores it again as it is (`NewMemory.from_json`): its
    text, key, time, scoring and scope fields, tags, metadata, its place in a conversation and
    the texts of its views (those that are not its own text). Ids, access counts, memory scores and
    consolidation marks belong to the store (`memsearch copy` keeps them); vectors are made again
    by the importing store's model. Fields without a value are left out."""
    memory = exported.memory
    views = {
        view: text
        for view, text in exported.lexical_views.items()
        if text != default_view_text(memory.kind, view, memory.text)
    }
    # a long note's chunks are made again from its text by the importing store
    views.update((view, text) for view, (text, _) in exported.views.items() if not is_chunk_view(view))
    fields = memory.json_fields(GIVEN_FIELDS)
    record: dict[str, Any] = {
        "text": fields.pop("text"),  # first: a line reads as the note it stores
        **fields,
        "kind": memory.kind if memory.kind != "note" else None,  # the default kind goes without saying
        "parent_key": parent_key,
        "views": dict(sorted(views.items())) or None,
    }
    return {name: value for name, value in record.items() if value is not None}


def request_from_json(obj: Any, defaults: Mapping[str, Any]) -> SearchRequest:
    """A search request from a JSON object {"query", optional "k" and "mode"}; every other request
    field comes from `defaults` (which also gives `k` and `mode` when the object does not)."""
    from memsearch.retrieval.pipeline import SearchRequest

    if not isinstance(obj, dict) or not isinstance(obj.get("query"), str):
        raise InvalidInputError('expected an object with a "query" string')
    unknown = sorted(set(obj) - set(QUERY_FIELDS))
    if unknown:
        raise InvalidInputError(f"unknown field {unknown[0]!r} (known: {', '.join(QUERY_FIELDS)})")
    check_text("query", obj["query"])
    k = obj.get("k", defaults.get("k"))
    if k is not None and (isinstance(k, bool) or not isinstance(k, int)):
        raise InvalidInputError(f"k must be a whole number, not {k!r}")
    fields = {**defaults, **obj, "k": k}
    return check_request(SearchRequest(**fields))


def parse_queries(content: str | Iterable[str], source: str, defaults: Mapping[str, Any]) -> list[SearchRequest]:
    """Requests from a JSONL of {"query", optional "k" and "mode"}; all lines are checked first."""
    _check_defaults(defaults)
    requests = []
    for number, obj in parse_jsonl(content, source):
        try:
            requests.append(request_from_json(obj, defaults))
        except InvalidInputError as error:
            raise ImportLineError(source, number, str(error)) from None
    if not requests:
        raise InvalidInputError(f"{source} has no queries")
    return requests


def _check_defaults(defaults: Mapping[str, Any]) -> None:
    """The defaults of `parse_queries` must be SearchRequest fields (other than the query)."""
    from dataclasses import fields

    from memsearch.retrieval.pipeline import SearchRequest

    known = [f.name for f in fields(SearchRequest) if f.name != "query"]
    unknown = sorted(repr(name) for name in defaults if name not in known)
    if unknown:
        raise InvalidInputError(f"{unknown[0]} is not a search request field (known: {', '.join(known)})")
