"""The SQLite store's vector reads, in process: each view's vectors as one matrix, cached until the
store's next write (memory-mapped from the vector cache files beside the store, see vector_cache),
searched exactly or, for a large scope, through the approximate index (ann)."""

from __future__ import annotations

import builtins
import contextlib
import logging
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import MemsearchError, StoreCorruptError
from memsearch.models import CHUNK_VIEW_PREFIX, OWN_TEXT_VIEWS, EmbeddingModelInfo
from memsearch.store.ann import AnnIndex, index_library_available
from memsearch.store.base import Scope, VectorHits
from memsearch.store.model_vectors import SqlModelVectors
from memsearch.store.sqlite_driver import sqlite3
from memsearch.store.sqlite_errors import ACCESS_TIMEOUT_MS
from memsearch.store.vector_cache import VectorCache, WrongDimension, batches, cache_place
from memsearch.store.vectors import VectorIndex, approximate_top, row_scores, vector_top

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

# The vector-index key of every long note's chunk vectors (views chunk_2, chunk_3, …; ids repeat).
_CHUNKS = "chunks"
_CACHE_NAMES = {None: "own", _CHUNKS: "chunks"}  # a view's name in the vector cache files
_CHUNK_VIEWS_LIKE = CHUNK_VIEW_PREFIX.replace("_", "!_") + "%"


_RECORD = "cache_file:"  # meta rows `cache_file:NAME`: the keyed digest of the cache file NAME


class CacheRecords:
    """The store's records of its vector cache files (memsearch.store.vector_cache.CacheLedger):
    meta rows, and the key of the digests. Records are written by `flush`, in a write transaction
    of their own after the read snapshot the files were made in (they do not move the generation);
    until then this process sees its own."""

    def __init__(self, store: InProcessVectors) -> None:
        self._store = store
        self._pending: dict[str, str | None] = {}

    @property
    def key(self) -> bytes:
        identity = self._store._cache_identity()
        assert identity is not None  # a cache exists only for a store with an identity
        return identity[1]

    def recorded(self, name: str) -> str | None:
        if name in self._pending:
            return self._pending[name]
        return self._store._meta(_RECORD + name)

    def record(self, name: str, digest: str | None) -> None:
        self._pending[name] = digest

    def flush(self) -> None:
        """Write the records made since the last flush. If the store is busy they are dropped:
        the next process that needs the files makes them again."""
        pending, self._pending = self._pending, {}
        if not pending:
            return
        store = self._store
        try:
            with store.transaction(ACCESS_TIMEOUT_MS):
                for name, digest in pending.items():
                    if digest is None:
                        store._db.execute("DELETE FROM meta WHERE key = ?", (_RECORD + name,))
                    else:
                        store._set_meta(_RECORD + name, digest)
        except MemsearchError as error:
            log.debug("vector cache files not recorded (%s): they will be made again", error)


