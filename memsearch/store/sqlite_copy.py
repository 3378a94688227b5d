"""The SQLite store's copy between stores (memsearch.store.copy): every memory with all it holds
read out in id order, and written into an empty store keeping its ids (a part of SQLiteStore)."""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import InvalidInputError
from memsearch.models import MEMORY_FIELDS, EmbeddingModelInfo
from memsearch.store.base import ExportedMemory
from memsearch.store.dialects import SQLITE
from memsearch.store.fts import fts_row
from memsearch.store.sql import MEMORY_COLUMNS, REFERS, SQLStore
from memsearch.store.sqlite_driver import sqlite3

if TYPE_CHECKING:
    from memsearch.store.sqlite_fts import Fts5Index

_row_to_memory = SQLITE.row_to_memory


class SQLiteCopy(SQLStore):
    """Export and restore (a part of SQLiteStore)."""

    path: Path

    if TYPE_CHECKING:  # what the store provides
        lexical: Fts5Index

        @property
        def _db(self) -> sqlite3.Connection: ...

        def transaction(self, busy_timeout_ms: int | None = None) -> contextlib.AbstractContextManager[None]: ...

        def _bump_generation(self) -> None: ...

    def export(self, batch: int = 1000) -> Iterator[ExportedMemory]:
        """Every memory with all it holds, in id order (for `copy_store`)."""
        import numpy as np

        last = 0
        while True:
            rows = self._db.execute(
                f"SELECT m.*, f.context, f.prev FROM ({self.memory_select}) m JOIN memories_fts f ON f.rowid = m.id "
                "WHERE m.id > ? ORDER BY m.id LIMIT ?",
                (last, batch),
            ).fetchall()
            if not rows:
                return
            ids = [row[0] for row in rows]
            marks = ",".join("?" * len(ids))
            vectors = {
                memory_id: np.frombuffer(blob, dtype="<f4").astype(np.float32)
                for memory_id, blob in self._db.execute(
                    f"SELECT memory_id, vector FROM vectors WHERE memory_id IN ({marks})", ids
                )
            }
            views: dict[int, dict[str, tuple[str, np.ndarray | None]]] = {}
            for memory_id, view, text, blob in self._db.execute(
                f"SELECT memory_id, view, text, vector FROM views WHERE memory_id IN ({marks}) "
                "ORDER BY memory_id, view",
                ids,
            ):
                vector = None if blob is None else np.frombuffer(blob, dtype="<f4").astype(np.float32)
                views.setdefault(memory_id, {})[view] = (text, vector)
            for row in rows:
                lexical_views = {"context": row[-2], "prev": row[-1]}
                yield ExportedMemory(_row_to_memory(row), lexical_views, vectors.get(row[0]), views.get(row[0], {}))
            last = ids[-1]

    def restore(self, memories: Iterable[ExportedMemory], model: EmbeddingModelInfo | None) -> int:
        """Write exported memories into this empty store, keeping their ids, in one transaction."""
        written = 0
        links: builtins.list[tuple[Any, ...]] = []
        with self.transaction():
            if self._db.execute("SELECT 1 FROM memories LIMIT 1").fetchone() is not None:
                raise InvalidInputError(f"{self.path} holds memories already; copy needs an empty store")
            self._db.execute("DELETE FROM access.accesses")  # of memories deleted before: ids come back
            if model is not None:
                self._write_model_meta(self._db, model)
            for exported in memories:
                m = exported.memory
                self._db.execute(
                    f"INSERT INTO memories ({MEMORY_COLUMNS}) VALUES ({SQLITE.marks(len(MEMORY_FIELDS))})",
                    [None if f.spec.refers else SQLITE.write(f, getattr(m, f.name)) for f in MEMORY_FIELDS],
                )
                if any(getattr(m, name) is not None for name in REFERS):
                    links.append((*(getattr(m, name) for name in REFERS), m.id))
                self.lexical.index_text(m.id, fts_row(m.text, m.tags, m.kind, exported.lexical_views))
                if exported.vector is not None:
                    self._db.execute(
                        "INSERT INTO vectors (memory_id, vector) VALUES (?, ?)",
                        (m.id, exported.vector.astype("<f4").tobytes()),
                    )
                for view, (text, vector) in sorted(exported.views.items()):
                    self._db.execute(
                        "INSERT INTO views (memory_id, view, text, vector) VALUES (?, ?, ?, ?)",
                        (m.id, view, text, None if vector is None else vector.astype("<f4").tobytes()),
                    )
                written += 1
            # Links may point forward in id order: set once every memory is there.
            sets = ", ".join(f"{name} = ?" for name in REFERS)
            self._db.executemany(f"UPDATE memories SET {sets} WHERE id = ?", links)
            self._db.execute(self.WAITING_SQL)
            self._bump_generation()
        return written


__all__ = ["SQLiteCopy"]
