"""The PostgreSQL + pgvector store: the same protocol as the SQLite file, for a team's shared server.

Ranking parity with SQLite is the point: the lexical leg is FTS5's BM25 computed in SQL from
postings kept in each memory's own transaction (tokens from SQLite's own tokenizer, see
postgres_text), and vector scores are recomputed in float32 from the stored vectors, so a store
answers like a SQLite file of the same memories. Vector search runs in SQL (`<=>`): exactly below
EXACT_SEARCH_BELOW vectors, through the HNSW index with iterative scans above it.
"""

from __future__ import annotations

import builtins
import json
import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import errors as pg_errors
from psycopg.adapt import Loader
from psycopg.pq import Format

from memsearch.errors import (
    DuplicateKeyError,
    InvalidInputError,
    MemoryNotFoundError,
    ModelMismatchError,
    StoreCorruptError,
    StoreNotFoundError,
    StoreUnavailableError,
)
from memsearch.models import (
    CHUNK_VIEW_PREFIX,
    FIELDS_BY_NAME,
    LEXICAL_VIEWS,
    MEMORY_FIELDS,
    OWN_TEXT_VIEWS,
    SETTABLE_FIELDS,
    VECTOR_VIEWS,
    Memory,
    NewMemory,
    content_hash,
    default_view_text,
)
from memsearch.paths import read_only_requested, shown_location
from memsearch.store.base import (
    EVERYTHING,
    EmbeddingModelInfo,
    ExportedMemory,
    Hits,
    LexicalHits,
    Rewrite,
    Scope,
    StoreHealth,
    VectorHits,
)
from memsearch.store.fts import FTS_COLUMNS, GRAM_COLUMNS, fts_row, match_phrases
from memsearch.store.postgres_text import K1, B, Fts5Tokenizer, idf, phrase_count
from memsearch.store.sql import GIVEN_COLUMNS, MEMORY_COLUMNS, POSTGRES
from memsearch.text import query_grams

if TYPE_CHECKING:
    from psycopg import Connection

T = TypeVar("T")
log = logging.getLogger(__name__)

# Below this many vectors a search is exact (a scan is fast, and the answers equal SQLite's).
EXACT_SEARCH_BELOW = 20_000
# Extra rows fetched around the SQL order, re-sorted by the float32 cosine (pgvector's distance
# and numpy's product differ in the last bits; near-ties must order as in SQLite).
RESCORE_MARGIN = 16
# Above this many postings in a query's lists (the sum of its phrases' document counts), the
# lexical leg reads the lists in impact order, heads first (see _bm25_impact); below, it is
# FTS5's BM25 of every memory that can matter. The first head is this long per list.
IMPACT_ABOVE = 50_000
IMPACT_FIRST_HEAD = 2048
# The most postings the impact-ordered reading takes before it answers with the best it has
# scored (`bounded`) rather than proving the top k.
POSTING_BUDGET = 128_000
# Looking a posting up by memory costs about as much as reading this many along a list.
LOOKUP_COST = 8
# The HNSW indexes' build: pgvector's default ef_construction (64) makes a graph whose search at
# 1M clustered 384-d vectors needs ef_search 1,000 for recall@10 0.955 (21 ms); built with 128 it
# gives 0.982 at ef_search 200 (3 ms), and builds in 602 s rather than 765 s with the graph in
# maintenance_work_mem.
HNSW_EF_CONSTRUCTION = 128
HNSW_OPTIONS = f"m = 16, ef_construction = {HNSW_EF_CONSTRUCTION}"
# The search widens (hnsw.ef_search, from 200 up to pgvector's 1,000) by one per this many stored
# vectors: for an index built as above, and for one built with a smaller ef_construction.
VECTORS_PER_EF = 5000
VECTORS_PER_EF_NARROW_BUILD = 1000
# Serialisation failures, deadlocks and key races are retried this many times.
WRITE_ATTEMPTS = 8
MIGRATION_LOCK = 0x4D535243  # "MSRC"
# A long note's chunk vectors (views chunk_2, …), as a literal (a partial index matches only a literal).
_CHUNK_VIEWS_SQL = "'" + CHUNK_VIEW_PREFIX.replace("_", "\\_") + "%%'"
# Recording access after a search waits no longer than this for rows another writer holds: it is
# best effort, and a search must answer while an import holds the store.
ACCESS_LOCK_TIMEOUT = "200ms"

# A new memory's columns: those it gives, its text's hash, its session chunk's id and its full-text facts.
_INSERT_COLUMNS = (*GIVEN_COLUMNS, "content_hash", "parent_id", "fts_length", "lexical_views")
# Columns that name another memory: a restore sets them once every memory is there.
_REFERS = tuple(f.name for f in MEMORY_FIELDS if f.spec.refers)
_RESTORED = tuple(f for f in MEMORY_FIELDS if not f.spec.refers)
_row_to_memory = POSTGRES.row_to_memory

_SQL_MIGRATIONS: tuple[str, ...] = (
    # 1: memories; postings (term offsets per memory and full-text column) with each memory's
    # token count and the table totals, for BM25; vectors and vector views of any dimension
    # (the HNSW indexes are made for the model's dimension when the first vectors arrive).
    """
    CREATE EXTENSION IF NOT EXISTS vector;
    CREATE TABLE memories (
        id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        key text UNIQUE,
        text text NOT NULL,
        content_hash text NOT NULL,
        created_at timestamptz NOT NULL,
        last_accessed_at timestamptz NOT NULL,
        access_count integer NOT NULL DEFAULT 0,
        importance double precision NOT NULL DEFAULT 0.5 CHECK (importance BETWEEN 0 AND 1),
        priority double precision NOT NULL DEFAULT 1.0 CHECK (priority BETWEEN 1 AND 2),
        pinned boolean NOT NULL DEFAULT false,
        project text,
        namespace text,
        session text,
        role text,
        tags text[] NOT NULL DEFAULT '{}',
        metadata text NOT NULL DEFAULT '{}',
        memory_score double precision CHECK (memory_score BETWEEN 0 AND 1),
        superseded_by bigint REFERENCES memories (id) ON DELETE SET NULL,
        group_id bigint,
        kind text NOT NULL DEFAULT 'note' CHECK (kind IN ('note', 'turn', 'session')),
        conversation text,
        position integer,
        parent_id bigint REFERENCES memories (id) ON DELETE SET NULL,
        fts_length integer NOT NULL DEFAULT 0,
        lexical_views text NOT NULL DEFAULT '{}'
    );
    CREATE INDEX memories_created_at ON memories (created_at, id);
    CREATE INDEX memories_project ON memories (project);
    CREATE INDEX memories_namespace ON memories (namespace);
    CREATE INDEX memories_content_hash ON memories (content_hash);
    CREATE INDEX memories_superseded_by ON memories (superseded_by);
    CREATE INDEX memories_conversation ON memories (conversation, session, position);
    CREATE INDEX memories_parent ON memories (parent_id);
    CREATE INDEX memories_kind ON memories (kind);
    CREATE TABLE postings (
        term text NOT NULL,
        col smallint NOT NULL,
        memory_id bigint NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
        positions integer[] NOT NULL,
        PRIMARY KEY (term, col, memory_id)
    );
    CREATE INDEX postings_memory ON postings (memory_id);
    CREATE TABLE fts_totals (
        shard smallint PRIMARY KEY,
        tokens bigint NOT NULL
    );
    INSERT INTO fts_totals (shard, tokens) SELECT s, 0 FROM generate_series(0, 15) s;
    CREATE TABLE vectors (
        memory_id bigint PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
        embedding vector NOT NULL
    );
    CREATE TABLE views (
        memory_id bigint NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
        view text NOT NULL,
        text text NOT NULL,
        embedding vector,
        PRIMARY KEY (memory_id, view)
    );
    CREATE INDEX views_view ON views (view, memory_id);
    CREATE TABLE meta (
        key text PRIMARY KEY,
        value text NOT NULL
    )
    """,
)


def _index_grams(db: Connection[Any]) -> None:
    """Migration 2: postings of the gram columns (CJK bigrams and symbols, see fts.GRAM_COLUMNS) for
    the memories stored before them, with their token counts."""
    columns = {FTS_COLUMNS.index(name) for name in GRAM_COLUMNS.values()}
    rows = db.execute("SELECT id, text, tags, kind, lexical_views FROM memories ORDER BY id").fetchall()
    grams = {
        memory_id: tuple(t if c in columns else "" for c, t in enumerate(fts_row(text, tags, kind, json.loads(views))))
        for memory_id, text, tags, kind, views in rows
    }
    ids = [memory_id for memory_id, texts in grams.items() if any(texts)]
    tokenized = list(zip(ids, _tokenizer.rows([grams[i] for i in ids]), strict=True))
    for memory_id, tokens in tokenized:
        db.execute("UPDATE memories SET fts_length = fts_length + %s WHERE id = %s", (tokens.length, memory_id))
        db.execute("UPDATE fts_totals SET tokens = tokens + %s WHERE shard = 0", (tokens.length,))
    with db.cursor().copy("COPY postings (term, col, memory_id, positions) FROM STDIN") as copy:  # schema 2's columns
        for memory_id, tokens in tokenized:
            for (column, term), offsets in tokens.positions.items():
                copy.write_row((term, column, memory_id, offsets))
    # Long notes' chunk vectors (views chunk_2, …) are read by every vector search.
    chunk_views = _CHUNK_VIEWS_SQL.replace("%%", "%")  # a statement without parameters takes % as it is
    db.execute(f"CREATE INDEX IF NOT EXISTS views_chunks ON views (memory_id) WHERE view LIKE {chunk_views}")  # type: ignore[arg-type]


