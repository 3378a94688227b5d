"""The SQLite store's lexical search through the impact index (memsearch.store.lexical_index,
kept as memsearch.store.lexical_cache says) for a large store: FTS5's answers, without FTS5
scoring every match. A part of SQLiteStore; `Fts5Index.lexical_search` asks it first."""

from __future__ import annotations

import builtins
import logging
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memsearch.errors import MemsearchError
from memsearch.store.base import Hits, Scope
from memsearch.store.lexical_cache import LexicalCache
from memsearch.store.lexical_index import TEXT_COLUMNS, ImpactIndex, answer

if TYPE_CHECKING:
    import numpy as np

    from memsearch.store.sqlite_vectors import CacheRecords
    from memsearch.store.vector_cache import VectorCache
    from memsearch.text import LexicalQuery

log = logging.getLogger(__name__)


class ImpactLexical:
    """Lexical search over text and tags through the impact index (a part of SQLiteStore)."""

    lexical_threshold: int
    _cache_records: CacheRecords
    _impact: dict[str | None, tuple[int, ImpactIndex | None]]  # view → (generation, its index or None)

    if TYPE_CHECKING:  # what the store provides

        @property
        def _db(self) -> sqlite3.Connection: ...

        def generation(self) -> int: ...

        def count(self, scope: Scope | None = None) -> int: ...

        def _files(self) -> VectorCache | None: ...

        def _scoped_ids(self, scope: Scope) -> builtins.list[int]: ...

        def _ids_of_other_kinds(self, kinds: Sequence[str]) -> builtins.list[int]: ...

    def _impact_search(self, query: LexicalQuery, scope: Scope, limit: int, view: str | None) -> Hits | None:
        """FTS5's top `limit` over text and tags (or the lexical view's column) through the impact
        index, when the store is large enough to want one and it can be had for the store's
        current state; else None (FTS5 answers)."""
        if self.lexical_threshold <= 0 or limit <= 0:
            return None
        db = self._db
        if db.in_transaction:  # inside a write: the rows are not yet a generation's
            return None
        known, generation = self._impact.get(view), self.generation()
        if known is not None and known[0] == generation and known[1] is None:
            return None  # a small store (or one without a place for the file): as before
        files: VectorCache | bool | None = False  # False: not looked for (the index is known)
        if known is None or known[0] != generation:
            (rows,) = db.execute("SELECT count(*) FROM memories").fetchone()
            if rows < self.lexical_threshold:
                self._impact[view] = (generation, None)
                return None
            files = self._files()  # before the snapshot: an older store's id is written on first need
        db.execute("BEGIN")  # one snapshot: the generation, the index's rows and FTS5's phrases
        try:
            columns = TEXT_COLUMNS if view is None else (view,)
            index = self._impact_index(view, columns, files)
            if index is None:
                return None
            return answer(index, db, query, limit, self._impact_mask(index, scope), columns)
        finally:
            db.execute("COMMIT")
            self._cache_records.flush()

    def _impact_index(
        self, view: str | None, columns: Sequence[str], files: VectorCache | bool | None
    ) -> ImpactIndex | None:
        generation = self.generation()
        known = self._impact.get(view)
        if known is not None and known[0] == generation:
            return known[1]
        if isinstance(files, bool):  # a write came between: FTS5 answers, the next search looks
            return None
        index = self._load_impact_index(generation, columns, files)
        self._impact[view] = (generation, index)
        return index

    def _load_impact_index(
        self, generation: int, columns: Sequence[str], files: VectorCache | None
    ) -> ImpactIndex | None:
        (rows,) = self._db.execute("SELECT count(*) FROM memories").fetchone()
        if files is None or rows < self.lexical_threshold:
            return None
        cache = LexicalCache(files, columns)
        index = cache.load(generation)
        if index is None:
            log.info("building the full-text impact index of %s (%d memories)", files.folder, rows)
            try:
                index = cache.build(generation, self._db)
            except (OSError, MemsearchError, ValueError) as error:
                log.warning("full-text impact index not available (%s): FTS5 answers", error)
        return index

    def _impact_mask(self, index: ImpactIndex, scope: Scope) -> np.ndarray | None:
        """Which rows of the index are in scope; None for all."""
        import numpy as np

        if scope.is_everything:
            return None
        if scope.only_kinds:
            mask = np.ones(index.ids.size, bool)
            others = np.asarray(self._ids_of_other_kinds(scope.kinds), np.int64)
            rows = np.searchsorted(index.ids, others)
            found = rows < index.ids.size
            rows = rows[found]
            mask[rows[index.ids[rows] == others[found]]] = False
            return mask
        scoped = np.asarray(self._scoped_ids(scope), np.int64)
        rows = np.searchsorted(index.ids, scoped)
        found = rows < index.ids.size
        rows = rows[found]
        mask = np.zeros(index.ids.size, bool)
        mask[rows[index.ids[rows] == scoped[found]]] = True
        return mask


__all__ = ["ImpactLexical"]
