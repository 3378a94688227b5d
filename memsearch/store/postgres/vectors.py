"""Vector search in PostgreSQL with pgvector: exact below EXACT_SEARCH_BELOW stored vectors, else
through the HNSW indexes with iterative scans; every score is recomputed in float32 from the
stored vectors, so near-ties order as in the SQLite store."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from memsearch.models import OWN_TEXT_VIEWS, VECTOR_VIEWS, EmbeddingModelInfo
from memsearch.store.base import EVERYTHING, Hits, Scope, VectorHits
from memsearch.store.dialects import POSTGRES
from memsearch.store.model_vectors import SqlModelVectors
from memsearch.store.postgres.schema import CHUNK_VIEWS_SQL, HNSW_EF_CONSTRUCTION

if TYPE_CHECKING:
    from psycopg import Connection

# Below this many vectors a search is exact (a scan is fast, and the answers equal SQLite's).
EXACT_SEARCH_BELOW = 20_000
# Extra rows fetched around the SQL order, re-sorted by the float32 cosine (pgvector's distance
# and numpy's product differ in the last bits; near-ties must order as in SQLite).
RESCORE_MARGIN = 16
# The search widens (hnsw.ef_search, from 200 up to pgvector's 1,000) by one per this many stored
# vectors: for an index built as above, and for one built with a smaller ef_construction.
VECTORS_PER_EF = 5000
VECTORS_PER_EF_NARROW_BUILD = 1000


def f32(vector: Any) -> np.ndarray:
    """A float32 array from a numpy array or a pgvector `Vector` read back from the database."""
    if hasattr(vector, "to_numpy"):
        vector = vector.to_numpy()
    return np.asarray(vector, dtype=np.float32)


class PostgresFile(Protocol):
    """What the vector part needs of the PostgreSQL store it lives in: this thread's connection
    and its per-connection state (`_local`, reset with each new connection), the store's model
    and its other models' vectors."""

    models: SqlModelVectors  # the store's ModelVectors part

    @property
    def _local(self) -> threading.local: ...

    @property
    def _db(self) -> Connection[Any]: ...

    def _search_model(self) -> EmbeddingModelInfo | None: ...

    def embedding_model(self) -> EmbeddingModelInfo | None: ...


