"""A search's view of the store's own state (the meta rows, the count of memories that wait for
vectors), read by one statement inside `one_search` and again only after a write transaction of
this thread's; outside a search each read asks the database. Both SQL stores hold it (`SQLStore`)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from memsearch.store.base import INDEX_STATE_KEY
from memsearch.store.dialects import Dialect

# One search's store state in one statement: the meta rows but the notes index's state, and the
# count of memories that wait for vectors (under the key NULL). Both dialects read it as it is.
META_STATE_SQL = f"SELECT key, value FROM meta WHERE key <> '{INDEX_STATE_KEY}'"
SEARCH_STATE_SQL = f"{META_STATE_SQL} UNION ALL SELECT NULL, CAST(count(*) AS TEXT) FROM pending_vectors"


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class _SearchState:
    """What one_search read (None: not yet, or to be read again) and the writes stamp then."""

    values: dict[str | None, str | None] | None = None
    stamp: object = None


class SearchStateReads:
    """`one_search` and the meta reads that answer from it. A store supplies its connection
    (`_db`), whether it is inside a transaction and what moves when it writes; each write
    transaction calls `_count_write` when it ends."""

    dialect: ClassVar[Dialect]
    # What one_search reads (a store that keeps the pending count otherwise reads the meta rows only).
    search_state_sql: ClassVar[str] = SEARCH_STATE_SQL
    _local: threading.local

    @property
    def _db(self) -> Any:
        raise NotImplementedError

    @contextlib.contextmanager
    def one_search(self) -> Iterator[None]:
        """See SearchBackend.one_search: inside it (on this thread), the meta rows and the count
        of memories that wait for vectors are read by one statement on the first ask, and again
        only after a write of this store's (or when a transaction finds them moved on)."""
        if getattr(self._local, "search_state", None) is not None:  # inside one already
            yield
            return
        self._local.search_state = _SearchState()
        try:
            yield
        finally:
            self._local.search_state = None

    def _in_transaction(self) -> bool:
        """Whether this thread's connection is inside a transaction (its reads are its own)."""
        raise NotImplementedError

    def _count_write(self) -> None:
        """A write transaction of this thread's ended (committed or not): see _writes_stamp."""
        self._local.writes = getattr(self._local, "writes", 0) + 1

    def _writes_stamp(self) -> object:
        """What moves when this thread's connection writes: each write transaction, even one that
        changed nothing here (an INSERT OR IGNORE another process beat), since what it read may be
        newer than the search's state."""
        return getattr(self._local, "writes", 0)

    def _search_state(self) -> dict[str | None, str | None] | None:
        """Inside one_search, outside a transaction: the meta values by key (the notes index's
        state left out: it can be large and no search reads it) and, under the key None, the
        pending count (with SEARCH_STATE_SQL); else None."""
        state: _SearchState | None = getattr(self._local, "search_state", None)
        if state is None or self._in_transaction():
            return None
        stamp = self._writes_stamp()
        if state.values is None or state.stamp != stamp:
            state.values, state.stamp = dict(self._db.execute(self.search_state_sql).fetchall()), stamp
        return state.values

    def _meta(self, key: str) -> str | None:
        if key != INDEX_STATE_KEY and (values := self._search_state()) is not None:
            return values.get(key)
        row = self._db.execute(f"SELECT value FROM meta WHERE key = {self.dialect.mark}", (key,)).fetchone()
        value: str | None = row[0] if row else None
        state: _SearchState | None = getattr(self._local, "search_state", None)
        if state is not None and state.values is not None and state.values.get(key) != value:
            state.values = None  # a transaction saw the store moved on: read again on the next ask
        return value
