"""How each SQL engine spells what both stores share: how it holds each kind of memory field
(times, tags, JSON, vectors), marks a parameter, pages, and says "in this scope" (`Dialect.where`).
`SQLITE` and `POSTGRES` are the two; `store.sql.SQLStore` runs its shared methods through one."""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from memsearch.models import FIELDS_BY_NAME, GIVEN_FIELDS, MEMORY_FIELDS, Memory, MemoryField, NewMemory, content_hash
from memsearch.store.base import Scope
from memsearch.timeutil import from_iso, to_iso

if TYPE_CHECKING:
    import numpy as np

_CREATED_AT = FIELDS_BY_NAME["created_at"]
SQLITE_INT_MAX = 2**63 - 1  # the largest integer SQLite holds
Codecs = Mapping[str, Callable[[Any], Any]]


def _json_text(value: Any) -> str:
    return json.dumps(dict(value), ensure_ascii=False)


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


class Dialect:
    """How one engine holds each kind of field (MemoryField.kind), marks a parameter and says the
    few conditions the two engines spell differently."""

    name: ClassVar[str]  # the backend's name in `memsearch doctor`
    mark: ClassVar[str]  # a query parameter: ? or %s
    true: ClassVar[str]  # a condition that always holds
    same: ClassVar[str]  # a comparison where NULL equals NULL
    vector_column: ClassVar[str]  # the vectors' column in the vectors and views tables
    utc_day: ClassVar[str]  # created_at's UTC day as YYYY-MM-DD (stats' growth)
    each_tag: ClassVar[str]  # a memory m's tags as rows t(value), joined in FROM
    readers: ClassVar[Codecs]  # kind → the stored value as the Memory field's
    writers: ClassVar[Codecs]  # kind → the Memory field's value as stored

    def __init__(self) -> None:
        self._read_at = tuple((at, read) for at, f in enumerate(MEMORY_FIELDS) if (read := self.readers.get(f.kind)))

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

    def new_values(self, memory: NewMemory, now: datetime, parent_id: int | None) -> builtins.list[Any]:
        """The values of NEW_COLUMNS for a new memory (a time it does not give is `now`)."""
        values = []
        for f in GIVEN_FIELDS:
            value = getattr(memory, f.name)
            values.append(self.write(f, now if value is None and f.kind == "time" else value))
        return [*values, content_hash(memory.text), parent_id]

    def where(self, scope: Scope, alias: str = "m") -> tuple[str, builtins.list[Any]]:
        """A condition over the memories table (under `alias`) for `scope`, and its parameters."""
        clauses: builtins.list[str] = []
        params: builtins.list[Any] = []
        for column, value in (
            ("project", scope.project),
            ("namespace", scope.namespace),
            ("conversation", scope.conversation),
        ):
            if value is not None:
                clauses.append(f"{alias}.{column} = {self.mark}")
                params.append(value)
        if scope.tags:
            self._has_tags(f"{alias}.tags", scope.tags, clauses, params)
        for bound, moment in ((">=", scope.since), ("<=", scope.until)):
            if moment is not None:
                clauses.append(f"{alias}.created_at {bound} {self.mark}")
                params.append(self.write(_CREATED_AT, moment))
        for column, values in (("kind", scope.kinds), ("role", scope.roles), ("session", scope.sessions)):
            if values:
                self._one_of(f"{alias}.{column}", values, clauses, params)
        return (" AND ".join(clauses) or self.true), params

    def page(self, limit: int | None, offset: int) -> tuple[Any, Any]:
        """LIMIT and OFFSET's parameters (a limit of None: no limit)."""
        return limit, offset

    def time_value(self, moment: datetime) -> Any:
        """A time as this engine stores it (the created_at column's way)."""
        return self.write(_CREATED_AT, moment)

    def read_time(self, stored: Any) -> datetime:
        """A stored time (as a query returns it) as an aware datetime."""
        return self.readers.get("time", _utc)(stored)  # type: ignore[no-any-return]

    def vector_value(self, vector: np.ndarray) -> Any:
        """A vector as this engine binds it."""
        raise NotImplementedError

    def read_vector(self, stored: Any) -> np.ndarray:
        """A stored vector (as a query returns it) as float32."""
        raise NotImplementedError

    def _has_tags(self, column: str, tags: Sequence[str], clauses: list[str], params: list[Any]) -> None:
        raise NotImplementedError

    def _one_of(self, column: str, values: Sequence[str], clauses: list[str], params: list[Any]) -> None:
        raise NotImplementedError


class SQLiteDialect(Dialect):
    name, mark, true, same, vector_column = "sqlite", "?", "1", "IS ?", "vector"
    utc_day = "substr(created_at, 1, 10)"  # stored in UTC, so its first 10 characters (the index serves it)
    each_tag = "json_each(m.tags) AS t"
    readers: ClassVar[Codecs] = {
        "time": from_iso,
        "bool": bool,
        "tags": lambda text: tuple(json.loads(text)),
        "json": json.loads,
    }
    writers: ClassVar[Codecs] = {
        "time": to_iso,
        "bool": int,
        "tags": lambda tags: json.dumps(list(tags), ensure_ascii=False),
        "json": _json_text,
    }

    def vector_value(self, vector: np.ndarray) -> bytes:
        return vector.astype("<f4").tobytes()

    def read_vector(self, stored: Any) -> np.ndarray:
        import numpy as np

        return np.frombuffer(stored, dtype="<f4").astype(np.float32)

    def page(self, limit: int | None, offset: int) -> tuple[Any, Any]:
        return -1 if limit is None else min(limit, SQLITE_INT_MAX), min(offset, SQLITE_INT_MAX)

    def _has_tags(self, column: str, tags: Sequence[str], clauses: list[str], params: list[Any]) -> None:
        for tag in tags:
            clauses.append(f"EXISTS (SELECT 1 FROM json_each({column}) WHERE json_each.value = ?)")
            params.append(tag)

    def _one_of(self, column: str, values: Sequence[str], clauses: list[str], params: list[Any]) -> None:
        clauses.append(f"{column} IN ({','.join('?' * len(values))})")
        params.extend(values)


class PostgresDialect(Dialect):
    name, mark, true, same, vector_column = "postgresql", "%s", "true", "IS NOT DISTINCT FROM %s", "embedding"
    utc_day = "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
    each_tag = "unnest(m.tags) AS t(value)"
    readers: ClassVar[Codecs] = {"time": _utc, "tags": tuple, "json": json.loads}
    writers: ClassVar[Codecs] = {"tags": list, "json": _json_text}

    def vector_value(self, vector: np.ndarray) -> np.ndarray:
        return vector.astype("float32", copy=False)

    def read_vector(self, stored: Any) -> np.ndarray:
        import numpy as np

        return np.asarray(stored.to_numpy() if hasattr(stored, "to_numpy") else stored, dtype=np.float32)

    def _has_tags(self, column: str, tags: Sequence[str], clauses: list[str], params: list[Any]) -> None:
        clauses.append(f"{column} @> %s::text[]")
        params.append(list(tags))

    def _one_of(self, column: str, values: Sequence[str], clauses: list[str], params: list[Any]) -> None:
        clauses.append(f"{column} = ANY(%s::text[])")
        params.append(list(values))


SQLITE = SQLiteDialect()
POSTGRES = PostgresDialect()