class PgVectorSearch:
    """The PostgreSQL store's vector reads, a part it holds (`store.own_vectors`)."""

    def __init__(self, store: PostgresFile) -> None:
        self._store = store

    def vector_search(
        self, vector: np.ndarray, scope: Scope, limit: int | None, view: str | None = None, *, model: str | None = None
    ) -> VectorHits:
        """The memories in scope nearest to `vector` by cosine, in SQL: exact below
        EXACT_SEARCH_BELOW stored vectors (or for `limit=None`), else through the HNSW index with
        an iterative scan so filters keep recall. Scores are float32 dot products, as in SQLite.
        Another model's vectors (`model`) are searched exactly (store.model_vectors)."""
        if model is not None:
            if view is not None:
                raise ValueError(f"no vector view {view!r} of another model")
            return self._store.models.search(model, f32(vector), scope, limit)
        if view is not None and view not in VECTOR_VIEWS:
            raise ValueError(f"no vector view {view!r}")
        query = f32(vector)
        if limit is not None and limit <= 0:
            return VectorHits()
        key = (query.tobytes(), scope, limit)
        if view is None:
            (snapshot,) = self._store._db.execute("SELECT pg_current_snapshot()::text").fetchone()  # type: ignore[misc]
        elif view in OWN_TEXT_VIEWS:
            # A view no memory has a vector of is searched by the memories' own vectors: the
            # answer of the plain search just made, if nothing was written since (the same
            # snapshot: no transaction committed or began writing in between).
            snapshot, viewed = self._store._db.execute(
                "SELECT pg_current_snapshot()::text, EXISTS (SELECT 1 FROM views WHERE view = %s "
                "AND embedding IS NOT NULL)",
                (view,),
            ).fetchone()  # type: ignore[misc]
            last = getattr(self._store._local, "vector_memo", None)
            if not viewed and last is not None and last[:2] == (key, snapshot):
                return VectorHits(last[2], last[2].engine)
        hits, engine = self._nearest_sql(query, scope, limit, view, exclude=())
        if view is not None and view not in OWN_TEXT_VIEWS:
            return VectorHits(hits, engine)
        # A long note scores by its best chunk where its own vector stands (as in SQLite).
        best = dict(hits)
        for memory_id, score in self._best_chunks(query, scope, limit):
            best[memory_id] = max(best.get(memory_id, score), score)
        ranked = sorted(best.items(), key=lambda hit: (-hit[1], hit[0]))
        found = VectorHits(ranked if limit is None else ranked[:limit], engine)
        if view is None:
            self._store._local.vector_memo = (key, snapshot, found)
        return VectorHits(found, engine)

    def _best_chunks(self, query: np.ndarray, scope: Scope, limit: int | None) -> Hits:
        """The long notes in scope by their best chunk vector (views chunk_2, …), nearest first."""
        where, params = POSTGRES.where(scope)
        rows = self._store._db.execute(
            "SELECT memory_id, embedding FROM (SELECT DISTINCT ON (v.memory_id) v.memory_id, v.embedding, "
            "v.embedding <=> %s AS distance FROM views v JOIN memories m ON m.id = v.memory_id "
            f"WHERE v.view LIKE {CHUNK_VIEWS_SQL} AND v.embedding IS NOT NULL AND {where} "
            "ORDER BY v.memory_id, distance) best ORDER BY distance, memory_id LIMIT %s",
            [query, *params, None if limit is None else limit + RESCORE_MARGIN],
            binary=True,
        ).fetchall()
        return [(int(memory_id), float(f32(embedding) @ query)) for memory_id, embedding in rows]

    def _through_index(self, limit: int | None, view: str | None, where: str, params: builtins.list[Any]) -> int | None:
        """The number of stored vectors (which sets the index search's width) when a vector search
        goes through the HNSW indexes; None when it is exact."""
        if limit is None or self._store._search_model() is None:
            return None
        own = view is None or view in OWN_TEXT_VIEWS  # searched through the memories' own vectors
        searched = self._approximate_count("vectors" if own else "views", view)
        if searched < EXACT_SEARCH_BELOW or self._few_in_scope(where, params):
            return None
        return searched if own else self._approximate_count("vectors", None)

    def _nearest_sql(
        self, query: np.ndarray, scope: Scope, limit: int | None, view: str | None, exclude: Collection[int]
    ) -> tuple[Hits, str]:
        """The nearest memories, and which engine answered."""
        where, params = POSTGRES.where(scope)
        table, view_clause, view_params = ("vectors", "true", []) if view is None else ("views", "v.view = %s", [view])
        source: str = table
        if view in OWN_TEXT_VIEWS:  # a memory without a vector of this view is searched by its own (exact)
            source = (
                "(SELECT memory_id, embedding FROM views WHERE view = %s AND embedding IS NOT NULL UNION ALL "
                "SELECT memory_id, embedding FROM vectors x WHERE NOT EXISTS (SELECT 1 FROM views w "
                "WHERE w.memory_id = x.memory_id AND w.view = %s AND w.embedding IS NOT NULL))"
            )
            view_clause, view_params = "true", [view, view]
        exclusion = "NOT (v.memory_id = ANY(%s))" if exclude else "true"
        exclusion_params = [sorted(exclude)] if exclude else []
        model = self._store._search_model()
        stored = self._through_index(limit, view, where, params)
        base = (
            f"SELECT v.memory_id, v.embedding FROM {source} v JOIN memories m ON m.id = v.memory_id "
            f"WHERE v.embedding IS NOT NULL AND {view_clause} AND {exclusion} AND {where}"
        )
        args: builtins.list[Any] = [*view_params, *exclusion_params, *params]
        if limit is None:
            rows = self._store._db.execute(base, args, binary=True).fetchall()
        elif stored is not None and view in OWN_TEXT_VIEWS:
            assert model is not None
            # The union above, as two index scans: the view's own vectors (its partial HNSW
            # index), and the memories' vectors where the view has none (the vectors' index).
            own = (
                f"SELECT v.memory_id, v.embedding FROM views v JOIN memories m ON m.id = v.memory_id "
                f"WHERE v.view = '{view}' AND v.embedding IS NOT NULL AND {exclusion} AND {where}"
            )
            stand_in = (
                "SELECT v.memory_id, v.embedding FROM vectors v JOIN memories m ON m.id = v.memory_id "
                f"WHERE NOT EXISTS (SELECT 1 FROM views w WHERE w.memory_id = v.memory_id AND w.view = '{view}' "
                f"AND w.embedding IS NOT NULL) AND {exclusion} AND {where}"
            )
            rows = [
                *self._index_scan(own, [*exclusion_params, *params], query, limit, model.dim, stored),
                *self._index_scan(stand_in, [*exclusion_params, *params], query, limit, model.dim, stored),
            ]
        elif stored is not None:
            assert model is not None
            rows = self._index_scan(base, args, query, limit, model.dim, stored)
        else:
            rows = self._store._db.execute(
                f"{base} ORDER BY v.embedding <=> %s, v.memory_id LIMIT %s",
                [*args, query, limit + RESCORE_MARGIN],
                binary=True,
            ).fetchall()
        engine = "index" if stored is not None else "exact"
        if not rows:
            return [], engine
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        scores = np.stack([f32(row[1]) for row in rows]) @ query
        order = np.lexsort((ids, -scores))
        if limit is not None:
            order = order[:limit]
        return [(int(ids[i]), float(scores[i])) for i in order], engine

    def _few_in_scope(self, where: str, params: builtins.list[Any]) -> bool:
        """Whether a filter leaves fewer than EXACT_SEARCH_BELOW memories: they are searched
        exactly (fast, and an index scan for a narrow filter loses recall: 0.91 under a 1 %
        filter of 500k vectors, against 0.96 unfiltered)."""
        if where == "true":
            return False
        (count,) = self._store._db.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE {where} LIMIT %s) s",
            [*params, EXACT_SEARCH_BELOW],
        ).fetchone()  # type: ignore[misc]
        return int(count) < EXACT_SEARCH_BELOW

    def _index_scan(
        self, base: str, args: builtins.list[Any], query: np.ndarray, limit: int, dim: int, stored: int
    ) -> Any:
        """`base`'s rows nearest to `query` through the HNSW index (typed for the model's
        dimension; `stored` vectors in all), with a margin for the re-scoring; iterative scans
        keep recall under filters."""
        fetch = limit + RESCORE_MARGIN
        # ef_search 200 at least, and one per VECTORS_PER_EF stored vectors (pgvector's most is
        # 1000); an index of an older build (ef_construction 64: at 1M clustered 384-d vectors
        # recall@10 0.884 at 200, 0.924 at 400, 0.955 at 1000) widens five times sooner
        per_ef = VECTORS_PER_EF if self._hnsw_built_wide() else VECTORS_PER_EF_NARROW_BUILD
        settings = ("relaxed_order", max(200, min(1000, max(fetch * 2, stored // per_ef))))
        if getattr(self._store._local, "hnsw_settings", None) != settings:  # session settings: set once per connection
            self._store._db.execute(f"SET hnsw.iterative_scan = {settings[0]}")
            self._store._db.execute(f"SET hnsw.ef_search = {settings[1]}")
            self._store._local.hnsw_settings = settings
        return self._store._db.execute(
            f"{base} ORDER BY v.embedding::vector({int(dim)}) <=> %s::vector({int(dim)}) LIMIT %s",
            [*args, query, fetch],
            binary=True,
        ).fetchall()

    def seed_composite_search(self, vector: np.ndarray, scope: Scope, limit: int, now: datetime) -> Hits:
        """The pgvector agent memory's ranking as its own SQL (seeds/pgvector-agent-memory-scoring.txt):
        0.5·(1 − (embedding <=> q)) + 0.3·importance + 0.2·exp(−0.05·days since last access) over the
        active (not superseded) memories with a vector, `now` standing for now() so results are
        reproducible. The `pgvector` profile computes the same score in the pipeline, with explain;
        this runs it where the seed ran it."""
        where, params = POSTGRES.where(scope)
        sql = f"""
            SELECT m.id,
                (0.5 * (1 - (v.embedding <=> %s)))
                + (0.3 * m.importance)
                + (0.2 * exp(-0.05 * greatest(0, EXTRACT(EPOCH FROM (%s - m.last_accessed_at)))::float8 / 86400))
                AS score
            FROM memories m JOIN vectors v ON v.memory_id = m.id
            WHERE v.embedding IS NOT NULL AND m.superseded_by IS NULL AND {where}
            ORDER BY score DESC, m.id
            LIMIT %s
        """
        rows = self._store._db.execute(sql, [f32(vector), now, *params, limit])
        return [(int(memory_id), float(score)) for memory_id, score in rows]

    def _hnsw_built_wide(self) -> bool:
        """Whether the memories' HNSW index was built with HNSW_EF_CONSTRUCTION or more (asked
        once per connection once the index exists: a rebuilt index is seen by new connections)."""
        built: bool | None = getattr(self._store._local, "hnsw_built_wide", None)
        if built is None:
            exists, value = self._store._db.execute(
                "SELECT to_regclass('vectors_hnsw') IS NOT NULL, (SELECT option_value FROM pg_class c, "
                "pg_options_to_table(c.reloptions) WHERE c.oid = to_regclass('vectors_hnsw') "
                "AND option_name = 'ef_construction')"
            ).fetchone()  # type: ignore[misc]
            built = value is not None and int(value) >= HNSW_EF_CONSTRUCTION
            if exists:
                self._store._local.hnsw_built_wide = built
        return built

    def _approximate_count(self, table: str, view: str | None) -> int:
        """The planner's row estimate of the table (cheap; exactness does not matter here)."""
        row = self._store._db.execute(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)", (table,)
        ).fetchone()
        estimate = int(row[0]) if row and row[0] is not None else -1
        if estimate < 0:  # never analysed
            estimate = int(self._store._db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]
        return estimate

    def cosines(self, vector: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
        """Each memory's cosine as the vector leg scores it: a long note's is its best chunk's."""
        query = f32(vector)
        best = {memory_id: float(row @ query) for memory_id, row in self.vectors(ids).items()}
        for memory_id, embedding in self._store._db.execute(
            f"SELECT memory_id, embedding FROM views WHERE view LIKE {CHUNK_VIEWS_SQL} AND memory_id = ANY(%s)",
            (list(best),),
            binary=True,
        ):
            best[memory_id] = max(best[memory_id], float(f32(embedding) @ query))
        return best

    def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        rows = self._store._db.execute(
            "SELECT memory_id, embedding FROM vectors WHERE memory_id = ANY(%s)", ([int(i) for i in ids],), binary=True
        )
        return {int(memory_id): f32(embedding) for memory_id, embedding in rows}

    def all_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        rows = self._store._db.execute(
            "SELECT memory_id, embedding FROM vectors ORDER BY memory_id", binary=True
        ).fetchall()
        model = self._store.embedding_model()
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        if not rows:
            return ids, np.zeros((0, model.dim if model else 0), np.float32)
        return ids, np.stack([f32(row[1]) for row in rows])

    def nearest(self, vectors: np.ndarray, exclude: Collection[int] = ()) -> builtins.list[tuple[int, float] | None]:
        found: builtins.list[tuple[int, float] | None] = []
        for vector in vectors:
            hits, _ = self._nearest_sql(f32(vector), EVERYTHING, 1, None, exclude)
            found.append(hits[0] if hits else None)
        return found