class InProcessVectors:
    """The SQLite store's vector reads (a part of SQLiteStore)."""

    path: Path
    read_only: bool
    ann_threshold: int
    _cache_records: CacheRecords
    _cache_place: Path | bool | None  # False: not looked for yet
    _vector_cache: dict[str | None, tuple[int, VectorIndex, str]]  # view → (generation, vectors, file name)
    _ann_cache: dict[str, tuple[VectorIndex, AnnIndex]]
    _vector_memo: tuple[tuple[Any, ...], VectorIndex, VectorHits] | None  # the last vector search

    models: SqlModelVectors  # the store's ModelVectors part

    if TYPE_CHECKING:  # what the store provides

        @property
        def _db(self) -> sqlite3.Connection: ...

        def generation(self) -> int: ...

        def vector_count(self) -> int: ...

        def embedding_model(self) -> EmbeddingModelInfo | None: ...

        def _cache_identity(self) -> tuple[str, bytes] | None: ...

        def _meta(self, key: str) -> str | None: ...

        def _set_meta(self, key: str, value: str) -> None: ...

        def transaction(self, busy_timeout_ms: int | None = None) -> contextlib.AbstractContextManager[Any]: ...

        def _scoped_ids(self, scope: Scope) -> builtins.list[int]: ...

        def _ids_of_other_kinds(self, kinds: Sequence[str]) -> builtins.list[int]: ...

    def vector_index(self, view: str | None = None) -> VectorIndex:
        """The stored vectors (of the memories' own texts, or of one view) as one matrix, cached
        until the store's next write: memory-mapped from the vector cache beside the store (see
        memsearch.store.vector_cache), which the first process to need it writes."""
        generation = self.generation()
        cached = self._vector_cache.get(view)
        if cached is not None and cached[0] == generation:
            return cached[1]
        if view in OWN_TEXT_VIEWS and not self._has_view_vectors(view):
            # Every memory is searched by its own vector here: the same matrix, one product a query.
            self.vector_index(None)
            generation, index, name = self._vector_cache[None]
        else:
            name = _CACHE_NAMES.get(view, view or "own")
            generation, index = self._read_vectors(view, name)
        self._vector_cache[view] = (generation, index, name)
        return index

    def _has_view_vectors(self, view: str) -> bool:
        sql = "SELECT 1 FROM views WHERE view = ? AND vector IS NOT NULL LIMIT 1"
        return self._db.execute(sql, (view,)).fetchone() is not None

    def _vector_rows_sql(self, view: str | None) -> tuple[str, tuple[Any, ...]]:
        if view is None:
            return "SELECT memory_id, vector FROM vectors ORDER BY memory_id", ()
        if view == _CHUNKS:
            return (
                "SELECT memory_id, vector FROM views WHERE view LIKE ? ESCAPE '!' ORDER BY memory_id",
                (_CHUNK_VIEWS_LIKE,),
            )
        if view in OWN_TEXT_VIEWS:  # a memory without a vector of this view is searched by its own
            return (
                "SELECT memory_id, vector FROM views WHERE view = ? AND vector IS NOT NULL "
                "UNION ALL SELECT memory_id, vector FROM vectors v WHERE NOT EXISTS "
                "(SELECT 1 FROM views w WHERE w.memory_id = v.memory_id AND w.view = ? AND w.vector IS NOT NULL) "
                "ORDER BY memory_id",
                (view, view),
            )
        return "SELECT memory_id, vector FROM views WHERE view = ? ORDER BY memory_id", (view,)

    def _read_vectors(self, view: str | None, name: str) -> tuple[int, VectorIndex]:
        """(generation, the view's vectors) read in one snapshot: from the cache files when they
        are there, else out of SQLite (written to the cache files on the way when it can be)."""
        import numpy as np

        db = self._db
        own_snapshot = not db.in_transaction  # inside a write, the rows are not yet a generation's
        cache = self._files() if own_snapshot else None
        if own_snapshot:
            db.execute("BEGIN")
        try:
            generation = self.generation()
            model = self.embedding_model()
            dim = model.dim if model else 0
            files = cache if dim else None
            if files is not None and (loaded := files.load(generation, name, dim)) is not None:
                return generation, loaded
            sql, params = self._vector_rows_sql(view)
            (count,) = db.execute(f"SELECT count(*) FROM ({sql})", params).fetchone() if files else (0,)
            if files is not None and count:  # (an empty view has nothing worth a file)
                try:
                    return generation, files.write(
                        generation, name, dim, count, batches(db.execute(sql, params).fetchmany)
                    )
                except WrongDimension as mismatch:
                    raise self._wrong_vectors(mismatch.count, dim) from None
                except OSError as error:  # a full disk, a folder that cannot be written: read them here
                    log.info("vector cache not written (%s)", error)
            rows = db.execute(sql, params).fetchall()
        finally:
            if own_snapshot:
                db.execute("COMMIT")
                self._cache_records.flush()
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        wrong = sum(1 for row in rows if len(row[1]) != 4 * dim)
        if wrong:
            raise self._wrong_vectors(wrong, dim)
        matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype="<f4").astype(np.float32, copy=False)
        return generation, VectorIndex(
            ids=ids, matrix=matrix.reshape(len(rows), dim) if rows else np.zeros((0, dim), np.float32)
        )

    def _wrong_vectors(self, count: int, dim: int) -> StoreCorruptError:
        return StoreCorruptError(
            f"{self.path}: {count} stored vectors are not the {dim} numbers the store's model makes; "
            "re-embed the store (reindex) to repair them"
        )

    def _files(self) -> VectorCache | None:
        """The store's vector cache (beside it, or in a private place: vector_cache.cache_place);
        None for a store that is only read here (or whose id cannot be recorded), or when no
        trusted place can be had."""
        identity = self._cache_identity()
        if identity is None:
            return None
        if self._cache_place is False:
            self._cache_place = cache_place(self.path)
        if not isinstance(self._cache_place, Path):
            return None
        return VectorCache(self._cache_place, identity[0], self._cache_records)

    def _approximate(
        self, view: str | None, index: VectorIndex, admitted: int, progress: Callable[[int, int], None] | None = None
    ) -> AnnIndex | None:
        """The view's approximate index when the scope is large enough to want one (made when
        missing, `progress` told; None without the index library, or where the cache cannot be
        written)."""
        if admitted < self.ann_threshold or index.ids.size < self.ann_threshold or not index_library_available():
            return None
        generation, _, name = self._vector_cache[view]
        cached = self._ann_cache.get(name)
        if cached is not None and cached[0] is index:
            return cached[1]
        files = self._files()
        if files is None:
            return None
        try:
            built = files.index(generation, name, index, progress)
        except OSError as error:
            log.warning("approximate vector index not available (%s): searching exactly", error)
            return None
        finally:
            self._cache_records.flush()
        self._ann_cache[name] = (index, built)
        return built

    def prepare_search_indexes(self, progress: Callable[[int, int], None] | None = None) -> int:
        """After a bulk write: make (or bring up to date from the previous generation's) the
        approximate index of each view that a search over everything searches through one, so the
        next search only maps it (see `_approximate`). `progress` gets (vectors indexed, vectors to
        index) of each index while it is made. Returns how many vectors the indexes hold."""
        if self.read_only or self.ann_threshold > self.vector_count() or not index_library_available():
            return 0
        indexed = 0
        for view in [None, *self._views_with_own_vectors()]:
            index = self.vector_index(view)
            if self._approximate(view, index, index.ids.size, progress) is not None:
                indexed += int(index.ids.size)
        return indexed

    def _views_with_own_vectors(self) -> builtins.list[str]:
        """The views whose vectors a search reads apart from the memories' own (chunk views are
        read with the own vectors, see `vector_search`)."""
        sql = "SELECT DISTINCT view FROM views WHERE vector IS NOT NULL AND view NOT LIKE ? ESCAPE '!' ORDER BY view"
        return [view for (view,) in self._db.execute(sql, (_CHUNK_VIEWS_LIKE,))]

    def _scope_mask(self, index: VectorIndex, scope: Scope) -> np.ndarray | None:
        """Which rows of the index are in scope; None for all. A scope that only leaves out some
        kinds (session chunks, usually few) is computed from the memories it leaves out."""
        import numpy as np

        if scope.is_everything:
            return None
        if scope.only_kinds:
            return ~np.isin(index.ids, np.asarray(self._ids_of_other_kinds(scope.kinds), np.int64))
        return np.isin(index.ids, np.asarray(self._scoped_ids(scope), np.int64))

    def vector_search(
        self, vector: np.ndarray, scope: Scope, limit: int | None, view: str | None = None, *, model: str | None = None
    ) -> VectorHits:
        """The query against the stored vectors of the view, in process: exactly, or, for a scope
        of at least `ann_threshold` memories, through the approximate index. A long note scores by
        its best chunk where its own vector stands (the own-text views). Another model's vectors
        (`model`) are searched exactly (store.model_vectors)."""
        import numpy as np

        if model is not None:
            if view is not None:
                raise ValueError(f"no vector view {view!r} of another model")
            return self.models.search(model, vector, scope, limit)

        index = self.vector_index(view)
        chunks = self.vector_index(_CHUNKS) if view is None or view in OWN_TEXT_VIEWS else None
        # Legs over views that share a matrix ask the same question: the last answer is kept.
        key = (id(index), id(chunks), vector.astype(np.float32, copy=False).tobytes(), scope, limit, self.ann_threshold)
        last = self._vector_memo
        if last is not None and last[0] == key and last[1] is index:
            return VectorHits(last[2], last[2].engine)
        hits = self._vector_search(view, index, chunks, vector, scope, limit)
        self._vector_memo = (key, index, hits)
        return VectorHits(hits, hits.engine)

    def _vector_search(
        self,
        view: str | None,
        index: VectorIndex,
        chunks: VectorIndex | None,
        vector: np.ndarray,
        scope: Scope,
        limit: int | None,
    ) -> VectorHits:
        import numpy as np

        mask = self._scope_mask(index, scope)
        if limit is not None:
            admitted = index.ids.size if mask is None else int(np.count_nonzero(mask))
            approximate = self._approximate(view, index, admitted)
            if approximate is not None:
                hits = approximate_top(index, approximate, vector, limit, mask, chunks)
                if hits is not None:
                    return VectorHits(hits, engine="index")
        pool = index.ids.size if limit is None else limit
        return VectorHits(vector_top(index, vector, pool, mask, chunks), engine="exact")

    def cosines(self, vector: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
        """Each memory's cosine as the vector leg scores it: a long note's is its best chunk's.
        The same numbers (row_scores: the same bits) the leg took: its scores over every row
        when it made them for this query (a search's usual case), else the rows' own."""
        import numpy as np

        query = vector.astype(np.float32, copy=False)
        index = self.vector_index()
        found, rows = index.rows_of(ids)
        if found.size == 0:  # also a store with no vectors yet, whose matrix has no columns
            return {}
        known = index.known_scores(query)
        scores = known[rows] if known is not None else row_scores(index.matrix[rows], query)
        best = dict(zip(found.tolist(), scores.tolist(), strict=True))
        chunks = self.vector_index(_CHUNKS)
        if chunks.ids.size:
            wanted = np.isin(chunks.ids, found)
            chunk_scores = chunks.scores(query)[wanted]  # few: all of them, kept for the next call
            for memory_id, score in zip(chunks.ids[wanted].tolist(), chunk_scores.tolist(), strict=True):
                best[memory_id] = max(best[memory_id], score)
        return best

    def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        index = self.vector_index()
        found, rows = index.rows_of(ids)
        return {int(i): index.matrix[row] for i, row in zip(found, rows, strict=True)}

    def all_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        index = self.vector_index()
        return index.ids, index.matrix

    def nearest(self, vectors: np.ndarray, exclude: Collection[int] = ()) -> builtins.list[tuple[int, float] | None]:
        import numpy as np

        index = self.vector_index()
        if index.ids.size == 0:
            return [None] * len(vectors)
        excluded = np.isin(index.ids, np.asarray(sorted(exclude), np.int64)) if exclude else None
        found: builtins.list[tuple[int, float] | None] = []
        for start in range(0, len(vectors), 256):
            scores = vectors[start : start + 256] @ index.matrix.T
            if excluded is not None:
                scores[:, excluded] = -np.inf
            for row in scores:
                column = int(np.argmax(row))
                found.append(None if row[column] == -np.inf else (int(index.ids[column]), float(row[column])))
        return found
