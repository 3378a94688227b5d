"""The SQLite store: connections, transactions and writes; its reads, copy, schema, lexical and
vector parts are modules of their own (sqlite_*.py)."""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import memsearch.store.sqlite_access as access_file
from memsearch.errors import (
    MemoryNotFoundError,
    MemsearchError,
    StoreCorruptError,
    StoreNotFoundError,
    StoreUnavailableError,
)
from memsearch.models import (
    EmbeddingModelInfo,
    Memory,
    content_hash,
)
from memsearch.paths import make_private_dirs, read_only_requested
from memsearch.store.ann import AnnIndex, ann_threshold, index_library_available
from memsearch.store.base import (
    INDEX_STATE_KEY,
    FilledVectors,
    Rewrite,
    Scope,
    VectorHits,
)
from memsearch.store.dialects import SQLITE
from memsearch.store.fts import fts_row
from memsearch.store.lexical_cache import lexical_threshold
from memsearch.store.lexical_delta import ChangedRows
from memsearch.store.migrations import (
    SCHEMA_VERSION,
    fts_config,
    secure_delete_on,
)
from memsearch.store.sql import NewBatch, SQLStore
from memsearch.store.sql_search_state import META_STATE_SQL
from memsearch.store.sqlite_copy import SQLiteCopy
from memsearch.store.sqlite_driver import PROBLEM, SECURE_DELETE, sqlite3
from memsearch.store.sqlite_errors import (
    ACCESS_TIMEOUT_MS,
    BUSY_TIMEOUT_MS,
    disk_full,
    full_disk,
    os_reason,
    store_error,
)
from memsearch.store.sqlite_fts import Fts5Index
from memsearch.store.sqlite_lexical import ImpactLexical
from memsearch.store.sqlite_reads import SQLiteReads, fits_sqlite
from memsearch.store.sqlite_schema import SQLiteSchema
from memsearch.store.sqlite_transaction import Savepoint, Transaction
from memsearch.store.sqlite_vectors import CacheRecords, InProcessVectors
from memsearch.store.vectors import VectorIndex
from memsearch.timeutil import to_iso

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")
# The store's id names its vector cache files (with the generation): a file never serves another
# store; the cache key (a secret: the store is its owner's alone) keys the digests of those files.
_NEW_CACHE_IDENTITY = "INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', ?), ('cache_key', ?)"


def _new_cache_identity(db: sqlite3.Connection) -> None:
    import secrets  # by the store's first open: its start (OpenSSL's hashes) is not every open's

    db.execute(_NEW_CACHE_IDENTITY, (secrets.token_hex(8), secrets.token_hex(32)))


def _create_private_file(path: Path) -> bool:
    """Create the store file (and its folders) readable by the owner only; another process
    creating it at the same moment is fine. Whether this call created it."""
    make_private_dirs(path.parent)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


