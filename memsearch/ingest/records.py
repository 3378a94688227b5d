"""JSONL records: memories to import with their line numbers (lines read as `memsearch.jsonl`
reads them, every one checked before anything is used; the records and documents of read
commands too), and memories exported as such records."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memsearch.errors import ImportLineError, InvalidInputError, NumberTooLongError
from memsearch.jsonl import BOM, decode_json, parse_jsonl, split_lines
from memsearch.models import GIVEN_FIELDS, NOT_IMPORTED_FIELDS, NewMemory, default_view_text, is_chunk_view

if TYPE_CHECKING:
    from memsearch.store.base import ExportedMemory, Scope, Store

# Where a read command's JSON document holds its memories: a search's results, a timeline's memories.
MEMORY_LISTS = ("results", "memories")


@dataclass(frozen=True)
class ParsedMemories:
    """The memories of an import text, each with its number: its line when every line holds one
    memory (`unit` "line"), else its place among the memories ("item")."""

    numbers: list[int]
    memories: list[NewMemory]
    unit: str = "line"
    ignored: tuple[str, ...] = ()  # fields of read commands' records that an import takes no value from
    repeats: int = 0  # records of a memory given earlier in the text (same id, same fields), left out


def parse_memories(content: str | Iterable[str], source: str) -> ParsedMemories:
    """The memories of a JSONL text (`export`'s lines, or `list`'s, `search`'s, …) or of a JSON
    document (`list -f json`, `search -f json`, `get -f json`); the first bad record is an error.
    Fields a read command adds that an import cannot take (ids, use counts, scores) are left out
    and named; a memory given twice (same id, same fields: a batch search finding it twice) once."""
    values, whole = decoded_values(content if isinstance(content, str) else "".join(content), source)
    records = [(line, record) for line, value in values for record in memory_records(value)]
    unit = "line" if not whole and len(records) == len(values) else "item"
    numbers: list[int] = []
    memories: list[NewMemory] = []
    seen_keys: dict[str, int] = {}
    seen_records: set[str] = set()
    ignored: set[str] = set()
    repeats = 0
    for position, (line, record) in enumerate(records, start=1):
        number = line if unit == "line" else position
        if isinstance(record, dict) and (found := NOT_IMPORTED_FIELDS.intersection(record)):
            ignored |= found
            fields = {name: value for name, value in record.items() if name not in NOT_IMPORTED_FIELDS}
            if (identity := _identity(record.get("id"), fields)) is not None:
                if identity in seen_records:
                    repeats += 1
                    continue
                seen_records.add(identity)
            record = fields
        try:
            memory = NewMemory.from_json(record)
        except InvalidInputError as error:
            raise ImportLineError(source, number, str(error), unit=unit) from None
        if memory.key is not None:
            if memory.key in seen_keys:
                raise ImportLineError(
                    source, number, f"key {memory.key!r} is used on {unit} {seen_keys[memory.key]} too", unit=unit
                )
            seen_keys[memory.key] = number
        numbers.append(number)
        memories.append(memory)
    return ParsedMemories(numbers, memories, unit, tuple(sorted(ignored)), repeats)


def decoded_values(text: str, source: str) -> tuple[list[tuple[int, Any]], bool]:
    """The JSON values of an import text with their line numbers: one a line (JSONL), or the whole
    text when its first line is not JSON of its own (a document spread over lines); whether it is."""
    lines = split_lines(text)
    first = next((line for line in lines if line.strip()), None)
    if first is None:
        return [], False
    try:
        decode_json(first)
    except NumberTooLongError:
        pass  # JSON of its own: parse_jsonl names its line
    except json.JSONDecodeError:
        try:
            return [(1, decode_json(text.removeprefix(BOM)))], True
        except json.JSONDecodeError as error:
            raise ImportLineError(
                source, error.lineno, f"not valid JSON ({error.msg} at column {error.colno})"
            ) from None
        except NumberTooLongError as error:
            raise InvalidInputError(f"{source}: {error}; nothing from this file was stored") from None
    return parse_jsonl(lines, source), False


def memory_records(value: Any) -> list[Any]:
    """The memory records of a JSON value: the value, the items of a list, the memories of a read
    command's document (a batch search is a list of them). Anything else is left to be refused."""
    records = []
    for item in value if isinstance(value, list) else [value]:
        held = _held_memories(item)
        records += [item] if held is None else held
    return records


def _held_memories(value: Any) -> list[Any] | None:
    if not isinstance(value, dict) or "text" in value:
        return None
    return next((value[name] for name in MEMORY_LISTS if isinstance(value.get(name), list)), None)


def _identity(stored_id: Any, fields: dict[str, Any]) -> str | None:
    """What makes two records of a read command the same memory: the id of its store and equal
    fields (texts of two stores' lists may share ids, not memories)."""
    if stored_id is None:
        return None
    try:
        return json.dumps([stored_id, fields], sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return None


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


def export_records(opened: Callable[[], Store], scope: Scope) -> Iterator[dict[str, Any]]:
    """Every memory in scope of the store `opened` gives as an import record (`export_record`),
    oldest id first. The store is opened on the first record asked for."""
    store = opened()
    keys: dict[int, str | None] = {}  # parent id → its key (session chunks precede their turns)
    for exported in store.export():
        memory = exported.memory
        if memory.kind == "session":
            keys[memory.id] = memory.key
        if not scope.admits(memory):
            continue
        parent = memory.parent_id
        if parent is not None and parent not in keys:
            keys[parent] = store.get(parent).key
        yield export_record(exported, keys[parent] if parent is not None else None)