# Migration 3: what the lexical leg reads without touching `memories` or counting postings. Each
# posting carries its term frequency and its memory's token count (D), in the primary key's
# index, so a term's posting list scores from the index alone; `term_docs` holds each (term,
# column)'s document count in 16 shards (by backend, so concurrent writers seldom share a row),
# kept by statement triggers on postings in the writer's own transaction; `fts_totals.memories`
# counts the memories (N). A bulk load may set `memsearch.bulk_load = on` for its transaction and
# count the documents once at its end (see restore). And an index for the speakers in scope (roles),
# which every search of the default profile asks for. Re-applying it rebuilds the same state.
_LEXICAL_STATISTICS = """
    ALTER TABLE postings
        ADD COLUMN IF NOT EXISTS tf integer GENERATED ALWAYS AS (cardinality(positions)) STORED,
        ADD COLUMN IF NOT EXISTS doc_length integer NOT NULL DEFAULT 0;
    UPDATE postings p SET doc_length = m.fts_length FROM memories m
        WHERE m.id = p.memory_id AND p.doc_length IS DISTINCT FROM m.fts_length;
    ALTER TABLE postings DROP CONSTRAINT postings_pkey,
        ADD PRIMARY KEY (term, col, memory_id) INCLUDE (tf, doc_length);
    ALTER TABLE fts_totals ADD COLUMN IF NOT EXISTS memories bigint NOT NULL DEFAULT 0;
    UPDATE fts_totals SET memories = CASE WHEN shard = 0 THEN (SELECT count(*) FROM memories) ELSE 0 END;
    CREATE TABLE IF NOT EXISTS term_docs (
        term text NOT NULL,
        col smallint NOT NULL,
        shard smallint NOT NULL,
        docs bigint NOT NULL,
        PRIMARY KEY (term, col, shard)
    );
    DELETE FROM term_docs;
    INSERT INTO term_docs (term, col, shard, docs) SELECT term, col, 0, count(*) FROM postings GROUP BY term, col;
    CREATE OR REPLACE FUNCTION memsearch_count_postings() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF current_setting('memsearch.bulk_load', true) = 'on' THEN
            RETURN NULL;
        END IF;
        IF TG_OP = 'INSERT' THEN
            INSERT INTO term_docs (term, col, shard, docs)
            SELECT term, col, pg_backend_pid() % 16, count(*) FROM added GROUP BY term, col ORDER BY term, col
            ON CONFLICT (term, col, shard) DO UPDATE SET docs = term_docs.docs + excluded.docs;
        ELSE
            INSERT INTO term_docs (term, col, shard, docs)
            SELECT term, col, pg_backend_pid() % 16, -count(*) FROM removed GROUP BY term, col ORDER BY term, col
            ON CONFLICT (term, col, shard) DO UPDATE SET docs = term_docs.docs + excluded.docs;
        END IF;
        RETURN NULL;
    END
    $$;
    DROP TRIGGER IF EXISTS postings_added ON postings;
    DROP TRIGGER IF EXISTS postings_removed ON postings;
    DROP TRIGGER IF EXISTS memories_length ON memories;
    CREATE TRIGGER postings_added AFTER INSERT ON postings REFERENCING NEW TABLE AS added
        FOR EACH STATEMENT EXECUTE FUNCTION memsearch_count_postings();
    CREATE TRIGGER postings_removed AFTER DELETE ON postings REFERENCING OLD TABLE AS removed
        FOR EACH STATEMENT EXECUTE FUNCTION memsearch_count_postings();
    CREATE OR REPLACE FUNCTION memsearch_posted_length() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE postings SET doc_length = NEW.fts_length WHERE memory_id = NEW.id;
        RETURN NULL;
    END
    $$;
    CREATE INDEX IF NOT EXISTS memories_role ON memories (role) WHERE role IS NOT NULL;
    CREATE TRIGGER memories_length AFTER UPDATE OF fts_length ON memories FOR EACH ROW
        WHEN (OLD.fts_length IS DISTINCT FROM NEW.fts_length) EXECUTE FUNCTION memsearch_posted_length();
"""

# Migration 4: each posting list in impact order (tf descending, then the memory's length, then
# its id: a posting's BM25 term falls along it), whose heads the lexical leg reads in a large
# store; the memories by length (the shortest bounds what the unread part of a list adds); and
# the memories whose lexical views differ from their own text (none: every view ranks alike).
_OWN_VIEWS_DIFFER = "lexical_views <> '{}' OR kind = 'session'"  # views of their own, or an empty prev
_IMPACT_ORDER = f"""
    CREATE INDEX IF NOT EXISTS postings_impact ON postings (term, col, tf DESC, doc_length, memory_id);
    CREATE INDEX IF NOT EXISTS memories_fts_length ON memories (fts_length);
    CREATE INDEX IF NOT EXISTS memories_own_views ON memories (id) WHERE {_OWN_VIEWS_DIFFER};
"""

MIGRATIONS: tuple[str | Callable[[Connection[Any]], None], ...] = (
    *_SQL_MIGRATIONS,
    _index_grams,
    _LEXICAL_STATISTICS,
    _IMPACT_ORDER,
)
SCHEMA_VERSION = len(MIGRATIONS)


def _scoped_hits(where: str) -> str:
    """The join that keeps a query's `hits` rows (`h`) to the memories in scope."""
    return "" if where == "true" else f"JOIN memories m ON m.id = h.memory_id WHERE {where}"


