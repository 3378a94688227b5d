"""What both SQL stores share: the memories table's columns, read and written through one
description of a memory's fields (`memsearch.models.MEMORY_FIELDS`), in each engine's dialect."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memsearch.models import GIVEN_FIELDS, MEMORY_FIELDS, Memory, MemoryField, NewMemory
from memsearch.timeutil import from_iso, to_iso

# Every column of a memory, in the order of the Memory dataclass (a row of them is one Memory).
MEMORY_COLUMNS = ", ".join(f.name for f in MEMORY_FIELDS)
# A memory's columns written from a NewMemory's fields of the same name.
GIVEN_COLUMNS = tuple(f.name for f in GIVEN_FIELDS)


def _json_text(value: Any) -> str:
    return json.dumps(dict(value), ensure_ascii=False)


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


@dataclass(frozen=True)
class Dialect:
    """How one engine holds each kind of field (MemoryField.kind), and its parameter mark."""

    name: str
    mark: str  # a query parameter: ? or %s
    readers: Mapping[str, Callable[[Any], Any]]  # kind → the stored value as the Memory field's
    writers: Mapping[str, Callable[[Any], Any]]  # kind → the Memory field's value as stored
    _read_at: tuple[tuple[int, Callable[[Any], Any]], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        read_at = tuple((at, self.readers[f.kind]) for at, f in enumerate(MEMORY_FIELDS) if f.kind in self.readers)
        object.__setattr__(self, "_read_at", read_at)

    def marks(self, count: int) -> str:
        return ", ".join([self.mark] * count)

    def row_to_memory(self, row: Sequence[Any]) -> Memory:
        """A row that starts with MEMORY_COLUMNS as a Memory."""
        values = list(row)
        del values[len(MEMORY_FIELDS) :]
        for at, read in self._read_at:
            values[at] = read(values[at])
        return Memory(*values)

    def write(self, memory_field: MemoryField, value: Any) -> Any:
        """A field's value as this engine stores it."""
        writer = self.writers.get(memory_field.kind)
        return value if writer is None or value is None else writer(value)

    def given_values(self, memory: NewMemory, now: datetime) -> list[Any]:
        """The values of GIVEN_COLUMNS for a new memory (a time it does not give is `now`)."""
        values = []
        for f in GIVEN_FIELDS:
            value = getattr(memory, f.name)
            values.append(self.write(f, now if value is None and f.kind == "time" else value))
        return values


SQLITE = Dialect(
    "sqlite",
    "?",
    readers={"time": from_iso, "bool": bool, "tags": lambda text: tuple(json.loads(text)), "json": json.loads},
    writers={"time": to_iso, "bool": int, "tags": lambda tags: json.dumps(list(tags), ensure_ascii=False),
             "json": _json_text},
)  # fmt: skip
POSTGRES = Dialect(
    "postgresql",
    "%s",
    readers={"time": _utc, "tags": tuple, "json": json.loads},
    writers={"tags": list, "json": _json_text},
)