class SQLiteStore(ImpactLexical, InProcessVectors, SQLiteReads, SQLiteCopy, SQLiteSchema, SQLStore):
    """One memsearch store file. Open with `SQLiteStore.open`; close when done.

    Each thread gets its own connection (SQLite connections are not to be shared by threads that
    run at once), so one store object can serve a threaded server.
    """

    parallel_reads = False
    dialect = SQLITE
    memory_select = access_file.MEMORY_SELECT
    search_state_sql = META_STATE_SQL  # the pending count is kept a generation (SQLiteReads.pending_count)
    latest_schema_version = SCHEMA_VERSION

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.location = str(path)
        self.read_only = read_only
        self._local = threading.local()
        self._connections: builtins.list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._access_lock = threading.Lock()
        self._vector_cache: dict[str | None, tuple[int, VectorIndex, str]] = {}  # view → (generation, …, file name)
        self._ann_cache: dict[str, tuple[VectorIndex, AnnIndex]] = {}
        self._cache_records = CacheRecords(self)  # the vector cache files' digests (meta rows)
        self._cache_place: Path | bool | None = False  # where the cache files go; False: not looked yet
        self._roles_memo: dict[Scope, tuple[int, builtins.list[str]]] = {}  # scope → (generation, roles)
        self._pending_memo: tuple[int, int] | None = None  # (generation, memories waiting for vectors)
        self._vector_memo: tuple[tuple[Any, ...], VectorIndex, VectorHits] | None = None  # the last vector search
        # Scopes of at least this many memories are searched through the approximate index.
        self.ann_threshold = ann_threshold()
        # Stores of at least this many memories are searched by words through the impact index.
        self.lexical_threshold = lexical_threshold()
        self._impact: dict[str | None, tuple[int, ChangedRows | None]] = {}  # view → (generation, impact index)
        self._impact_lock = threading.Lock()
        self._write_refusal: MemsearchError | None = None  # set when only reading works (a full disk)
        self._access_skipped = False  # the note that access was not recorded is given once
        self._access_file_missing = False  # the access file could not be had: accesses are not recorded
        self._wal_holds_deleted_text = False  # a checkpoint is due after the write commits
        self._compose()
        self.lexical = Fts5Index(self, self._impact_search)  # the LexicalIndex part (a large store's: faster)
        self.lexical_search, self.document_frequency = self.lexical.lexical_search, self.lexical.document_frequency
        self.word_documents = self.lexical.word_documents
        if read_only:
            self._write_refusal = StoreUnavailableError(
                f"{path} is open read-only (it, or its folder, cannot be written, or MEMSEARCH_READ_ONLY is set); "
                "nothing was changed"
            )

    def close(self) -> None:
        self._close_impact()  # (a file being made in the background stops first)
        super().close()

    @property
    def _db(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._connect()
            self._local.connection = connection
        return connection

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:
            connection = self._read_only_open()
            access_file.attach(connection, self.path, writable=False)
            with self._lock:
                self._connections.append(connection)
            return connection
        try:
            connection = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as error:
            raise StoreCorruptError(f"cannot open {self.path}: {error}") from None
        try:
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.execute("PRAGMA foreign_keys = ON")
            connection.execute("PRAGMA secure_delete = ON")  # deleted rows and freed pages are zeroed
        except sqlite3.Error as error:
            connection.close()
            translated = store_error(self.path, error)
            connection = self._read_only_connection(translated)
        except BaseException:
            connection.close()
            raise
        if not access_file.attach(connection, self.path, writable=self._write_refusal is None):
            self._access_file_missing = self._write_refusal is None  # (a full disk: not written anyway)
        with self._lock:
            self._connections.append(connection)
        return connection

    def _read_only_open(self) -> sqlite3.Connection:
        """A connection that never writes: `mode=ro`, which still reads a WAL store (and sees other
        processes' commits) where SQLite may create the WAL index; where it may not (a read-only
        folder) and no WAL is pending, the file is the whole store and is read as immutable."""
        try:
            connection = sqlite3.connect(
                f"{self.path.as_uri()}?mode=ro", uri=True, isolation_level=None, check_same_thread=False
            )
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            connection.execute("PRAGMA user_version").fetchone()
            return connection
        except sqlite3.Error as error:
            connection.close()
            wal = Path(f"{self.path}-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise StoreUnavailableError(
                    f"cannot read {self.path} read-only: changes of another process are still in {wal.name} "
                    f"and its index cannot be made ({error}); open it once where it can be written"
                ) from None
        return sqlite3.connect(
            f"{self.path.as_uri()}?immutable=1", uri=True, isolation_level=None, check_same_thread=False
        )

    def _read_only_connection(self, refused: MemsearchError) -> sqlite3.Connection:
        """On a full disk SQLite cannot make the WAL index it reads through; when no WAL is pending
        the file itself is the whole store, and reading it as immutable still answers searches.
        Writes then fail with `refused`; otherwise `refused` is raised now."""
        wal = Path(f"{self.path}-wal")
        if not isinstance(refused, StoreUnavailableError) or (wal.exists() and wal.stat().st_size > 0):
            raise refused
        if "full" not in refused.problem:
            if not disk_full(self.path):
                raise refused
            refused = full_disk(self.path)
        connection = sqlite3.connect(
            f"{self.path.as_uri()}?immutable=1", uri=True, isolation_level=None, check_same_thread=False
        )
        self._write_refusal = refused
        return connection

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, *, create: bool = False) -> SQLiteStore:
        """Open the store at `path`, creating it when `create` is set, migrating it to the latest
        schema. A store that cannot be written (the file or its folder; or MEMSEARCH_READ_ONLY)
        opens read-only: searches answer, writes fail with StoreUnavailableError."""
        if PROBLEM is not None:  # MEMSEARCH_SQLITE names no driver there is
            raise StoreUnavailableError(PROBLEM)
        created = False
        try:
            exists = path.exists()
            if not exists:
                if not create:
                    raise StoreNotFoundError(f"no memsearch store at {path}")
                if read_only_requested():
                    raise StoreUnavailableError(f"cannot create a store at {path}: MEMSEARCH_READ_ONLY is set")
                created = _create_private_file(path)
        except OSError as error:
            raise StoreUnavailableError(f"cannot create a store at {path}: {os_reason(path, error)}") from None
        if path.is_dir():
            raise StoreCorruptError(f"{path} is a directory, not a memsearch store file; give the path of a store file")
        if not path.is_file():  # a device, a FIFO: SQLite would report a failing disk
            raise StoreCorruptError(
                f"{path} is not a regular file, so not a memsearch store; give the path of a store file"
            )
        read_only = read_only_requested() or not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))
        store = cls(path, read_only=read_only)
        try:
            store._migrate()
        except BaseException as error:
            store.close()
            if created:  # a store that could not be made leaves no file behind (a full disk, say)
                for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), *access_file.access_files(path)):
                    leftover.unlink(missing_ok=True)
            if isinstance(error, sqlite3.Error):
                raise store_error(path, error) from None
            raise
        return store

    # -- transactions and store facts -----------------------------------------------------

    def transaction(self, busy_timeout_ms: int | None = None) -> contextlib.AbstractContextManager[None]:
        """A write transaction; `busy_timeout_ms` waits less than BUSY_TIMEOUT_MS for another writer.
        Inside a `batch`, a savepoint of the batch's own: a write that fails there leaves nothing."""
        connection = self._db
        if self._write_refusal is not None:
            raise self._write_refusal
        if getattr(self._local, "batched", False):
            return Savepoint(connection)
        return self._counted(Transaction(connection, self.path, busy_timeout_ms))

    @contextlib.contextmanager
    def _counted(self, transaction: Transaction) -> Iterator[None]:
        """`transaction`, counted when it ends (see _writes_stamp)."""
        try:
            with transaction:
                yield
        finally:
            self.lexical.transaction_ended()
            self._count_write()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One write transaction that the writes made inside it join (the deleted text is
        forgotten once, at its end)."""
        if getattr(self._local, "batched", False):
            yield
            return
        with self.transaction():
            self._local.batched, self._local.forget = True, False
            try:
                yield
            finally:
                self._local.batched = False
            if self._local.forget:  # (outside `batched`, where it would wait for the batch's end again)
                self._forget_deleted_text()
        self._checkpoint_if_due()

    def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` in one write transaction that moves the generation on."""
        with self.transaction():
            result = work(self._db)
            self._bump_generation()
        self._checkpoint_if_due()
        return result

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def _in_transaction(self) -> bool:
        return self._db.in_transaction

    def _writes_stamp(self) -> object:
        return self._db.total_changes, super()._writes_stamp()  # a write outside transaction() too

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def _bump_generation(self) -> None:
        """Every write moves the generation on, so cached vector matrices (in memory and in the
        vector cache files, which also carry the store's id) know they are stale."""
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES ('generation', '1') "
            "ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )
        _new_cache_identity(self._db)

    def generation(self) -> int:
        return int(self._meta("generation") or 0)

    # -- writes: what an insert does in SQLite (SQLStore.insert) ---------------------------

    def _record_model(self, db: sqlite3.Connection, model: EmbeddingModelInfo) -> None:
        self._write_model_meta(db, model)

    def _insert_row(self, db: sqlite3.Connection, columns: Sequence[str], values: Sequence[Any]) -> int:
        sql = f"INSERT INTO memories ({', '.join(columns)}, last_accessed_at) VALUES ({SQLITE.marks(len(values))})"
        return int(db.execute(sql, values).lastrowid or 0)

    def _unindex(self, db: sqlite3.Connection, memory_id: int, batch: NewBatch, index: int) -> None:
        self.lexical.deleting(1)
        self.lexical.unindex(memory_id)
        access_file.restart_clock(db, memory_id)
        self._delete_views(memory_id)
        batch.replaced = True

    def _index_all(self, db: sqlite3.Connection, ids: Sequence[int], batch: NewBatch) -> None:
        if batch.replaced:  # the old text goes as a deleted memory's does
            self._forget_deleted_text()

    def _index(self, db: sqlite3.Connection, memory_id: int, batch: NewBatch, index: int) -> None:
        memory = batch.memories[index]
        self.lexical.index_text(memory_id, fts_row(memory.text, memory.tags, memory.kind, memory.views))
        if batch.vectors is not None:
            db.execute(
                "INSERT INTO vectors (memory_id, vector) VALUES (?, ?) "
                "ON CONFLICT (memory_id) DO UPDATE SET vector = excluded.vector",
                (memory_id, batch.vectors[index].astype("<f4").tobytes()),
            )
        for view, vector in sorted(batch.view_vectors.get(index, {}).items()):
            db.execute(
                "INSERT INTO views (memory_id, view, text, vector) VALUES (?, ?, ?, ?)",
                (memory_id, view, memory.views[view], vector.astype("<f4").tobytes()),
            )

    # -- writes ---------------------------------------------------------------------------

    def delete(self, ids: Sequence[int], rewrites: Sequence[Rewrite] = ()) -> None:
        """Delete all of the memories and apply the rewrites or, if any id is unknown, do nothing."""
        with self.transaction():
            self.lexical.deleting(len(ids))  # a large share: secure-delete off, one merge (sqlite_fts)
            for memory_id in ids:
                if not fits_sqlite(memory_id):
                    raise MemoryNotFoundError(f"no memory with id {memory_id}; nothing was deleted")
                self._delete_views(memory_id)
                if self._db.execute("DELETE FROM memories WHERE id = ?", (memory_id,)).rowcount == 0:
                    raise MemoryNotFoundError(f"no memory with id {memory_id}; nothing was deleted")
                self.lexical.unindex(memory_id)
            access_file.forget(self._db, ids)
            for rewrite in rewrites:
                self._rewrite(rewrite)
            if ids or rewrites:  # an edit forgets the old text too
                self._forget_deleted_text()
            self._bump_generation()
        self._checkpoint_if_due()

    def _forget_deleted_text(self) -> None:
        """After a delete or a rewrite, see that the deleted words leave the full-text index: a
        table with FTS5's secure-delete on (SQLite 3.42; migrations.fts_format) removed them in
        place already. Otherwise merge the index into one segment, which drops them (FTS5 keeps them
        in older segments until a merge reaches them): it rewrites the index (0.2-0.4 s at 10k
        memories, 2-3 s at 100k). Either way the WAL is emptied after the commit. In a `batch`,
        once at its end."""
        if getattr(self._local, "batched", False):
            self._local.forget = True
            return
        if not (SECURE_DELETE and secure_delete_on(fts_config(self._db))):
            self._db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
        self.lexical.deletes_merged()
        self._wal_holds_deleted_text = True

    def _checkpoint_if_due(self) -> None:
        """After a write that forgot deleted text, copy the WAL into the database file and empty it:
        its frames hold pages as they were before. Best effort: a reader in the middle of a read
        keeps the frames it needs."""
        if self._wal_holds_deleted_text and not getattr(self._local, "batched", False):
            self._wal_holds_deleted_text = False
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def save_index_state(self, document: str) -> None:
        with self.transaction():
            self._set_meta(INDEX_STATE_KEY, document)

    def _rewrite(self, rewrite: Rewrite) -> None:
        stored = self._db.execute("SELECT text FROM memories WHERE id = ?", (rewrite.id,)).fetchone()
        rewrite.check_stored(stored[0] if stored else None)
        self._db.execute(
            "UPDATE memories SET text = ?, content_hash = ?, metadata = ? WHERE id = ?",
            (rewrite.text, content_hash(rewrite.text), json.dumps(dict(rewrite.metadata), ensure_ascii=False),
             rewrite.id),
        )  # fmt: skip
        self.lexical.rewrite(rewrite.id, rewrite.text, None, {v: t[0] if t else None for v, t in rewrite.views.items()})
        for view, value in rewrite.views.items():
            self._db.execute("DELETE FROM views WHERE memory_id = ? AND view = ?", (rewrite.id, view))
            if value is not None and value[1] is not None:
                self._db.execute(
                    "INSERT INTO views (memory_id, view, text, vector) VALUES (?, ?, ?, ?)",
                    (rewrite.id, view, value[0], value[1].astype("<f4").tobytes()),
                )
        self._db.execute(
            "INSERT INTO vectors (memory_id, vector) VALUES (?, ?) "
            "ON CONFLICT (memory_id) DO UPDATE SET vector = excluded.vector",
            (rewrite.id, rewrite.vector.astype("<f4").tobytes()),
        )
        self.models.rewrite(self._db, rewrite)
        self._set_pending(self._db, [rewrite.id], waiting=False)

    def _delete_views(self, memory_id: int) -> None:
        self._db.execute("DELETE FROM views WHERE memory_id = ?", (memory_id,))

    def touch(self, ids: Sequence[int], now: datetime) -> None:
        """Record that a search returned these memories, in the access file (sqlite_access says
        why not the store); increments are atomic in SQL, so concurrent searches lose no update."""
        if not ids:
            return
        try:
            if self._write_refusal is not None:
                raise self._write_refusal
            identity = self._cache_identity()
            if identity is None or self._access_file_missing:
                raise StoreUnavailableError(f"{access_file.access_path(self.path)} cannot be written")
            # Threads of this process take turns here, so the short wait only ever gives way to
            # another process's recording, never to a sibling search.
            with self._access_lock:
                access_file.record(self._db, self.path, identity[0], ids, to_iso(now))
        except StoreUnavailableError as error:
            self._access_not_recorded(f"{self.path} is open read-only" if self.read_only else str(error))

    def _retag(self, db: sqlite3.Connection, memory: Memory, tags: Sequence[str]) -> None:
        self.lexical.rewrite(memory.id, memory.text, tags, {})

    def _clear_vectors(self, db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM vectors")

    def _fill(self, db: sqlite3.Connection, filled: Sequence[FilledVectors]) -> None:
        db.executemany(
            "INSERT INTO vectors (memory_id, vector) VALUES (?, ?) "
            "ON CONFLICT (memory_id) DO UPDATE SET vector = excluded.vector",
            [(item.id, SQLITE.vector_value(item.vector)) for item in filled],
        )
        db.executemany(
            "INSERT INTO views (memory_id, view, text, vector) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (memory_id, view) DO UPDATE SET text = excluded.text, vector = excluded.vector",
            [
                (item.id, view, text, SQLITE.vector_value(vector))
                for item in filled
                for view, (text, vector) in sorted(item.views.items())
            ],
        )

    def _add_vectors(self, db: sqlite3.Connection, ids: Sequence[int], vectors: np.ndarray) -> None:
        db.executemany(
            "INSERT INTO vectors (memory_id, vector) VALUES (?, ?)",
            ((memory_id, SQLITE.vector_value(vectors[row])) for row, memory_id in enumerate(ids)),
        )

    def _cache_identity(self) -> tuple[str, bytes] | None:
        """The store's id, which names its vector cache files, and the key of their digests; None
        for a store only read here (or whose id cannot be recorded)."""
        if self.read_only or self._write_refusal is not None:
            return None
        store_id, key = self._meta("store_id"), self._meta("cache_key")
        if store_id is None or key is None:  # a store last written by an older memsearch
            try:
                with self.transaction(ACCESS_TIMEOUT_MS):
                    _new_cache_identity(self._db)
            except StoreUnavailableError:
                return None
            store_id, key = self._meta("store_id"), self._meta("cache_key")
        return str(store_id), bytes.fromhex(str(key))

    def prepare_search_indexes(self, progress: Callable[[int, int], None] | None = None) -> int:
        """After a bulk write: the approximate vector indexes, then the impact index files (see
        `InProcessVectors.prepare_search_indexes`, `ImpactLexical.prepare_impact_indexes`)."""
        indexed = InProcessVectors.prepare_search_indexes(self, progress)
        self.prepare_impact_indexes(progress)
        return indexed

    def _engine_health(self) -> dict[str, Any]:
        wal = Path(f"{self.path}-wal")
        return {
            "fts_rows": self._db.execute("SELECT count(*) FROM memories_fts").fetchone()[0],
            "integrity": "; ".join(row[0] for row in self._db.execute("PRAGMA quick_check(5)")),
            "ann_index": self.vector_count() >= self.ann_threshold and index_library_available(),
            "wal_bytes": wal.stat().st_size if wal.exists() else 0,
            "size_bytes": self.path.stat().st_size,
        }

    def _size_bytes(self) -> int:
        return sum(os.path.getsize(p) for p in (self.path, Path(f"{self.path}-wal")) if os.path.exists(p))
