"""The PostgreSQL store: connections, writes (each one transaction, retried) and the reads; its
export and restore (postgres.copy), schema, lexical index (postgres.lexical, a part it holds), BM25 engine and
vector search are modules of their own.

Ranking parity with SQLite is the point: the lexical leg is FTS5's BM25 computed in SQL from
postings kept in each memory's own transaction (tokens from SQLite's own tokenizer, see
postgres_text), and vector scores are recomputed in float32 from the stored vectors, so a store
answers like a SQLite file of the same memories. Vector search runs in SQL (`<=>`): exactly below
EXACT_SEARCH_BELOW vectors, through the HNSW index with iterative scans above it.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from memsearch.errors import MemoryNotFoundError, StoreNotFoundError, StoreUnavailableError
from memsearch.models import (
    FIELDS_BY_NAME,
    LEXICAL_VIEWS,
    VECTOR_VIEWS,
    EmbeddingModelInfo,
    Memory,
    NewMemory,
    content_hash,
)
from memsearch.paths import read_only_requested, shown_location
from memsearch.store.base import (
    EVERYTHING,
    INDEX_STATE_KEY,
    FilledVectors,
    Rewrite,
    Scope,
)
from memsearch.store.dialects import POSTGRES
from memsearch.store.fts import FTS_COLUMNS, FTS_TOKENIZER, GRAM_COLUMNS, fts_row
from memsearch.store.postgres.copy import PostgresCopy
from memsearch.store.postgres.lexical import PgLexicalIndex
from memsearch.store.postgres.schema import (
    MIGRATION_LOCK,
    SCHEMA_VERSION,
    hnsw_index_sql,
    migrate,
    schema_version,
)
from memsearch.store.postgres.vectors import PgVectorSearch
from memsearch.store.sql import MEMORY_COLUMNS, NEW_COLUMNS, NewBatch

if TYPE_CHECKING:
    from psycopg import Connection

T = TypeVar("T")
log = logging.getLogger(__name__)
# Serialisation failures, deadlocks and key races are retried this many times.
WRITE_ATTEMPTS = 8
# Recording access after a search waits no longer than this for rows another writer holds: it is
# best effort, and a search must answer while an import holds the store.
ACCESS_LOCK_TIMEOUT = "200ms"


class PostgresStore(PostgresCopy):
    """A memsearch store in a PostgreSQL database with pgvector. Open with `PostgresStore.open`.

    Each thread gets its own connection, so one store object serves a threaded server. Reads run
    in autocommit; every write is one transaction, retried on serialisation failures and deadlocks.
    """

    parallel_reads = True
    dialect = POSTGRES
    latest_schema_version = SCHEMA_VERSION
    insert_columns = (*NEW_COLUMNS, "fts_length", "lexical_views")  # the memory's token count, its own views

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
        self._compose()
        self.own_vectors = PgVectorSearch(self)  # the vector reads of the OwnVectors part
        self.vector_search, self.cosines, self.vectors = (
            self.own_vectors.vector_search,
            self.own_vectors.cosines,
            self.own_vectors.vectors,
        )
        self.all_vectors, self.nearest = self.own_vectors.all_vectors, self.own_vectors.nearest
        self.seed_composite_search = self.own_vectors.seed_composite_search
        self.lexical = PgLexicalIndex(lambda: self._db)  # the LexicalIndex part
        self.lexical_search, self.document_frequency = self.lexical.lexical_search, self.lexical.document_frequency
        self.word_documents = self.lexical.word_documents

    # -- connections ----------------------------------------------------------------------

    def prepare_search_indexes(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Nothing to make: pgvector's HNSW indexes are kept by every write."""
        return 0

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
            migrate(bootstrap, store.location, create=create)
            store._local.connection = bootstrap
            register_vector(bootstrap)
        except BaseException:
            store.close()
            raise
        return store

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
            finally:
                self._count_write()
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction that the writes made inside it join (each as a savepoint of it)."""
        try:
            with self._db.transaction():
                yield
            self._count_write()
        except pg_errors.ReadOnlySqlTransaction:
            raise StoreUnavailableError(
                f"{self.location} is read-only here (a read-only server, role or database, or "
                "MEMSEARCH_READ_ONLY is set); nothing was changed"
            ) from None

    @property
    def schema_version(self) -> int:
        return schema_version(self._db) or 0

    def _in_transaction(self) -> bool:
        return self._db.info.transaction_status != TransactionStatus.IDLE

    def save_index_state(self, document: str) -> None:
        self._write(lambda db: self._set_meta(db, INDEX_STATE_KEY, document))

    def _set_meta(self, db: Connection[Any], key: str, value: str) -> None:
        if self._meta(key) == value:  # the usual case: no row lock for every writer to queue on
            return
        db.execute(
            "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value "
            "WHERE meta.value IS DISTINCT FROM excluded.value",
            (key, value),
        )

    def _search_model(self) -> EmbeddingModelInfo | None:
        """The model, read once per store object for searches (its dimension types the index
        scan); writes always read it afresh through check_model."""
        if self._cached_model is None:
            self._cached_model = self.embedding_model()
        return self._cached_model

    def _record_model(self, db: Connection[Any], model: EmbeddingModelInfo) -> None:
        """Record the model and make the HNSW indexes for its dimension (once per dimension)."""
        self._write_model_meta(db, model)
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
        db.execute(hnsw_index_sql("vectors_hnsw", "vectors", dim))
        for view in VECTOR_VIEWS:
            db.execute(hnsw_index_sql(f"views_hnsw_{view}", "views", dim, f"view = '{view}'"))
        self._indexed_dim = dim

    # -- writes: what an insert does in PostgreSQL (SQLStore.insert) ------------------------

    def _prepare(self, memories: Sequence[NewMemory]) -> Sequence[Any]:
        return FTS_TOKENIZER.rows([self._fts_texts(memory) for memory in memories])

    def _own_values(self, batch: NewBatch, index: int) -> Sequence[Any]:
        views = batch.memories[index].views
        lexical = {view: views[view] for view in LEXICAL_VIEWS if view in views}
        return batch.prepared[index].length, json.dumps(lexical, ensure_ascii=False)

    def _insert_row(self, db: Connection[Any], columns: Sequence[str], values: Sequence[Any]) -> int:
        sql = f"INSERT INTO memories ({', '.join(columns)}, last_accessed_at) VALUES ({POSTGRES.marks(len(values))})"
        row = db.execute(f"{sql} RETURNING id", values).fetchone()
        return int(row[0])  # type: ignore[index]

    def _unindex(self, db: Connection[Any], memory_id: int, batch: NewBatch, index: int) -> None:
        (old_length,) = db.execute("SELECT fts_length FROM memories WHERE id = %s FOR UPDATE", (memory_id,)).fetchone()  # type: ignore[misc]
        self._add_tokens(db, batch.prepared[index].length - old_length)  # fts_totals before term_docs, always
        db.execute("DELETE FROM postings WHERE memory_id = %s", (memory_id,))
        db.execute("DELETE FROM views WHERE memory_id = %s", (memory_id,))

    def _added(self, db: Connection[Any], batch: NewBatch, index: int) -> None:
        self._add_tokens(db, batch.prepared[index].length, memories=1)

    def _index_all(self, db: Connection[Any], ids: Sequence[int], batch: NewBatch) -> None:
        self._copy_postings(db, zip(ids, batch.prepared, strict=True))
        if batch.vectors is not None:
            vectors = batch.vectors
            self._copy_vectors(db, ((memory_id, vectors[i]) for i, memory_id in enumerate(ids)), upsert=True)
        view_rows = [
            (ids[index], view, batch.memories[index].views[view], vector)
            for index, views in sorted(batch.view_vectors.items())
            for view, vector in sorted(views.items())
        ]
        self._copy_views(db, view_rows)

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
            "SELECT text, kind, tags, lexical_views, fts_length FROM memories WHERE id = %s FOR UPDATE", (rewrite.id,)
        ).fetchone()
        rewrite.check_stored(row[0] if row else None)
        assert row is not None
        _, kind, tags, stored, old_length = row
        lexical = json.loads(stored)
        for view, value in rewrite.views.items():
            if view in LEXICAL_VIEWS:
                lexical.pop(view, None)
                if value is not None:
                    lexical[view] = value[0]
        tokens = FTS_TOKENIZER.rows([fts_row(rewrite.text, tags, kind, lexical)])[0]
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
        self.models.rewrite(db, rewrite)
        self._set_pending(db, [rewrite.id], waiting=False)

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
            busy = not isinstance(error, StoreUnavailableError)
            self._access_not_recorded("another writer holds its memories" if busy else str(error))

    def _clear_vectors(self, db: Connection[Any]) -> None:
        db.execute("LOCK TABLE vectors IN EXCLUSIVE MODE")
        self._indexed_dim = None  # the model's HNSW indexes are checked again
        db.execute("DELETE FROM vectors")

    def _fill(self, db: Connection[Any], filled: Sequence[FilledVectors]) -> None:
        self._copy_vectors(db, ((item.id, item.vector) for item in filled), upsert=True)
        for item in filled:
            if item.views:
                db.execute("DELETE FROM views WHERE memory_id = %s AND view = ANY(%s)", (item.id, list(item.views)))
        self._copy_views(
            db,
            [(item.id, view, text, vector) for item in filled for view, (text, vector) in sorted(item.views.items())],
        )

    def _add_vectors(self, db: Connection[Any], ids: Sequence[int], vectors: np.ndarray) -> None:
        self._copy_vectors(db, ((memory_id, vectors[row]) for row, memory_id in enumerate(ids)))

    def _retag(self, db: Connection[Any], memory: Memory, tags: Sequence[str]) -> None:
        """Rewrite the memory's tag postings: the tags column, and the grams column made from text and tags."""
        (length,) = db.execute("SELECT fts_length FROM memories WHERE id = %s FOR UPDATE", (memory.id,)).fetchone()  # type: ignore[misc]
        changed = [FTS_COLUMNS.index("tags"), FTS_COLUMNS.index(GRAM_COLUMNS[None])]

        def tag_columns(tags: Sequence[str]) -> tuple[str, ...]:
            row = fts_row(memory.text, tags, memory.kind, {})
            return tuple(text if i in changed else "" for i, text in enumerate(row))

        old = FTS_TOKENIZER.rows([tag_columns(memory.tags)])[0]
        new = FTS_TOKENIZER.rows([tag_columns(tags)])[0]
        delta = new.length - old.length
        self._add_tokens(db, delta)
        # the memory's other postings take its new length from the memories_length trigger
        db.execute("UPDATE memories SET fts_length = %s WHERE id = %s", (length + delta, memory.id))
        db.execute("DELETE FROM postings WHERE memory_id = %s AND col = ANY(%s)", (memory.id, changed))
        with db.cursor().copy("COPY postings (term, col, memory_id, positions, doc_length) FROM STDIN") as copy:
            for (column, term), offsets in new.positions.items():
                copy.write_row((term, column, memory.id, offsets, length + delta))

    # -- reads ----------------------------------------------------------------------------

    def get_many(self, ids: Sequence[int]) -> dict[int, Memory]:
        unique = list(dict.fromkeys(int(i) for i in ids))
        rows = self._db.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ANY(%s)", (unique,))
        return {row[0]: POSTGRES.row_to_memory(row) for row in rows}

    def fields_of(self, ids: Sequence[int], names: Sequence[str]) -> dict[int, tuple[Any, ...]]:
        """See SearchBackend.fields_of: one query of those columns, each decoded as get_many does."""
        reads = [POSTGRES.readers.get(FIELDS_BY_NAME[name].kind) for name in names]  # a name not a field: KeyError
        columns = ", ".join(["id", *names])
        unique = list(dict.fromkeys(int(i) for i in ids))
        rows = self._db.execute(f"SELECT {columns} FROM memories WHERE id = ANY(%s)", (unique,))
        return {row[0]: tuple(v if r is None else r(v) for v, r in zip(row[1:], reads, strict=True)) for row in rows}

    def iter_texts(self) -> Iterator[tuple[int, str]]:
        yield from self._db.execute("SELECT id, text FROM memories ORDER BY id").fetchall()

    def count(self, scope: Scope = EVERYTHING) -> int:
        where, params = POSTGRES.where(scope)
        return int(self._db.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone()[0])  # type: ignore[index]

    def roles(self, scope: Scope) -> builtins.list[str]:
        where, params = POSTGRES.where(scope)
        sql = f"SELECT DISTINCT m.role FROM memories m WHERE m.role IS NOT NULL AND {where} ORDER BY 1"
        return [row[0] for row in self._db.execute(sql, params)]

    # -- neighbours and time ------------------------------------------------------------------

    def _engine_health(self) -> dict[str, Any]:
        db = self._db
        db.execute("SELECT 1").fetchone()  # reachable: the connection answers
        (fts_rows,) = db.execute("SELECT count(DISTINCT memory_id) FROM postings").fetchone()  # type: ignore[misc]
        hnsw = db.execute(
            "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'vectors_hnsw'"
        ).fetchone()
        return {
            "fts_rows": int(fts_rows),
            "integrity": "ok",
            "ann_index": hnsw is not None,
            "wal_bytes": None,
            "size_bytes": self._size_bytes(),
        }

    def _size_bytes(self) -> int:
        (size,) = self._db.execute(
            "SELECT sum(pg_total_relation_size(to_regclass(t))) FROM unnest(%s::text[]) t",
            (["memories", "postings", "term_docs", "fts_totals", "vectors", "views", "meta", "memsearch_schema"],),
        ).fetchone()  # type: ignore[misc]
        return int(size or 0)