def _where(scope: Scope, alias: str = "m") -> tuple[str, list[Any]]:
    """A SQL condition over the memories table (under `alias`) for `scope`, and its parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("project", scope.project),
        ("namespace", scope.namespace),
        ("conversation", scope.conversation),
    ):
        if value is not None:
            clauses.append(f"{alias}.{column} = %s")
            params.append(value)
    if scope.tags:
        clauses.append(f"{alias}.tags @> %s::text[]")
        params.append(list(scope.tags))
    if scope.since is not None:
        clauses.append(f"{alias}.created_at >= %s")
        params.append(scope.since)
    if scope.until is not None:
        clauses.append(f"{alias}.created_at <= %s")
        params.append(scope.until)
    for column, values in (("kind", scope.kinds), ("role", scope.roles), ("session", scope.sessions)):
        if values:
            clauses.append(f"{alias}.{column} = ANY(%s::text[])")
            params.append(list(values))
    return (" AND ".join(clauses) or "true"), params


def _int_array(values: np.ndarray) -> str:
    """An integer array as a PostgreSQL array literal (cast in the SQL): thousands of ids bind far
    faster so than as a list of Python ints."""
    return "{" + ",".join(map(str, values.tolist())) + "}"


# The element types a _NumpyArrayLoader reads (by the element's OID), and their arrays' OIDs.
_NUMPY_ELEMENTS: dict[int, np.dtype[Any]] = {
    21: np.dtype(">i2"), 23: np.dtype(">i4"), 20: np.dtype(">i8"), 701: np.dtype(">f8")
}  # fmt: skip
_NUMPY_ARRAYS = (1005, 1007, 1016, 1022)  # int2[], int4[], int8[], float8[]


class _NumpyArrayLoader(Loader):
    """A one-dimensional array of numbers without NULLs, from PostgreSQL's binary array format
    (dimensions, flags, element OID; then each element's length and value) straight into numpy:
    lists of Python ints cost more than the queries that make them, at tens of thousands of
    postings per search."""

    format = Format.BINARY

    def load(self, data: Any) -> np.ndarray:
        buffer = memoryview(data)
        header = np.frombuffer(buffer, dtype=">i4", count=3)
        dimensions, has_nulls, element = int(header[0]), int(header[1]), int(header[2])
        dtype = _NUMPY_ELEMENTS[element]
        if dimensions == 0:
            return np.zeros(0, dtype=dtype.newbyteorder("="))
        if dimensions != 1 or has_nulls:
            raise ValueError("a numeric array of one dimension without NULLs was expected")
        (count,) = np.frombuffer(buffer, dtype=">i4", count=1, offset=12)
        items = np.frombuffer(buffer, dtype=np.dtype([("size", ">i4"), ("value", dtype)]), count=int(count), offset=20)
        return items["value"].astype(dtype.newbyteorder("="))


def hnsw_index_sql(name: str, table: str, dim: int, where: str | None = None) -> str:
    """The DDL of a cosine HNSW index over `table`'s embeddings typed for the model's dimension."""
    predicate = f" WHERE {where}" if where else ""
    return (
        f'CREATE INDEX IF NOT EXISTS "{name}" ON {table} USING hnsw '
        f"((embedding::vector({int(dim)})) vector_cosine_ops) WITH ({HNSW_OPTIONS}){predicate}"
    )


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


def lexical_views_of(text: str, stored: Mapping[str, str], kind: str) -> dict[str, str]:
    """Every full-text view's indexed text: a missing `context` is the memory's own text, a
    missing `prev` is empty (as the SQLite store indexes them)."""
    return {view: stored.get(view, default_view_text(kind, view, text)) for view in LEXICAL_VIEWS}


def _f32(vector: Any) -> np.ndarray:
    """A float32 array from a numpy array or a pgvector `Vector` read back from the database."""
    if hasattr(vector, "to_numpy"):
        vector = vector.to_numpy()
    return np.asarray(vector, dtype=np.float32)


_tokenizer = Fts5Tokenizer(len(FTS_COLUMNS))


class PostgresStore:
    """A memsearch store in a PostgreSQL database with pgvector. Open with `PostgresStore.open`.

    Each thread gets its own connection, so one store object serves a threaded server. Reads run
    in autocommit; every write is one transaction, retried on serialisation failures and deadlocks.
    """

    parallel_reads = True

    def __init__(self, url: str) -> None:
        self.url = url
        self.location = shown_location(url)
        self._local = threading.local()
        self._connections: builtins.list[Connection[Any]] = []
        self._lock = threading.Lock()
        self._indexed_dim: int | None = None
        self._cached_model: EmbeddingModelInfo | None = None
        self.read_only = read_only_requested()
        self._access_skipped = False  # the note that access was not recorded is given once

    # -- connections ----------------------------------------------------------------------

    @property
    def _db(self) -> Connection[Any]:
        connection: Connection[Any] | None = getattr(self._local, "connection", None)
        if connection is None or connection.closed:
            connection = self._connect()
            self._local.connection = connection
            self._local.hnsw_settings = None
            self._local.hnsw_built_wide = None
        return connection

    def _connect(self, *, register: bool = True) -> Connection[Any]:
        try:
            connection = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except psycopg.Error as error:
            message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise StoreNotFoundError(f"cannot connect to {self.location}: {message}") from None
        connection.execute("SET TIME ZONE 'UTC'")
        # psycopg prepares a statement run five times, and after five more the server may keep a
        # generic plan, blind to the parameters: a seq scan for `kind = $1 LIMIT 1` (most rows are
        # notes; 'session' has none: 200 ms at 500k memories), a posting-list plan for any term.
        # Prepared statements stay (no parsing); each execution is planned for its values.
        connection.execute("SET plan_cache_mode = force_custom_plan")
        if self.read_only:
            connection.execute("SET default_transaction_read_only = on")
        if register:
            register_vector(connection)
        with self._lock:
            self._connections.append(connection)
        return connection

    @classmethod
    def open(cls, url: str, *, create: bool = False) -> PostgresStore:
        """Open the store in the database at `url`; with `create`, set up the schema if missing."""
        store = cls(url)
        try:
            bootstrap = store._connect(register=False)
            store._migrate(bootstrap, create=create)
            store._local.connection = bootstrap
            register_vector(bootstrap)
        except BaseException:
            store.close()
            raise
        return store

    def _schema_version(self, connection: Connection[Any]) -> int | None:
        # A catalog query, not to_regclass(): after waiting on the advisory lock, the name cache may
        # still miss the table another process has just created.
        exists = connection.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename = 'memsearch_schema')"
        ).fetchone()
        if not exists or not exists[0]:
            return None
        row = connection.execute("SELECT max(version) FROM memsearch_schema").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def _migrate(self, connection: Connection[Any], *, create: bool) -> None:
        """Apply the missing numbered migrations under an advisory lock, so processes starting at
        once migrate exactly once between them."""
        if self._schema_version(connection) == SCHEMA_VERSION:
            return
        try:
            self._apply_migrations(connection, create=create)
        except pg_errors.ReadOnlySqlTransaction:
            raise StoreUnavailableError(
                f"{self.location} is read-only here and its schema is missing or older than this memsearch's "
                f"({SCHEMA_VERSION}); open it once with write access"
            ) from None

    def _apply_migrations(self, connection: Connection[Any], *, create: bool) -> None:
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            version = self._schema_version(connection)
            if version is None:
                if not create:
                    raise StoreNotFoundError(f"no memsearch store at {self.location}")
                tables = connection.execute(
                    "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename IN "
                    "('memories', 'postings', 'vectors', 'views', 'meta')"
                ).fetchone()
                if tables and tables[0]:
                    raise StoreCorruptError(f"{self.location} holds tables of another program, not a memsearch store")
                connection.execute("CREATE TABLE memsearch_schema (version integer PRIMARY KEY)")
                version = 0
            if version > SCHEMA_VERSION:
                raise StoreCorruptError(
                    f"{self.location} has schema version {version}, newer than this memsearch's {SCHEMA_VERSION}; "
                    "upgrade memsearch"
                )
            for number in range(version + 1, SCHEMA_VERSION + 1):
                migration = MIGRATIONS[number - 1]
                if callable(migration):
                    migration(connection)
                else:
                    connection.execute(migration)  # type: ignore[arg-type]
                connection.execute("INSERT INTO memsearch_schema (version) VALUES (%s)", (number,))

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()
        self._local = threading.local()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- transactions and store facts -----------------------------------------------------

    def _write(self, work: Callable[[Connection[Any]], T]) -> T:
        """Run `work` in one transaction, again on a serialisation failure, deadlock or key race
        (the retry sees the other writer's row and decides anew)."""
        for attempt in range(WRITE_ATTEMPTS):
            try:
                with self._db.transaction():
                    return work(self._db)
            except (pg_errors.SerializationFailure, pg_errors.DeadlockDetected, pg_errors.UniqueViolation):
                if attempt == WRITE_ATTEMPTS - 1:
                    raise
                time.sleep(0.005 * (2**attempt))
            except pg_errors.ReadOnlySqlTransaction:
                raise StoreUnavailableError(
                    f"{self.location} is read-only here (a read-only server, role or database, or "
                    "MEMSEARCH_READ_ONLY is set); nothing was changed"
                ) from None
        raise AssertionError("unreachable")

    @property
    def schema_version(self) -> int:
        return self._schema_version(self._db) or 0

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, db: Connection[Any], key: str, value: str) -> None:
        if self._meta(key) == value:  # the usual case: no row lock for every writer to queue on
            return
        db.execute(
            "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value "
            "WHERE meta.value IS DISTINCT FROM excluded.value",
            (key, value),
        )

    def embedding_model(self) -> EmbeddingModelInfo | None:
        rows = dict(self._db.execute("SELECT key, value FROM meta WHERE key IN ('embedding_model', 'embedding_dim')"))
        name, dim = rows.get("embedding_model"), rows.get("embedding_dim")
        return EmbeddingModelInfo(name, int(dim)) if name and dim else None

    def _search_model(self) -> EmbeddingModelInfo | None:
        """The model, read once per store object for searches (its dimension types the index
        scan); writes always read it afresh through check_model."""
        if self._cached_model is None:
            self._cached_model = self.embedding_model()
        return self._cached_model

    def check_model(self, model: EmbeddingModelInfo) -> None:
        """Refuse to mix vectors of two models in one store."""
        stored = self.embedding_model()
        if stored is not None and stored != model and self.vector_count():
            raise ModelMismatchError(
                f"this store's vectors come from {stored.name} ({stored.dim}-d) but the model in use is "
                f"{model.name} ({model.dim}-d)"
            )

    def _record_model(self, db: Connection[Any], model: EmbeddingModelInfo) -> None:
        """Record the model and make the HNSW indexes for its dimension (once per dimension)."""
        self._set_meta(db, "embedding_model", model.name)
        self._set_meta(db, "embedding_dim", str(model.dim))
        self._cached_model = None
        if self._indexed_dim == model.dim:
            return
        dim = int(model.dim)
        query = "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'vectors_hnsw'"
        existing = db.execute(query).fetchone()
        if existing and f"vector({dim})" in existing[0]:  # the usual case: no lock, no DDL
            self._indexed_dim = dim
            return
        db.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK + 1,))
        existing = db.execute(query).fetchone()
        if existing and f"vector({dim})" not in existing[0]:
            db.execute("DROP INDEX vectors_hnsw")
            for view in VECTOR_VIEWS:
                db.execute(f'DROP INDEX IF EXISTS "views_hnsw_{view}"')
        db.execute(hnsw_index_sql("vectors_hnsw", "vectors", dim))  # type: ignore[arg-type]
        for view in VECTOR_VIEWS:
            db.execute(hnsw_index_sql(f"views_hnsw_{view}", "views", dim, f"view = '{view}'"))  # type: ignore[arg-type]
        self._indexed_dim = dim

    # -- writes ---------------------------------------------------------------------------

    def insert(
        self,
        memories: Sequence[NewMemory],
        vectors: np.ndarray | None,
        model: EmbeddingModelInfo | None,
        now: datetime,
        *,
        replace: bool = False,
        view_vectors: Mapping[int, Mapping[str, np.ndarray]] | None = None,
    ) -> builtins.list[int]:
        """Store the memories with their postings and vectors in one transaction; return their ids.

        A key that exists already is an error unless `replace`, which rewrites that memory in place.
        """
        if vectors is not None and model is None:
            raise ValueError("vectors need the model that made them")
        tokenized = _tokenizer.rows([self._fts_texts(memory) for memory in memories])

        def work(db: Connection[Any]) -> builtins.list[int]:
            if model is not None:
                self.check_model(model)
                self._record_model(db, model)
            ids: builtins.list[int] = []
            for memory, tokens in zip(memories, tokenized, strict=True):
                existing = self.id_for_key(memory.key) if memory.key is not None else None
                if existing is not None and not replace:
                    raise DuplicateKeyError(f"a memory with key {memory.key!r} exists already (id {existing})")
                parent_id = self.id_for_key(memory.parent_key) if memory.parent_key is not None else None
                lexical = {v: memory.views[v] for v in LEXICAL_VIEWS if v in memory.views}
                values = (
                    *POSTGRES.given_values(memory, now),
                    content_hash(memory.text),
                    parent_id,
                    tokens.length,
                    json.dumps(lexical, ensure_ascii=False),
                )
                if existing is not None:
                    (old_length,) = db.execute(
                        "SELECT fts_length FROM memories WHERE id = %s FOR UPDATE", (existing,)
                    ).fetchone()  # type: ignore[misc]
                    sets = ", ".join(f"{column} = %s" for column in _INSERT_COLUMNS)
                    db.execute(
                        f"UPDATE memories SET {sets}, last_accessed_at = created_at WHERE id = %s",  # type: ignore[arg-type]
                        (*values, existing),
                    )
                    self._add_tokens(db, tokens.length - old_length)  # fts_totals before term_docs, always
                    db.execute("DELETE FROM postings WHERE memory_id = %s", (existing,))
                    db.execute("DELETE FROM views WHERE memory_id = %s", (existing,))
                    memory_id = existing
                else:
                    row = db.execute(
                        f"INSERT INTO memories ({', '.join(_INSERT_COLUMNS)}, last_accessed_at) "  # type: ignore[arg-type]
                        f"VALUES ({POSTGRES.marks(len(_INSERT_COLUMNS) + 1)}) RETURNING id",
                        (*values, values[_INSERT_COLUMNS.index("created_at")]),
                    ).fetchone()
                    memory_id = int(row[0])  # type: ignore[index]
                    self._add_tokens(db, tokens.length, memories=1)
                ids.append(memory_id)
            self._copy_postings(db, zip(ids, tokenized, strict=True))
            if vectors is not None:
                self._copy_vectors(db, ((memory_id, vectors[i]) for i, memory_id in enumerate(ids)), upsert=True)
            view_rows = [
                (ids[index], view, memories[index].views[view], vector)
                for index, views in sorted((view_vectors or {}).items())
                for view, vector in sorted(views.items())
            ]
            self._copy_views(db, view_rows)
            return ids

        return self._write(work)

    @staticmethod
    def _fts_texts(memory: NewMemory | Memory, lexical_views: Mapping[str, str] | None = None) -> tuple[str, ...]:
        views = lexical_views if lexical_views is not None else getattr(memory, "views", {})
        return fts_row(memory.text, memory.tags, memory.kind, views)

    @staticmethod
    def _add_tokens(db: Connection[Any], delta: int, *, memories: int = 0) -> None:
        """Add to the token total and the memory count. Every write does this before it changes
        postings (whose triggers lock term_docs rows), so two writers lock in one order."""
        if delta or memories:
            # one of 16 counters, by connection, so concurrent writers seldom wait on each other
            db.execute(
                "UPDATE fts_totals SET tokens = tokens + %s, memories = memories + %s "
                "WHERE shard = pg_backend_pid() %% 16",
                (delta, memories),
            )

    @staticmethod
    def _copy_postings(db: Connection[Any], rows: Iterable[tuple[int, Any]]) -> None:
        """Postings of whole memories (`tokens` of all their columns, so its length is their D)."""
        with db.cursor().copy("COPY postings (term, col, memory_id, positions, doc_length) FROM STDIN") as copy:
            for memory_id, tokens in rows:
                for (column, term), offsets in tokens.positions.items():
                    copy.write_row((term, column, memory_id, offsets, tokens.length))

    @staticmethod
    def _copy_vectors(db: Connection[Any], rows: Iterable[tuple[int, np.ndarray]], *, upsert: bool = False) -> None:
        rows = list(rows)
        if not rows:
            return
        if upsert:
            db.execute("DELETE FROM vectors WHERE memory_id = ANY(%s)", ([memory_id for memory_id, _ in rows],))
        with db.cursor().copy("COPY vectors (memory_id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["bigint", "vector"])
            for memory_id, vector in rows:
                copy.write_row((memory_id, _f32(vector)))

    @staticmethod
    def _copy_views(db: Connection[Any], rows: Sequence[tuple[int, str, str, np.ndarray | None]]) -> None:
        if not rows:
            return
        with db.cursor().copy("COPY views (memory_id, view, text, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["bigint", "text", "text", "vector"])
            for memory_id, view, text, vector in rows:
                copy.write_row((memory_id, view, text, None if vector is None else _f32(vector)))

    def delete(self, ids: Sequence[int], rewrites: Sequence[Rewrite] = ()) -> None:
        """Delete all of the memories and apply the rewrites or, if any id is unknown, do nothing."""

        def work(db: Connection[Any]) -> None:
            wanted = sorted({int(i) for i in ids})
            found = db.execute(
                "SELECT id, fts_length FROM memories WHERE id = ANY(%s) ORDER BY id FOR UPDATE", (wanted,)
            ).fetchall()
            missing = sorted(set(wanted) - {memory_id for memory_id, _ in found})
            if missing:
                raise MemoryNotFoundError(f"no memory with id {missing[0]}; nothing was deleted")
            self._add_tokens(db, -sum(length for _, length in found), memories=-len(found))
            db.execute("DELETE FROM memories WHERE id = ANY(%s)", (wanted,))
            for rewrite in rewrites:
                self._rewrite(db, rewrite)

        self._write(work)

    def _rewrite(self, db: Connection[Any], rewrite: Rewrite) -> None:
        row = db.execute(
            "SELECT kind, tags, lexical_views, fts_length FROM memories WHERE id = %s FOR UPDATE", (rewrite.id,)
        ).fetchone()
        if row is None:
            raise MemoryNotFoundError(f"no memory with id {rewrite.id}; nothing was deleted")
        kind, tags, stored, old_length = row
        lexical = json.loads(stored)
        for view, value in rewrite.views.items():
            if view in LEXICAL_VIEWS:
                lexical.pop(view, None)
                if value is not None:
                    lexical[view] = value[0]
        tokens = _tokenizer.rows([fts_row(rewrite.text, tags, kind, lexical)])[0]
        db.execute(
            "UPDATE memories SET text = %s, content_hash = %s, metadata = %s, lexical_views = %s, fts_length = %s "
            "WHERE id = %s",
            (rewrite.text, content_hash(rewrite.text), json.dumps(dict(rewrite.metadata), ensure_ascii=False),
             json.dumps(lexical, ensure_ascii=False), tokens.length, rewrite.id),
        )  # fmt: skip
        self._add_tokens(db, tokens.length - old_length)
        db.execute("DELETE FROM postings WHERE memory_id = %s", (rewrite.id,))
        self._copy_postings(db, [(rewrite.id, tokens)])
        db.execute("DELETE FROM views WHERE memory_id = %s AND view = ANY(%s)", (rewrite.id, list(rewrite.views)))
        self._copy_views(
            db,
            [(rewrite.id, view, value[0], value[1]) for view, value in sorted(rewrite.views.items())
             if value is not None and value[1] is not None],
        )  # fmt: skip
        self._copy_vectors(db, [(rewrite.id, rewrite.vector)], upsert=True)

    def touch(self, ids: Sequence[int], now: datetime) -> None:
        """Record that a search returned these memories (ids in order, so writers never deadlock)."""
        if not ids:
            return

        def work(db: Connection[Any]) -> None:
            # best effort too: the search need not wait for the WAL flush (a crash may lose the
            # last moments' access counts, never a memory); both settings in one round trip
            db.execute(
                "SELECT set_config('lock_timeout', %s, true), set_config('synchronous_commit', 'off', true)",
                (ACCESS_LOCK_TIMEOUT,),
            )
            # one statement (a memory listed twice counts twice, as in SQLite); rows locked in id order
            counts = sorted(Counter(int(i) for i in ids).items())
            db.execute(
                "UPDATE memories SET access_count = access_count + hits.n, "
                "last_accessed_at = greatest(last_accessed_at, %s) "
                "FROM (SELECT m.id, t.n FROM memories m JOIN unnest(%s::bigint[], %s::int[]) t(id, n) ON t.id = m.id "
                "ORDER BY m.id FOR UPDATE OF m) hits WHERE memories.id = hits.id",
                (now, [i for i, _ in counts], [n for _, n in counts]),
            )

        try:
            self._write(work)
        except (StoreUnavailableError, pg_errors.LockNotAvailable) as error:
            # best effort: a read-only or busy store still answers searches
            if not self._access_skipped:
                self._access_skipped = True
                reason = str(error) if isinstance(error, StoreUnavailableError) else "another writer holds its memories"
                log.warning("access not recorded: %s", reason)

    def update(self, memory_id: int, changes: dict[str, Any]) -> Memory:
        """Change some of SETTABLE_FIELDS of one memory (tags rewrite its tag postings too)."""
        unknown = set(changes) - set(SETTABLE_FIELDS)
        if unknown:
            raise ValueError(f"cannot set {sorted(unknown)}")

        def work(db: Connection[Any]) -> None:
            memory = self.get(memory_id)
            (length,) = db.execute("SELECT fts_length FROM memories WHERE id = %s FOR UPDATE", (memory_id,)).fetchone()  # type: ignore[misc]
            for name, value in changes.items():
                stored = POSTGRES.write(FIELDS_BY_NAME[name], value)
                db.execute(f"UPDATE memories SET {name} = %s WHERE id = %s", (stored, memory_id))
            if "tags" in changes:  # the tags column, and the grams column made from text and tags
                changed = [FTS_COLUMNS.index("tags"), FTS_COLUMNS.index(GRAM_COLUMNS[None])]

                def tag_columns(tags: Sequence[str]) -> tuple[str, ...]:
                    row = fts_row(memory.text, tags, memory.kind, {})
                    return tuple(text if i in changed else "" for i, text in enumerate(row))

                old = _tokenizer.rows([tag_columns(memory.tags)])[0]
                new = _tokenizer.rows([tag_columns(changes["tags"])])[0]
                delta = new.length - old.length
                self._add_tokens(db, delta)
                # the memory's other postings take its new length from the memories_length trigger
                db.execute("UPDATE memories SET fts_length = %s WHERE id = %s", (length + delta, memory_id))
                db.execute("DELETE FROM postings WHERE memory_id = %s AND col = ANY(%s)", (memory_id, changed))
                with db.cursor().copy("COPY postings (term, col, memory_id, positions, doc_length) FROM STDIN") as copy:
                    for (column, term), offsets in new.positions.items():
                        copy.write_row((term, column, memory_id, offsets, length + delta))

        self._write(work)
        return self.get(memory_id)

    def set_consolidation(self, superseded: dict[int, int], groups: dict[int, int]) -> None:
        """Replace every supersession mark and group id in one transaction."""

        def work(db: Connection[Any]) -> None:
            db.execute(
                "UPDATE memories SET superseded_by = NULL, group_id = NULL "
                "WHERE superseded_by IS NOT NULL OR group_id IS NOT NULL"
            )
            with db.cursor() as cursor:
                cursor.executemany(
                    "UPDATE memories SET superseded_by = %s WHERE id = %s",
                    [(new, old) for old, new in sorted(superseded.items())],
                )
                cursor.executemany(
                    "UPDATE memories SET group_id = %s WHERE id = %s", [(g, mid) for mid, g in sorted(groups.items())]
                )

        self._write(work)

    def replace_vectors(
        self,
        ids: Sequence[int],
        vectors: np.ndarray,
        model: EmbeddingModelInfo,
        view_vectors: Mapping[tuple[int, str], np.ndarray] | None = None,
    ) -> None:
        """Swap every vector (and each (memory id, view)'s) for one of `model` in one transaction."""

        def work(db: Connection[Any]) -> None:
            db.execute("LOCK TABLE vectors IN EXCLUSIVE MODE")
            self._indexed_dim = None
            db.execute("DELETE FROM vectors")
            self._record_model(db, model)
            with db.cursor() as cursor:
                cursor.executemany(
                    "UPDATE views SET embedding = %s WHERE memory_id = %s AND view = %s",
                    [(_f32(v), memory_id, view) for (memory_id, view), v in (view_vectors or {}).items()],
                )
            self._copy_vectors(db, ((memory_id, vectors[row]) for row, memory_id in enumerate(ids)))

        self._write(work)

    # -- copy between stores -----------------------------------------------------------------

    def export(self, batch: int = 1000) -> Iterator[ExportedMemory]:
        """Every memory with all it holds, in id order (for `copy_store`)."""
        last = 0
        while True:
            memories = [
                _row_to_memory(row)
                for row in self._db.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id > %s ORDER BY id LIMIT %s", (last, batch)
                )
            ]
            if not memories:
                return
            ids = [m.id for m in memories]
            lexical = dict(
                self._db.execute("SELECT id, lexical_views FROM memories WHERE id = ANY(%s)", (ids,)).fetchall()
            )
            vectors = self.vectors(ids)
            views: dict[int, dict[str, tuple[str, np.ndarray | None]]] = defaultdict(dict)
            for memory_id, view, text, embedding in self._db.execute(
                "SELECT memory_id, view, text, embedding FROM views WHERE memory_id = ANY(%s) ORDER BY memory_id, view",
                (ids,),
                binary=True,
            ):
                views[memory_id][view] = (text, None if embedding is None else _f32(embedding))
            for memory in memories:
                yield ExportedMemory(
                    memory,
                    lexical_views_of(memory.text, json.loads(lexical[memory.id]), memory.kind),
                    vectors.get(memory.id),
                    views.get(memory.id, {}),
                )
            last = ids[-1]

    def restore(self, memories: Iterable[ExportedMemory], model: EmbeddingModelInfo | None) -> int:
        """Write exported memories into this empty store, keeping their ids, in one transaction."""

        def work(db: Connection[Any]) -> int:
            db.execute("LOCK TABLE memories IN EXCLUSIVE MODE")
            if db.execute("SELECT EXISTS (SELECT 1 FROM memories)").fetchone()[0]:  # type: ignore[index]
                raise InvalidInputError(f"{self.location} holds memories already; copy needs an empty store")
            if model is not None:
                self._record_model(db, model)
            db.execute("SET LOCAL memsearch.bulk_load = on")  # term_docs counted once, at the end
            links: builtins.list[tuple[Any, ...]] = []
            total_tokens = written = 0
            batch: builtins.list[ExportedMemory] = []

            def flush() -> None:
                nonlocal total_tokens
                tokenized = _tokenizer.rows(
                    [self._fts_texts(e.memory, e.lexical_views) for e in batch]  # type: ignore[arg-type]
                )
                restored = ", ".join(f.name for f in _RESTORED)
                with db.cursor().copy(
                    f"COPY memories ({restored}, fts_length, lexical_views) FROM STDIN"  # type: ignore[arg-type]
                ) as copy:
                    for exported, tokens in zip(batch, tokenized, strict=True):
                        m = exported.memory
                        stored_views = {
                            view: text
                            for view, text in exported.lexical_views.items()
                            if text != lexical_views_of(m.text, {}, m.kind).get(view)
                        }
                        copy.write_row(
                            (*(POSTGRES.write(f, getattr(m, f.name)) for f in _RESTORED), tokens.length,
                             json.dumps(stored_views, ensure_ascii=False))
                        )  # fmt: skip
                        total_tokens += tokens.length
                self._copy_postings(db, ((e.memory.id, t) for e, t in zip(batch, tokenized, strict=True)))
                self._copy_vectors(db, ((e.memory.id, e.vector) for e in batch if e.vector is not None))
                self._copy_views(
                    db,
                    [(e.memory.id, view, text, vec) for e in batch for view, (text, vec) in sorted(e.views.items())],
                )
                batch.clear()

            for exported in memories:
                batch.append(exported)
                written += 1
                memory = exported.memory
                if any(getattr(memory, name) is not None for name in _REFERS):
                    links.append((*(getattr(memory, name) for name in _REFERS), memory.id))
                if len(batch) >= 1000:
                    flush()
            if batch:
                flush()
            # Links may point forward in id order: set once every memory is there.
            with db.cursor() as cursor:
                sets = ", ".join(f"{name} = %s" for name in _REFERS)
                cursor.executemany(f"UPDATE memories SET {sets} WHERE id = %s", links)  # type: ignore[arg-type]
            self._add_tokens(db, total_tokens, memories=written)
            db.execute(
                "INSERT INTO term_docs (term, col, shard, docs) SELECT term, col, 0, count(*) FROM postings "
                "GROUP BY term, col ORDER BY term, col "
                "ON CONFLICT (term, col, shard) DO UPDATE SET docs = term_docs.docs + excluded.docs"
            )
            db.execute("SET LOCAL memsearch.bulk_load = off")
            db.execute(
                "SELECT setval(pg_get_serial_sequence('memories', 'id'), greatest(1, (SELECT max(id) FROM memories)), "
                "(SELECT count(*) > 0 FROM memories))"
            )
            return written

        return self._write(work)

    # -- reads ----------------------------------------------------------------------------

    def id_for_key(self, key: str) -> int | None:
        row = self._db.execute("SELECT id FROM memories WHERE key = %s", (key,)).fetchone()
        return row[0] if row else None

    def get(self, memory_id: int) -> Memory:
        row = self._db.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = %s", (memory_id,)).fetchone()
        if row is None:
            raise MemoryNotFoundError(f"no memory with id {memory_id}")
        return _row_to_memory(row)

    def get_by_key(self, key: str) -> Memory:
        memory_id = self.id_for_key(key)
        if memory_id is None:
            raise MemoryNotFoundError(f"no memory with key {key!r}")
        return self.get(memory_id)

    def get_many(self, ids: Sequence[int]) -> dict[int, Memory]:
        unique = list(dict.fromkeys(int(i) for i in ids))
        rows = self._db.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ANY(%s)", (unique,))
        return {row[0]: _row_to_memory(row) for row in rows}

    def list(self, scope: Scope = EVERYTHING, *, limit: int | None = None, offset: int = 0) -> builtins.list[Memory]:
        """Memories in scope, newest first."""
        where, params = _where(scope)
        rows = self._db.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories m WHERE {where} ORDER BY m.created_at DESC, m.id DESC "
            "LIMIT %s OFFSET %s",
            (*params, limit, offset),
        )
        return [_row_to_memory(row) for row in rows]

    def iter_texts(self) -> Iterator[tuple[int, str]]:
        yield from self._db.execute("SELECT id, text FROM memories ORDER BY id").fetchall()

    def count(self, scope: Scope = EVERYTHING) -> int:
        where, params = _where(scope)
        return int(self._db.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone()[0])  # type: ignore[index]

    def vector_count(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM vectors").fetchone()[0])  # type: ignore[index]

    def roles(self, scope: Scope) -> builtins.list[str]:
        where, params = _where(scope)
        sql = f"SELECT DISTINCT m.role FROM memories m WHERE m.role IS NOT NULL AND {where} ORDER BY 1"
        return [row[0] for row in self._db.execute(sql, params)]

    def has_kind(self, kind: str) -> bool:
        return self._db.execute("SELECT 1 FROM memories WHERE kind = %s LIMIT 1", (kind,)).fetchone() is not None

    # -- lexical: FTS5's bm25() in SQL ------------------------------------------------------

    @staticmethod
    def _columns(view: str | None) -> builtins.list[int]:
        if view is None:
            return [FTS_COLUMNS.index("text"), FTS_COLUMNS.index("tags")]
        if view in LEXICAL_VIEWS:
            return [FTS_COLUMNS.index(view)]
        raise ValueError(f"no full-text view {view!r}")

    def _phrase_hits(self, phrase: tuple[str, ...], columns: builtins.list[int]) -> dict[int, tuple[int, int]]:
        """memory id → (how often a phrase of several tokens occurs in `columns`, summed over them;
        the memory's token count D)."""
        by_memory: dict[tuple[int, int], dict[str, list[int]]] = defaultdict(dict)
        lengths: dict[int, int] = {}
        for memory_id, col, term, positions, length in self._db.execute(
            "SELECT memory_id, col, term, positions, doc_length FROM postings WHERE term = ANY(%s) AND col = ANY(%s)",
            (list(set(phrase)), columns),
        ):
            by_memory[(memory_id, col)][term] = positions
            lengths[memory_id] = length
        hits: dict[int, int] = defaultdict(int)
        for (memory_id, _), terms in by_memory.items():
            if all(token in terms for token in phrase):
                found = phrase_count([terms[token] for token in phrase])
                if found:
                    hits[memory_id] += found
        return {memory_id: (frequency, lengths[memory_id]) for memory_id, frequency in hits.items()}

    def _documents_with_terms(self, term_cols: builtins.list[tuple[str, builtins.list[int]]]) -> builtins.list[int]:
        """How many memories hold each term in any of its columns, from the term_docs counters (a
        term in text and tags at once counts once: that overlap is counted from the postings)."""
        counts: dict[tuple[str, int], int] = {
            (term, int(col)): int(docs)
            for term, col, docs in self._db.execute(
                "SELECT term, col, sum(docs)::bigint FROM term_docs WHERE term = ANY(%s) GROUP BY term, col",
                (sorted({term for term, _ in term_cols}),),
            )
        }
        found: builtins.list[int] = []
        for term, columns in term_cols:
            present = sorted((c for c in columns if counts.get((term, c), 0) > 0), key=lambda c: counts[term, c])
            total = sum(counts[term, c] for c in present)
            for at, rarer in enumerate(present):  # memories also in a later (commoner) column count once
                later = present[at + 1 :]
                if later:
                    (overlap,) = self._db.execute(
                        "SELECT count(*) FROM postings a WHERE a.term = %s AND a.col = %s AND EXISTS (SELECT 1 "
                        "FROM postings b WHERE b.term = a.term AND b.col = ANY(%s) AND b.memory_id = a.memory_id)",
                        (term, rarer, later),
                    ).fetchone()  # type: ignore[misc]
                    total -= int(overlap)
            found.append(total)
        return found

    def lexical_search(self, query: str, scope: Scope, limit: int, view: str | None = None) -> LexicalHits:
        """FTS5's BM25 (k1 1.2, b 0.75, its idf and its document lengths), best first, ties to the
        smaller id: over text and tags, or over one view's column only. The statistics and the
        ranking are read in one snapshot, so concurrent writers cannot make them disagree."""
        columns = self._columns(view)
        phrases = [(tokens, columns) for tokens in (_tokenizer.phrase(p) for p in match_phrases(query)) if tokens]
        grams = [FTS_COLUMNS.index(GRAM_COLUMNS[view])]  # CJK bigrams and symbols (none in plain English)
        phrases += [(tokens, grams) for tokens in (_tokenizer.phrase(t) for t in query_grams(query)) if tokens]
        if not phrases or limit <= 0:
            return LexicalHits()
        key = (query, scope, limit)
        alike = False
        if view is not None:
            # Where every memory's views hold its own text (a store of notes), each view ranks
            # alike: the leg over the next view is the one just run, if nothing was written since
            # (the same snapshot), as the SQLite store shares one query between them.
            snapshot, alike = self._db.execute(
                f"SELECT pg_current_snapshot()::text, NOT EXISTS (SELECT 1 FROM memories WHERE {_OWN_VIEWS_DIFFER})"
            ).fetchone()  # type: ignore[misc]
            last = getattr(self._local, "lexical_memo", None)
            if alike and last is not None and last[:2] == (key, snapshot):
                return LexicalHits(last[2], last[2].engine)
        with self._db.transaction():
            self._db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            hits = self._bm25(phrases, scope, limit)
        if alike:
            self._local.lexical_memo = (key, snapshot, hits)
        return LexicalHits(hits, hits.engine)

    def _bm25(
        self, phrases: builtins.list[tuple[tuple[str, ...], builtins.list[int]]], scope: Scope, limit: int
    ) -> LexicalHits:
        """BM25 of the phrases, each searched in its own columns (FTS5's `{columns} : phrase`),
        exactly as FTS5 scores them, but without scoring every memory that holds a common word.

        The phrases are split by their score bound, idf·(k1+1) (a phrase adds less than that to
        any memory): the rarest ones (essential) find the candidates, which are scored on them
        alone; the k-th best of those partial scores, less the bound of the other phrases, is the
        least a memory needs to be scored in full. When the k-th full score beats the bound of the
        other phrases, no memory holding none of the essential phrases can reach the top k, and
        the answer is exact; otherwise one more phrase becomes essential (at worst all are, and
        every matching memory is scored, as FTS5 does). Common words have a tiny idf (FTS5 floors
        it at 1e-6 for a word in half the memories), so they seldom need scoring at all.
        """
        rows, tokens = self._db.execute("SELECT sum(memories)::bigint, sum(tokens)::bigint FROM fts_totals").fetchone()  # type: ignore[misc]
        if not rows:
            return LexicalHits()
        singles = [(ordinal, p[0], cols) for ordinal, (p, cols) in enumerate(phrases) if len(p) == 1]
        single_counts = dict(
            zip(
                [ordinal for ordinal, _, _ in singles],
                self._documents_with_terms([(term, cols) for _, term, cols in singles]),
                strict=True,
            )
        )
        # One row per (term, ordinal, column) of the single-token phrases; one per (memory,
        # ordinal) of the phrases of several tokens, with f and D.
        term_cols = [(term, ordinal, col) for ordinal, term, cols in singles for col in cols]
        query_rows = [[t for t, _, _ in term_cols], [o for _, o, _ in term_cols], [c for _, _, c in term_cols]]
        extra: builtins.list[builtins.list[Any]] = [[], [], [], []]
        idfs: builtins.list[float] = []
        documents: builtins.list[int] = []
        for ordinal, (phrase, columns) in enumerate(phrases):
            if len(phrase) == 1:
                hits = single_counts[ordinal]
            else:
                found = self._phrase_hits(phrase, columns)
                for memory_id, (frequency, length) in found.items():
                    for column, value in zip(extra, (memory_id, ordinal, float(frequency), length), strict=True):
                        column.append(value)
                hits = len(found)
            idfs.append(idf(rows, hits))
            documents.append(hits)
        where, scope_params = _where(scope)
        average = tokens / rows
        if sum(documents) > IMPACT_ABOVE:
            return self._bm25_impact(term_cols, extra, idfs, where, scope_params, limit, average)
        bounds = [value * (K1 + 1.0) for value in idfs]
        by_bound = sorted(range(len(phrases)), key=lambda o: (-bounds[o], documents[o], o))
        essential = next(
            (j for j in range(1, len(by_bound)) if sum(documents[o] for o in by_bound[:j]) >= limit), len(by_bound)
        )
        common = [*query_rows, *extra, idfs]
        for count in range(essential, len(by_bound) + 1):
            rest = sum(bounds[o] for o in by_bound[count:]) * (1 + 1e-9) + 1e-12  # float slack
            # Pruning pays where the other phrases weigh less than an essential phrase adds to
            # a memory of average length holding it once (bound / (k1 + 1)), and the essential
            # phrases hold under half the postings; else scoring every memory costs about the same.
            if (
                count == len(by_bound)
                or rest >= min(idfs[o] for o in by_bound[:count])
                or 2 * sum(documents[o] for o in by_bound[:count]) > sum(documents)
            ):
                return self._bm25_rows(self._bm25_all_sql(where, average), [*common, *scope_params, limit])
            chosen = sorted(by_bound[:count])
            (contenders,) = self._db.execute(  # type: ignore[misc]
                self._bm25_contenders_sql(where, average), [*common, chosen, chosen, *scope_params, limit - 1, rest]
            ).fetchone()
            contenders = contenders or []
            if len(contenders) * len(term_cols) > sum(documents) / 4:  # look-ups would cost more than the lists
                return self._bm25_rows(self._bm25_all_sql(where, average), [*common, *scope_params, limit])
            top = self._bm25_rows(self._bm25_scored_sql(average), [*common, contenders, limit])
            if len(top) == limit and top[-1][1] > rest:
                return top
        raise AssertionError("unreachable")

    def _bm25_impact(
        self,
        lists: builtins.list[tuple[str, int, int]],
        extra: builtins.list[builtins.list[Any]],
        idfs: builtins.list[float],
        where: str,
        scope_params: builtins.list[Any],
        limit: int,
        average: float,
    ) -> LexicalHits:
        """The top k by BM25 from the heads of the posting lists (`lists`: term, phrase ordinal,
        column) read in impact order, for queries whose lists are long.

        Along a list in the postings_impact index (tf descending, then the memory's length D, then
        its id) a posting's BM25 term only falls. Every memory seen in a head is a candidate; its
        score lies between what its seen postings give (lower) and that plus the most the unread
        parts of its other lists can add (upper, knowing its D and id). Candidates whose upper
        bound reaches the k-th lower bound are scored exactly (their missing postings looked up).
        A memory seen in no head scores at most the sum of the lists' bounds past their heads:
        when the k-th exact score beats that sum, or ties it with an id no larger than an unseen
        memory of that score must have (within one tf and D a list runs by id), the top k is
        FTS5's, exact. Otherwise the open heads grow fourfold (at once, when that costs less than
        the look-ups: LOOKUP_COST), until POSTING_BUDGET postings are read: then the best memories
        found are returned scored exactly (`bounded`: the top k not proven). Scores are computed as
        the SQL of the exact route computes them (the same float operations, phrases summed in
        query order), so ties stay ties.
        """
        ordinals = sorted({o for _, o, _ in lists} | {int(o) for o in extra[1]})
        column_of = {o: at for at, o in enumerate(ordinals)}
        weights = np.array([idfs[o] for o in ordinals])
        list_column = np.array([column_of[o] for _, o, _ in lists], dtype=np.int64)

        def scores(frequencies: np.ndarray, lengths: np.ndarray) -> np.ndarray:
            """BM25 of memories (rows) from their f per phrase (columns) and D, as _bm25_inputs' SQL."""
            total = np.zeros(len(lengths))
            norm = K1 * ((1 - B) + B * lengths / average)
            for at in range(len(ordinals)):
                f = frequencies[:, at]
                total = total + weights[at] * ((f * (K1 + 1.0)) / (f + norm))
            return total

        def contending(chosen: np.ndarray, known: np.ndarray, unread: np.ndarray, lengths: np.ndarray) -> np.ndarray:
            """Those of `chosen` whose upper bound (their known f per phrase, plus what their lists'
            unread parts may add) reaches the k-th best lower bound (the known f alone) among them."""
            if len(chosen) < limit:
                return chosen
            more = np.zeros((len(chosen), len(ordinals)))
            for i, column in enumerate(list_column):
                more[:, column] += unread[chosen, i]
            lower = scores(known[chosen], lengths[chosen])
            upper = scores(known[chosen] + more, lengths[chosen])
            floor = float(np.partition(lower, len(lower) - limit)[len(lower) - limit])
            return chosen[upper >= floor * (1 - 1e-9) - 1e-12]

        def term(f: float, length: float) -> float:  # one phrase's BM25 term without its idf
            return f * (K1 + 1.0) / (f + K1 * ((1 - B) + B * length / average)) if f > 0 else 0.0

        (shortest,) = self._db.execute("SELECT min(fts_length) FROM memories WHERE fts_length > 0").fetchone()  # type: ignore[misc]
        shortest = int(shortest or 1)
        scoped = "" if where == "true" else f"JOIN memories m ON m.id = p.memory_id AND {where}"
        # Each round reads only the next part of each open list (OFFSET: the snapshot is fixed).
        heads_sql = f"""
            SELECT coalesce(array_agg(h.i), '{{}}'), coalesce(array_agg(h.memory_id), '{{}}'),
                coalesce(array_agg(h.tf), '{{}}'), coalesce(array_agg(h.doc_length), '{{}}')
            FROM (SELECT q.list, p.memory_id, p.tf, p.doc_length
                FROM unnest(%s::int[], %s::text[], %s::int[], %s::int[], %s::int[]) AS q(list, term, col, read, depth)
                CROSS JOIN LATERAL (SELECT p.memory_id, p.tf, p.doc_length FROM postings p {scoped}
                    WHERE p.term = q.term AND p.col = q.col ORDER BY p.tf DESC, p.doc_length, p.memory_id
                    OFFSET q.read LIMIT q.depth - q.read) p) h(i, memory_id, tf, doc_length)
        """
        # An index scan over the ids (one descent each) costs a third of a lateral probe per id.
        missing_sql = """
            SELECT coalesce(array_agg(memory_id), '{}'), coalesce(array_agg(tf), '{}') FROM postings
            WHERE term = %s AND col = %s AND memory_id = ANY(%s::bigint[])
        """
        # The phrases of several tokens: every memory holding one is known already, with f and D.
        extra_ids = np.asarray(extra[0], dtype=np.int64)
        extra_keep = np.ones(len(extra_ids), dtype=bool)
        if len(extra_ids) and where != "true":
            sql = f"SELECT coalesce(array_agg(m.id), '{{}}') FROM memories m WHERE m.id = ANY(%s) AND {where}"
            (kept,) = self._db.execute(sql, [sorted(set(extra_ids.tolist())), *scope_params]).fetchone()  # type: ignore[misc]
            extra_keep = np.isin(extra_ids, np.asarray(kept, dtype=np.int64))
        extra_ids = extra_ids[extra_keep]
        extra_columns = np.array([column_of[int(o)] for o in extra[1]], dtype=np.int64)[extra_keep]
        extra_f = np.asarray(extra[2], dtype=np.float64)[extra_keep]
        extra_lengths = np.asarray(extra[3], dtype=np.int64)[extra_keep]
        terms, columns = [t for t, _, _ in lists], [c for _, _, c in lists]
        depth = [min(POSTING_BUDGET // max(1, len(lists)), max(IMPACT_FIRST_HEAD, 4 * limit))] * len(lists)
        read = [0] * len(lists)  # how far each list has been read (only open lists grow)
        end_tf: dict[int, int] = {}
        end_length: dict[int, int] = {}
        end_id: dict[int, int] = {}
        at_list, ids, tfs, lengths = (np.zeros(0, dtype=np.int64) for _ in range(4))
        while True:
            wanted = [i for i in range(len(lists)) if depth[i] > read[i]]
            reading = [wanted, *([values[i] for i in wanted] for values in (terms, columns, read, depth))]
            batch = self._arrays(heads_sql, [*reading, *scope_params])
            at_list, ids, tfs, lengths = (
                np.concatenate(pair) for pair in zip((at_list, ids, tfs, lengths), batch, strict=True)
            )
            counts = np.bincount(at_list, minlength=len(lists))
            read = list(depth)
            open_lists = [i for i in range(len(lists)) if counts[i] >= depth[i]]  # the others were read to their end
            for i in open_lists:
                if i in wanted:  # its head's end, last in index order: least tf, then longest, then largest id
                    part = np.flatnonzero(batch[0] == i)
                    part = part[batch[2][part] == batch[2][part].min()]
                    part = part[batch[3][part] == batch[3][part].max()]
                    end_tf[i], end_length[i], end_id[i] = (int(batch[n][part].max()) for n in (2, 3, 1))
            # What a memory seen in no head can score, phrase by phrase.
            rest: dict[int, float] = {}
            tight: dict[int, int] = {}  # phrase → the id an unseen memory scoring its bound exceeds
            for ordinal in ordinals:
                heads = [i for i in open_lists if lists[i][1] == ordinal]
                if len(heads) == 1:
                    (i,) = heads
                    at_end, below = term(end_tf[i], end_length[i]), term(end_tf[i] - 1, shortest)
                    rest[ordinal] = idfs[ordinal] * max(at_end, below)
                    if below < at_end * (1 - 1e-9):
                        tight[ordinal] = end_id[i]
                elif heads:
                    rest[ordinal] = idfs[ordinal] * term(sum(end_tf[i] for i in heads), shortest)
            unseen_bound = sum(rest.values())
            # Candidates with what they hold seen, and the most their open lists' unread parts add.
            candidates, where_row = np.unique(np.concatenate([ids, extra_ids]), return_inverse=True)
            seen_rows, extra_rows = where_row[: len(ids)], where_row[len(ids) :]
            cells = seen_rows * len(ordinals) + list_column[at_list]  # (candidate, phrase), flattened
            known = np.bincount(cells, weights=tfs, minlength=len(candidates) * len(ordinals))
            known = known.reshape(len(candidates), len(ordinals))
            known[extra_rows, extra_columns] = extra_f
            memory_lengths = np.zeros(len(candidates), dtype=np.int64)
            memory_lengths[seen_rows] = lengths
            memory_lengths[extra_rows] = extra_lengths
            seen = np.zeros((len(candidates), len(lists)), dtype=bool)
            seen[seen_rows, at_list] = True
            # What each candidate's unread part of an open list may add (none once looked up).
            unread = np.zeros((len(candidates), len(lists)), dtype=np.int64)
            for i in open_lists:
                after_end = (memory_lengths > end_length[i]) | (
                    (memory_lengths == end_length[i]) & (candidates > end_id[i])
                )
                unread[:, i] = np.where(seen[:, i], 0, np.where(after_end, end_tf[i], end_tf[i] - 1))
            significant = [i for i in open_lists if rest.get(lists[i][1], 0.0) >= 1e-3 * unseen_bound] or open_lists
            grown = [4 * depth[i] if i in significant else depth[i] for i in range(len(lists))]
            can_grow = sum(grown[i] if i in open_lists else int(counts[i]) for i in range(len(lists))) <= POSTING_BUDGET

            chosen = contending(np.arange(len(candidates)), known, unread, memory_lengths)
            lookups = int(np.count_nonzero(unread[chosen]))
            if can_grow and LOOKUP_COST * lookups > sum(grown[i] for i in open_lists):
                depth = grown  # reading further costs less than looking the candidates up
                continue
            unproven = not can_grow and LOOKUP_COST * lookups > POSTING_BUDGET - int(counts.sum())
            if unproven:  # proving the top k would overrun the budget: the best seen, scored exactly
                seen_score = scores(known[chosen], memory_lengths[chosen])
                chosen = chosen[np.lexsort((candidates[chosen], -seen_score))[:limit]]
            # Look up the chosen candidates' missing postings one open list at a time, the
            # weightiest first, keeping only those whose upper bound still reaches the k-th lower.
            for i in sorted(open_lists, key=lambda i: -rest.get(lists[i][1], 0.0)):
                rows = chosen[unread[chosen, i] > 0]
                if len(rows):
                    lookup = [terms[i], columns[i], _int_array(candidates[rows])]
                    found_ids, found_tf = self._arrays(missing_sql, lookup)
                    known[np.searchsorted(candidates, found_ids), list_column[i]] += found_tf
                    unread[rows, i] = 0
                chosen = contending(chosen, known, unread, memory_lengths)
            final = scores(known[chosen], memory_lengths[chosen])
            ranked = np.lexsort((candidates[chosen], -final))[:limit]
            top = [(int(candidates[chosen][r]), float(final[r])) for r in ranked]
            if not open_lists:
                return LexicalHits(top, "exact")
            if unproven:
                return LexicalHits(top, "bounded")
            if len(top) == limit:
                kth_id, kth_score = top[-1]
                if kth_score > unseen_bound * (1 + 1e-9) + 1e-12:
                    return LexicalHits(top, "exact")
                if (
                    abs(kth_score - unseen_bound) <= unseen_bound * 1e-9 + 1e-12
                    and set(tight) == set(rest)
                    and kth_id <= max(tight.values())
                ):
                    return LexicalHits(top, "exact")
            if not can_grow:
                return LexicalHits(top, "bounded")
            depth = grown

    def _arrays(self, sql: str, params: builtins.list[Any]) -> builtins.list[np.ndarray]:
        """The one row of a query of numeric arrays (see _NumpyArrayLoader), as numpy arrays."""
        with self._db.cursor(binary=True) as cursor:
            for oid in _NUMPY_ARRAYS:
                cursor.adapters.register_loader(oid, _NumpyArrayLoader)
            return list(cursor.execute(sql, params).fetchone())  # type: ignore[arg-type]

    def _bm25_rows(self, sql: str, params: builtins.list[Any]) -> LexicalHits:
        return LexicalHits((int(memory_id), float(score)) for memory_id, score in self._db.execute(sql, params))  # type: ignore[arg-type]

    @staticmethod
    def _bm25_inputs(average_length: float) -> tuple[str, str]:
        """The common table expressions of the BM25 queries, and one phrase's term of bm25():
        idf·f·(k1+1)/(f + k1·(1 − b + b·D/avgdl)), from a hits row `h` and its weight `w`."""
        ctes = """
            q(term, ord, col) AS (SELECT * FROM unnest(%s::text[], %s::int[], %s::int[])),
            extra(memory_id, ord, f, dl) AS (SELECT * FROM unnest(%s::bigint[], %s::int[], %s::float8[], %s::int[])),
            w(ord, idf) AS (SELECT ordinality::int - 1, idf FROM unnest(%s::float8[]) WITH ORDINALITY AS t(idf))
        """
        # Literals from repr() read back as the same float8.
        term = (
            f"w.idf * ((h.f * {K1 + 1.0!r}::float8) / (h.f + {K1!r}::float8 * ({1 - B!r}::float8 + {B!r}::float8 "
            f"* h.dl / {average_length!r}::float8)))"
        )
        return ctes, term

    def _bm25_all_sql(self, where: str, average_length: float) -> str:
        """Every memory holding a phrase, scored in full (phrases summed in query order, as FTS5)."""
        ctes, term = self._bm25_inputs(average_length)
        return f"""
            WITH {ctes},
            {self._bm25_hits_sql(essential_only=False)}
            SELECT h.memory_id, sum({term} ORDER BY h.ord) AS score
            FROM hits h JOIN w ON w.ord = h.ord {_scoped_hits(where)}
            GROUP BY h.memory_id ORDER BY score DESC, h.memory_id LIMIT %s
        """

    @staticmethod
    def _bm25_hits_sql(*, essential_only: bool) -> str:
        """The `hits` table: each memory's frequency and length for each query phrase it holds,
        from the postings and `extra`; with `essential_only`, of the phrases whose ordinals the
        next two parameters list."""
        postings_filter = "WHERE q.ord = ANY(%s::int[])" if essential_only else ""
        extra_filter = "WHERE ord = ANY(%s::int[])" if essential_only else ""
        return f"""hits AS (
                SELECT p.memory_id, q.ord, sum(p.tf)::float8 AS f, max(p.doc_length) AS dl
                FROM q JOIN postings p ON p.term = q.term AND p.col = q.col {postings_filter}
                GROUP BY p.memory_id, q.ord
                UNION ALL SELECT * FROM extra {extra_filter}
            )"""

    def _bm25_contenders_sql(self, where: str, average_length: float) -> str:
        """The memories in scope holding an essential phrase whose partial score (on those phrases
        alone) is within the other phrases' bound of the k-th best (parameters after the common
        ones: essential ordinals twice, scope, k − 1, the bound), as one array."""
        ctes, term = self._bm25_inputs(average_length)
        return f"""
            WITH {ctes},
            {self._bm25_hits_sql(essential_only=True)},
            partial AS MATERIALIZED (
                SELECT h.memory_id, sum({term}) AS score FROM hits h JOIN w ON w.ord = h.ord {_scoped_hits(where)}
                GROUP BY h.memory_id
            )
            SELECT array_agg(memory_id) FROM partial WHERE score >= coalesce(
                (SELECT score FROM partial ORDER BY score DESC LIMIT 1 OFFSET %s), '-infinity') - %s
        """

    def _bm25_scored_sql(self, average_length: float) -> str:
        """The given memories (parameter after the common ones) scored in full, best first; their
        postings read by key (OFFSET 0 keeps the look-ups from becoming scans of whole lists)."""
        ctes, term = self._bm25_inputs(average_length)
        return f"""
            WITH {ctes},
            contenders(memory_id) AS (SELECT unnest(%s::bigint[])),
            scored AS (
                SELECT p.memory_id, q.ord, sum(p.tf)::float8 AS f, max(p.doc_length) AS dl
                FROM contenders c CROSS JOIN q JOIN LATERAL (SELECT p.memory_id, p.tf, p.doc_length FROM postings p
                    WHERE p.term = q.term AND p.col = q.col AND p.memory_id = c.memory_id OFFSET 0) p ON true
                GROUP BY p.memory_id, q.ord
                UNION ALL SELECT e.* FROM extra e JOIN contenders c ON c.memory_id = e.memory_id
            )
            SELECT h.memory_id, sum({term} ORDER BY h.ord) AS score
            FROM scored h JOIN w ON w.ord = h.ord
            GROUP BY h.memory_id ORDER BY score DESC, h.memory_id LIMIT %s
        """

    def document_frequency(self, word: str, scope: Scope, at_most: int) -> int:
        """How many memories in scope hold `word` in their text or tags, counting no further than `at_most`."""
        phrase = _tokenizer.phrase(word)
        if not phrase:
            return 0
        columns = self._columns(None)
        where, params = _where(scope)
        if len(phrase) == 1:
            sql = (
                "SELECT count(*) FROM (SELECT DISTINCT p.memory_id FROM postings p "
                "JOIN memories m ON m.id = p.memory_id "
                f"WHERE p.term = %s AND p.col = ANY(%s) AND {where} LIMIT %s) s"
            )
            return int(self._db.execute(sql, [phrase[0], columns, *params, at_most]).fetchone()[0])  # type: ignore[index]
        ids = list(self._phrase_hits(phrase, columns))
        sql = f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE m.id = ANY(%s) AND {where} LIMIT %s) s"
        return int(self._db.execute(sql, [ids, *params, at_most]).fetchone()[0])  # type: ignore[index]

    # -- vectors ----------------------------------------------------------------------------

    def vector_search(self, vector: np.ndarray, scope: Scope, limit: int | None, view: str | None = None) -> VectorHits:
        """The memories in scope nearest to `vector` by cosine, in SQL: exact below
        EXACT_SEARCH_BELOW stored vectors (or for `limit=None`), else through the HNSW index with
        an iterative scan so filters keep recall. Scores are float32 dot products, as in SQLite."""
        if view is not None and view not in VECTOR_VIEWS:
            raise ValueError(f"no vector view {view!r}")
        query = _f32(vector)
        if limit is not None and limit <= 0:
            return VectorHits()
        key = (query.tobytes(), scope, limit)
        if view is None:
            (snapshot,) = self._db.execute("SELECT pg_current_snapshot()::text").fetchone()  # type: ignore[misc]
        elif view in OWN_TEXT_VIEWS:
            # A view no memory has a vector of is searched by the memories' own vectors: the
            # answer of the plain search just made, if nothing was written since (the same
            # snapshot: no transaction committed or began writing in between).
            snapshot, viewed = self._db.execute(
                "SELECT pg_current_snapshot()::text, EXISTS (SELECT 1 FROM views WHERE view = %s "
                "AND embedding IS NOT NULL)",
                (view,),
            ).fetchone()  # type: ignore[misc]
            last = getattr(self._local, "vector_memo", None)
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
            self._local.vector_memo = (key, snapshot, found)
        return VectorHits(found, engine)

    def _best_chunks(self, query: np.ndarray, scope: Scope, limit: int | None) -> Hits:
        """The long notes in scope by their best chunk vector (views chunk_2, …), nearest first."""
        where, params = _where(scope)
        rows = self._db.execute(
            "SELECT memory_id, embedding FROM (SELECT DISTINCT ON (v.memory_id) v.memory_id, v.embedding, "
            "v.embedding <=> %s AS distance FROM views v JOIN memories m ON m.id = v.memory_id "
            f"WHERE v.view LIKE {_CHUNK_VIEWS_SQL} AND v.embedding IS NOT NULL AND {where} "
            "ORDER BY v.memory_id, distance) best ORDER BY distance, memory_id LIMIT %s",
            [query, *params, None if limit is None else limit + RESCORE_MARGIN],
            binary=True,
        ).fetchall()
        return [(int(memory_id), float(_f32(embedding) @ query)) for memory_id, embedding in rows]

    def _through_index(self, limit: int | None, view: str | None, where: str, params: builtins.list[Any]) -> int | None:
        """The number of stored vectors (which sets the index search's width) when a vector search
        goes through the HNSW indexes; None when it is exact."""
        if limit is None or self._search_model() is None:
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
        where, params = _where(scope)
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
        model = self._search_model()
        stored = self._through_index(limit, view, where, params)
        base = (
            f"SELECT v.memory_id, v.embedding FROM {source} v JOIN memories m ON m.id = v.memory_id "
            f"WHERE v.embedding IS NOT NULL AND {view_clause} AND {exclusion} AND {where}"
        )
        args: builtins.list[Any] = [*view_params, *exclusion_params, *params]
        if limit is None:
            rows = self._db.execute(base, args, binary=True).fetchall()
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
            rows = self._db.execute(
                f"{base} ORDER BY v.embedding <=> %s, v.memory_id LIMIT %s",
                [*args, query, limit + RESCORE_MARGIN],
                binary=True,
            ).fetchall()
        engine = "index" if stored is not None else "exact"
        if not rows:
            return [], engine
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        scores = np.stack([_f32(row[1]) for row in rows]) @ query
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
        (count,) = self._db.execute(
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
        if getattr(self._local, "hnsw_settings", None) != settings:  # session settings: set once per connection
            self._db.execute(f"SET hnsw.iterative_scan = {settings[0]}")
            self._db.execute(f"SET hnsw.ef_search = {settings[1]}")
            self._local.hnsw_settings = settings
        return self._db.execute(
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
        where, params = _where(scope)
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
        rows = self._db.execute(sql, [_f32(vector), now, *params, limit])
        return [(int(memory_id), float(score)) for memory_id, score in rows]

    def _hnsw_built_wide(self) -> bool:
        """Whether the memories' HNSW index was built with HNSW_EF_CONSTRUCTION or more (asked
        once per connection once the index exists: a rebuilt index is seen by new connections)."""
        built: bool | None = getattr(self._local, "hnsw_built_wide", None)
        if built is None:
            exists, value = self._db.execute(
                "SELECT to_regclass('vectors_hnsw') IS NOT NULL, (SELECT option_value FROM pg_class c, "
                "pg_options_to_table(c.reloptions) WHERE c.oid = to_regclass('vectors_hnsw') "
                "AND option_name = 'ef_construction')"
            ).fetchone()  # type: ignore[misc]
            built = value is not None and int(value) >= HNSW_EF_CONSTRUCTION
            if exists:
                self._local.hnsw_built_wide = built
        return built

    def _approximate_count(self, table: str, view: str | None) -> int:
        """The planner's row estimate of the table (cheap; exactness does not matter here)."""
        row = self._db.execute(
            "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)", (table,)
        ).fetchone()
        estimate = int(row[0]) if row and row[0] is not None else -1
        if estimate < 0:  # never analysed
            estimate = int(self._db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]
        return estimate

    def cosines(self, vector: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
        """Each memory's cosine as the vector leg scores it: a long note's is its best chunk's."""
        query = _f32(vector)
        best = {memory_id: float(row @ query) for memory_id, row in self.vectors(ids).items()}
        for memory_id, embedding in self._db.execute(
            f"SELECT memory_id, embedding FROM views WHERE view LIKE {_CHUNK_VIEWS_SQL} AND memory_id = ANY(%s)",
            (list(best),),
            binary=True,
        ):
            best[memory_id] = max(best[memory_id], float(_f32(embedding) @ query))
        return best

    def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        rows = self._db.execute(
            "SELECT memory_id, embedding FROM vectors WHERE memory_id = ANY(%s)", ([int(i) for i in ids],), binary=True
        )
        return {int(memory_id): _f32(embedding) for memory_id, embedding in rows}

    def all_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        rows = self._db.execute("SELECT memory_id, embedding FROM vectors ORDER BY memory_id", binary=True).fetchall()
        model = self.embedding_model()
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        if not rows:
            return ids, np.zeros((0, model.dim if model else 0), np.float32)
        return ids, np.stack([_f32(row[1]) for row in rows])

    def nearest(self, vectors: np.ndarray, exclude: Collection[int] = ()) -> builtins.list[tuple[int, float] | None]:
        found: builtins.list[tuple[int, float] | None] = []
        for vector in vectors:
            hits, _ = self._nearest_sql(_f32(vector), EVERYTHING, 1, None, exclude)
            found.append(hits[0] if hits else None)
        return found

    def views_with_vectors(self) -> builtins.list[tuple[int, str, str]]:
        """(memory id, view, text) of every stored vector view, for reindex."""
        return [
            tuple(row) for row in self._db.execute("SELECT memory_id, view, text FROM views ORDER BY memory_id, view")
        ]  # type: ignore[misc]

    # -- neighbours and time ------------------------------------------------------------------

    def session_turns(self, conversation: str | None, session: str) -> builtins.list[Memory]:
        rows = self._db.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE kind = 'turn' AND session = %s "
            "AND conversation IS NOT DISTINCT FROM %s ORDER BY position, id",
            (session, conversation),
        )
        return [_row_to_memory(row) for row in rows]

    def around(self, memory: Memory, before: int, after: int) -> builtins.list[Memory]:
        if memory.kind == "session" and memory.session is not None:
            return [memory, *self.session_turns(memory.conversation, memory.session)]
        if memory.kind == "turn" and memory.session is not None:
            turns = self.session_turns(memory.conversation, memory.session)
            at = next(i for i, turn in enumerate(turns) if turn.id == memory.id)
            return turns[max(0, at - before) : at + after + 1]
        same_session = "AND session = %s" if memory.session is not None else ""
        params: builtins.list[Any] = [memory.session] if memory.session is not None else []
        stamp = (memory.created_at, memory.id)
        older = self._db.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE (created_at, id) < (%s, %s) AND kind != 'session' "
            f"{same_session} ORDER BY created_at DESC, id DESC LIMIT %s",
            (*stamp, *params, before),
        ).fetchall()
        newer = self._db.execute(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE (created_at, id) > (%s, %s) AND kind != 'session' "
            f"{same_session} ORDER BY created_at, id LIMIT %s",
            (*stamp, *params, after),
        ).fetchall()
        return [_row_to_memory(row) for row in reversed(older)] + [memory] + [_row_to_memory(row) for row in newer]

    def health(self) -> StoreHealth:
        db = self._db
        db.execute("SELECT 1").fetchone()  # reachable: the connection answers
        kinds = {
            kind: int(n) for kind, n in db.execute("SELECT kind, count(*) FROM memories GROUP BY kind ORDER BY kind")
        }
        (without_vector,) = db.execute(
            "SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.memory_id = m.id)"
        ).fetchone()  # type: ignore[misc]
        (fts_rows,) = db.execute("SELECT count(DISTINCT memory_id) FROM postings").fetchone()  # type: ignore[misc]
        (view_vectors,) = db.execute("SELECT count(*) FROM views WHERE embedding IS NOT NULL").fetchone()  # type: ignore[misc]
        hnsw = db.execute(
            "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'vectors_hnsw'"
        ).fetchone()
        return StoreHealth(
            backend="postgresql",
            schema_version=self.schema_version,
            latest_schema_version=SCHEMA_VERSION,
            model=self.embedding_model(),
            memories_by_kind=kinds,
            vectors=self.vector_count(),
            without_vector=int(without_vector),
            fts_rows=int(fts_rows),
            view_vectors=int(view_vectors),
            integrity="ok",
            ann_index=hnsw is not None,
            wal_bytes=None,
            size_bytes=int(self.stats()["size_bytes"]),
        )

    def stats(self) -> dict[str, Any]:
        db = self._db
        total, oldest, newest = db.execute("SELECT count(*), min(created_at), max(created_at) FROM memories").fetchone()  # type: ignore[misc]
        model = self.embedding_model()

        def counts(column: str) -> dict[str, int]:
            rows = db.execute(
                f"SELECT coalesce({column}, ''), count(*) FROM memories GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 50"
            )
            return {name: n for name, n in rows}

        (size,) = db.execute(
            "SELECT sum(pg_total_relation_size(to_regclass(t))) FROM unnest(%s::text[]) t",
            (["memories", "postings", "term_docs", "fts_totals", "vectors", "views", "meta", "memsearch_schema"],),
        ).fetchone()  # type: ignore[misc]
        return {
            "path": self.location,
            "memories": total,
            "vectors": self.vector_count(),
            "embedding_model": model.name if model else None,
            "embedding_dim": model.dim if model else None,
            "schema_version": self.schema_version,
            "oldest": _utc(oldest).isoformat(timespec="microseconds") if oldest else None,
            "newest": _utc(newest).isoformat(timespec="microseconds") if newest else None,
            "projects": counts("project"),
            "namespaces": counts("namespace"),
            "size_bytes": int(size or 0),
        }
