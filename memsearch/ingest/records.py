"""JSONL records: memories to import with their line numbers (lines read as `memsearch.jsonl`
reads them, every one checked before anything is used), and memories exported as such records."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from memsearch.errors import ImportLineError, InvalidInputError
from memsearch.jsonl import parse_jsonl
from memsearch.models import GIVEN_FIELDS, NewMemory, default_view_text, is_chunk_view

if TYPE_CHECKING:
    from memsearch.store.base import ExportedMemory, Scope, Store


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
