"""The SQLite store's reads of memories: by id, by scope, counts and the speakers in scope."""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from memsearch.errors import MemoryNotFoundError
from memsearch.models import FIELDS_BY_NAME, Memory
from memsearch.store.base import EVERYTHING, Scope
from memsearch.store.dialects import SQLITE, SQLITE_INT_MAX
from memsearch.store.sql import SQLStore
from memsearch.store.sqlite_driver import sqlite3

_row_to_memory = SQLITE.row_to_memory


def fits_sqlite(number: int) -> bool:
    """Whether SQLite can hold `number` (a larger one would raise OverflowError when bound)."""
    return -SQLITE_INT_MAX - 1 <= number <= SQLITE_INT_MAX


class SQLiteReads(SQLStore):
    """The SQLite store's reads of memories (a part of SQLiteStore)."""

    _roles_memo: dict[Scope, tuple[int, builtins.list[str]]]  # scope → (generation, roles)
    _pending_memo: tuple[int, int] | None  # (generation, memories waiting for vectors)

    if TYPE_CHECKING:  # what the store provides

        @property
        def _db(self) -> sqlite3.Connection: ...

        def generation(self) -> int: ...

    def pending_count(self) -> int:
        """How many memories wait for their vectors, counted once a generation (a search asks each
        time: 9 ms at a million waiting); every write that changes which wait moves it on."""
        if self._db.in_transaction:  # inside a write: not yet a generation's
            return super().pending_count()
        generation = self.generation()
        known = self._pending_memo
        if known is None or known[0] != generation:
            known = (generation, super().pending_count())
            self._pending_memo = known
        return known[1]

    def get(self, memory_id: int) -> Memory:
        if not fits_sqlite(memory_id):  # an id SQLite cannot hold names no memory
            raise MemoryNotFoundError(f"no memory with id {memory_id}")
        return super().get(memory_id)

    def get_many(self, ids: Sequence[int]) -> dict[int, Memory]:
        found: dict[int, Memory] = {}
        unique = [i for i in dict.fromkeys(int(i) for i in ids) if fits_sqlite(i)]
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._db.execute(f"{self.memory_select} WHERE m.id IN ({marks})", chunk):
                found[row[0]] = _row_to_memory(row)
        return found

    def fields_of(self, ids: Sequence[int], names: Sequence[str]) -> dict[int, tuple[Any, ...]]:
        """See SearchBackend.fields_of: one query of those columns, each decoded as get_many does."""
        kinds = [FIELDS_BY_NAME[name].kind for name in names]  # a name not a field: KeyError
        decode = [(at, read) for at, kind in enumerate(kinds, start=1) if (read := SQLITE.readers.get(kind))]
        selected = ", ".join(["m.id", *(f"m.{name}" for name in names)])
        found: dict[int, tuple[Any, ...]] = {}
        unique = [i for i in dict.fromkeys(int(i) for i in ids) if fits_sqlite(i)]
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            sql = f"SELECT {selected} FROM memories m WHERE m.id IN ({','.join('?' * len(chunk))})"
            rows = self._db.execute(sql, chunk).fetchall()
            if rows:  # decoded column by column
                columns: builtins.list[tuple[Any, ...]] = list(zip(*rows, strict=True))
                for at, read in decode:
                    columns[at] = tuple(map(read, columns[at]))
                values = zip(*columns[1:], strict=True) if names else (() for _ in rows)
                found.update(zip(columns[0], values, strict=True))
        return found

    def iter_texts(self) -> Iterator[tuple[int, str]]:
        yield from self._db.execute("SELECT id, text FROM memories ORDER BY id")

    def count(self, scope: Scope = EVERYTHING) -> int:
        if scope.is_everything:
            return int(self._db.execute("SELECT count(*) FROM memories").fetchone()[0])
        if scope.only_kinds:
            return self.count() - len(self._ids_of_other_kinds(scope.kinds))
        where, params = SQLITE.where(scope)
        return int(self._db.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone()[0])

    def _scoped_ids(self, scope: Scope) -> builtins.list[int]:
        where, params = SQLITE.where(scope)
        return [row[0] for row in self._db.execute(f"SELECT m.id FROM memories m WHERE {where}", params)]

    def roles(self, scope: Scope) -> builtins.list[str]:
        """The speakers in scope; kept until the next write (every search asks, and finding them
        reads every memory: ~1 ms at 10k memories, far more at a million)."""
        generation = self.generation()
        known = self._roles_memo.get(scope)
        if known is not None and known[0] == generation:
            return list(known[1])
        where, params = SQLITE.where(scope)
        sql = f"SELECT DISTINCT m.role FROM memories m WHERE m.role IS NOT NULL AND {where} ORDER BY 1"
        found = [row[0] for row in self._db.execute(sql, params)]
        if len(self._roles_memo) >= 64:
            self._roles_memo.clear()
        self._roles_memo[scope] = (generation, found)
        return list(found)

    def _ids_of_other_kinds(self, kinds: Sequence[str]) -> builtins.list[int]:
        """The memories whose kind is not one of `kinds` (through the kind index: cheap when few)."""
        marks = ",".join("?" * len(kinds))
        return [row[0] for row in self._db.execute(f"SELECT id FROM memories WHERE kind NOT IN ({marks})", kinds)]
