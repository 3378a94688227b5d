"""The SQLite store: every SQL statement memsearch runs lives in this module."""

from __future__ import annotations

import builtins
import contextlib
import errno
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from memsearch.errors import (
    InvalidInputError,
    MemoryNotFoundError,
    MemsearchError,
    StoreCorruptError,
    StoreNotFoundError,
    StoreUnavailableError,
)
from memsearch.models import (
    CHUNK_VIEW_PREFIX,
    LEXICAL_VIEWS,
    MEMORY_FIELDS,
    OWN_TEXT_VIEWS,
    Memory,
    check_text,
    content_hash,
)
from memsearch.paths import make_private_dirs, read_only_requested
from memsearch.store.ann import AnnIndex, ann_threshold, index_library_available
from memsearch.store.base import (
    EVERYTHING,
    EmbeddingModelInfo,
    ExportedMemory,
    Hits,
    LexicalHits,
    Rewrite,
    Scope,
    VectorHits,
)
from memsearch.store.fts import FTS_COLUMNS, GRAM_COLUMNS, fts_row, gram_expression, gram_text, match_expression
from memsearch.store.migrations import MIGRATIONS, SCHEMA_VERSION
from memsearch.store.sql import MEMORY_COLUMNS, REFERS, SQLITE, NewBatch, SQLStore
from memsearch.store.vector_cache import VectorCache, WrongDimension, batches, cache_folder
from memsearch.store.vectors import VectorIndex, approximate_top, vector_top
from memsearch.timeutil import to_iso

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")
# "MSRC" in the SQLite header marks the file as a memsearch store.
APPLICATION_ID = 0x4D535243
BUSY_TIMEOUT_MS = 30_000  # a writer waits this long for another; better slow than failed
# Recording access after a search waits no longer than this for another writer: it is best effort,
# and a search must answer while an import holds the store.
ACCESS_TIMEOUT_MS = 200

# The vector-index key of every long note's chunk vectors (views chunk_2, chunk_3, …; ids repeat).
_CHUNKS = "chunks"
# The store's id names its vector cache files (with the generation): a file never serves another store.
_NEW_STORE_ID = "INSERT OR IGNORE INTO meta (key, value) VALUES ('store_id', lower(hex(randomblob(8))))"
# Meta key: "same" while every memory's lexical views hold the same text, "differ" once one does not.
_LEXICAL_VIEWS = "lexical_views"
_CACHE_NAMES = {None: "own", _CHUNKS: "chunks"}  # a view's name in the vector cache files
_CHUNK_VIEWS_LIKE = CHUNK_VIEW_PREFIX.replace("_", "!_") + "%"

_row_to_memory = SQLITE.row_to_memory

_FTS_INSERT = (
    f"INSERT INTO memories_fts (rowid, {', '.join(FTS_COLUMNS)}) VALUES ({', '.join('?' * (len(FTS_COLUMNS) + 1))})"
)


log = logging.getLogger(__name__)

_SQLITE_INT_MAX = 2**63 - 1


def _fits(number: int) -> bool:
    """Whether SQLite can hold `number` (a larger one would raise OverflowError when bound)."""
    return -_SQLITE_INT_MAX - 1 <= number <= _SQLITE_INT_MAX


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


def _os_reason(path: Path, error: OSError) -> str:
    """Why the file system refused `path`, in words that say what to change."""
    if error.errno == errno.ENOTDIR:
        blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            return f"{blocker} is a file, not a folder; choose a path inside a folder"
    if error.errno == errno.ENAMETOOLONG:
        return "a name in the path is longer than the file system allows; choose a shorter path"
    if error.errno == errno.ENOSPC:
        return "the disk is full; free some space and run it again"
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{(error.strerror or 'permission denied').lower()}; choose a folder you can write to"
    if error.errno == errno.ENOENT:
        return "this file system does not allow creating files there; choose a folder you can write to"
    return f"{error.strerror or error}; choose another folder"


def store_error(path: Path | str, error: sqlite3.Error) -> MemsearchError:
    """The typed error for an SQLite failure: what is wrong with the store's file, and what to do."""
    return environment_error(path, error) or StoreCorruptError(f"{path} is not a usable memsearch store ({error})")


def _full_disk(path: Path | str) -> StoreUnavailableError:
    return StoreUnavailableError(
        f"the disk holding {path} is full; free some space and run it again (nothing of this command was stored)"
    )


def _disk_full(path: Path | str) -> bool:
    try:
        return os.statvfs(Path(path).parent).f_bavail == 0
    except OSError:
        return False


def _is_busy(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def environment_error(path: Path | str, error: sqlite3.Error) -> MemsearchError | None:
    """The typed error for an SQLite failure caused by the store's file or disk, None for others."""
    code = getattr(error, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary == sqlite3.SQLITE_FULL:
        return _full_disk(path)
    if primary in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return StoreUnavailableError(
            f"{path} is busy: another process held it for over {BUSY_TIMEOUT_MS // 1000} s; "
            "run it again (nothing of this command was stored)"
        )
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return StoreCorruptError(
            f"{path} is not a usable memsearch store: it is damaged ({error}); restore it from a backup, "
            "or move it away to start a new store"
        )
    if primary == sqlite3.SQLITE_READONLY or primary == sqlite3.SQLITE_PERM:
        return StoreUnavailableError(f"{path} cannot be written ({error}); check its permissions and the disk")
    if primary == sqlite3.SQLITE_CANTOPEN:
        return StoreUnavailableError(f"cannot open {path} ({error}); choose a folder you can write to")
    if primary == sqlite3.SQLITE_IOERR:
        if _disk_full(path):  # a WAL index that cannot grow on a full disk is an I/O error to SQLite
            return _full_disk(path)
        return StoreUnavailableError(f"the disk failed reading or writing {path} ({error}); check the disk")
    return None


class SQLiteStore(SQLStore):
    """One memsearch store file. Open with `SQLiteStore.open`; close when done.

    Each thread gets its own connection (SQLite connections are not to be shared by threads that
    run at once), so one store object can serve a threaded server.
    """

    parallel_reads = False
    dialect = SQLITE
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
        self._lexical_memo: tuple[tuple[Any, ...], Hits] | None = None  # the last lexical view query
        self._roles_memo: dict[Scope, tuple[int, builtins.list[str]]] = {}  # scope → (generation, roles)
        self._vector_memo: tuple[tuple[Any, ...], VectorIndex, VectorHits] | None = None  # the last vector search
        # Scopes of at least this many memories are searched through the approximate index.
        self.ann_threshold = ann_threshold()
        self._write_refusal: MemsearchError | None = None  # set when only reading works (a full disk)
        self._access_skipped = False  # the note that access was not recorded is given once
        if read_only:
            self._write_refusal = StoreUnavailableError(
                f"{path} is open read-only (it, or its folder, cannot be written, or MEMSEARCH_READ_ONLY is set); "
                "nothing was changed"
            )

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
        except sqlite3.Error as error:
            connection.close()
            translated = store_error(self.path, error)
            connection = self._read_only_connection(translated)
        except BaseException:
            connection.close()
            raise
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
            if not _disk_full(self.path):
                raise refused
            refused = _full_disk(self.path)
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
            raise StoreUnavailableError(f"cannot create a store at {path}: {_os_reason(path, error)}") from None
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
                for leftover in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                    leftover.unlink(missing_ok=True)
            if isinstance(error, sqlite3.Error):
                raise store_error(path, error) from None
            raise
        return store

    def _migrate(self) -> None:
        """Bring the schema up to date. The version is read inside the write transaction, so
        processes opening a new or old store at once migrate it exactly once between them."""
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        if version == SCHEMA_VERSION:
            return
        if self.read_only and 0 < version < SCHEMA_VERSION:
            raise StoreUnavailableError(
                f"{self.path} has schema version {version} and this memsearch reads {SCHEMA_VERSION}: it is "
                "read-only here, so it cannot be upgraded; open it once where it can be written"
            )
        with self.transaction():
            (app_id,) = self._db.execute("PRAGMA application_id").fetchone()
            (version,) = self._db.execute("PRAGMA user_version").fetchone()
            if app_id != APPLICATION_ID:
                (tables,) = self._db.execute("SELECT count(*) FROM sqlite_schema").fetchone()
                if app_id != 0 or tables:
                    raise StoreCorruptError(f"{self.path} is an SQLite file of another program, not a memsearch store")
            if version > SCHEMA_VERSION:
                raise StoreCorruptError(
                    f"{self.path} has schema version {version}, newer than this memsearch's {SCHEMA_VERSION}; "
                    "upgrade memsearch"
                )
            self._db.create_function("memsearch_grams", 2, gram_text, deterministic=True)
            for number in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _split_statements(MIGRATIONS[number - 1]):
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {number}")
            self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            if version == 0:
                self._set_meta(_LEXICAL_VIEWS, "same")

    # -- transactions and store facts -----------------------------------------------------

    def transaction(self, busy_timeout_ms: int | None = None) -> _Transaction:
        """A write transaction; `busy_timeout_ms` waits less than BUSY_TIMEOUT_MS for another writer."""
        connection = self._db
        if self._write_refusal is not None:
            raise self._write_refusal
        return _Transaction(connection, self.path, busy_timeout_ms)

    def _write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` in one write transaction that moves the generation on."""
        with self.transaction():
            result = work(self._db)
            self._bump_generation()
        return result

    @property
    def schema_version(self) -> int:
        return self._db.execute("PRAGMA user_version").fetchone()[0]

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
        self._db.execute(_NEW_STORE_ID)

    def generation(self) -> int:
        return int(self._meta("generation") or 0)

    def embedding_model(self) -> EmbeddingModelInfo | None:
        name, dim = self._meta("embedding_model"), self._meta("embedding_dim")
        return EmbeddingModelInfo(name, int(dim)) if name and dim else None

    # -- writes: what an insert does in SQLite (SQLStore.insert) ---------------------------

    def _record_model(self, db: sqlite3.Connection, model: EmbeddingModelInfo) -> None:
        self._set_meta("embedding_model", model.name)
        self._set_meta("embedding_dim", str(model.dim))

    def _insert_row(self, db: sqlite3.Connection, columns: Sequence[str], values: Sequence[Any]) -> int:
        sql = f"INSERT INTO memories ({', '.join(columns)}, last_accessed_at) VALUES ({SQLITE.marks(len(values))})"
        return int(db.execute(sql, values).lastrowid or 0)

    def _unindex(self, db: sqlite3.Connection, memory_id: int, batch: NewBatch, index: int) -> None:
        db.execute("DELETE FROM memories_fts WHERE rowid = ?", (memory_id,))
        self._delete_views(memory_id)

    def _index(self, db: sqlite3.Connection, memory_id: int, batch: NewBatch, index: int) -> None:
        memory = batch.memories[index]
        self._index_text(memory_id, fts_row(memory.text, memory.tags, memory.kind, memory.views))
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
            for memory_id in ids:
                if not _fits(memory_id):
                    raise MemoryNotFoundError(f"no memory with id {memory_id}; nothing was deleted")
                self._delete_views(memory_id)
                if self._db.execute("DELETE FROM memories WHERE id = ?", (memory_id,)).rowcount == 0:
                    raise MemoryNotFoundError(f"no memory with id {memory_id}; nothing was deleted")
                self._db.execute("DELETE FROM memories_fts WHERE rowid = ?", (memory_id,))
            for rewrite in rewrites:
                self._rewrite(rewrite)
            self._bump_generation()

    def _rewrite(self, rewrite: Rewrite) -> None:
        self._db.execute(
            "UPDATE memories SET text = ?, content_hash = ?, metadata = ? WHERE id = ?",
            (rewrite.text, content_hash(rewrite.text), json.dumps(dict(rewrite.metadata), ensure_ascii=False),
             rewrite.id),
        )  # fmt: skip
        self._rewrite_fts(rewrite.id, rewrite.text, None, {v: t[0] if t else None for v, t in rewrite.views.items()})
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

    def _index_text(self, memory_id: int, row: Sequence[str]) -> None:
        """Write a memory's full-text row; one whose lexical views differ marks the store so (see
        `_lexical_views_alike`)."""
        self._db.execute(_FTS_INSERT, (memory_id, *row))
        views = [row[FTS_COLUMNS.index(view)] for view in LEXICAL_VIEWS]
        if any(text != views[0] for text in views) and self._meta(_LEXICAL_VIEWS) != "differ":
            self._set_meta(_LEXICAL_VIEWS, "differ")

    def _lexical_views_alike(self) -> bool:
        """Whether every memory's lexical views hold the same text (a store of notes, which are
        their own views), as the store keeps track since it was made; a store made by an older
        memsearch is read once to know (when it can be written, to keep the answer)."""
        state = self._meta(_LEXICAL_VIEWS)
        if state is None and not self.read_only and self._write_refusal is None:
            differs = " OR ".join(f"{view} IS NOT {LEXICAL_VIEWS[0]}" for view in LEXICAL_VIEWS[1:])
            found = self._db.execute(f"SELECT 1 FROM memories_fts WHERE {differs} LIMIT 1").fetchone()
            try:
                with self.transaction(ACCESS_TIMEOUT_MS):
                    self._db.execute(
                        "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                        (_LEXICAL_VIEWS, "differ" if found else "same"),
                    )
            except StoreUnavailableError:
                return False
            state = self._meta(_LEXICAL_VIEWS)
        return state == "same"

    def _delete_views(self, memory_id: int) -> None:
        self._db.execute("DELETE FROM views WHERE memory_id = ?", (memory_id,))

    def _rewrite_fts(
        self, memory_id: int, text: str, tags: Sequence[str] | None, views: Mapping[str, str | None]
    ) -> None:
        """Index a memory anew with its new text and tags (None: as stored) and the named lexical
        views (None: the view's default for the text); other views keep their indexed text."""
        memory = self.get(memory_id)
        stored = self._db.execute(
            f"SELECT {', '.join(LEXICAL_VIEWS)} FROM memories_fts WHERE rowid = ?", (memory_id,)
        ).fetchone()
        kept = {view: value for view, value in zip(LEXICAL_VIEWS, stored, strict=True) if view not in views}
        named = {view: value for view, value in views.items() if view in LEXICAL_VIEWS and value is not None}
        self._db.execute("DELETE FROM memories_fts WHERE rowid = ?", (memory_id,))
        row = fts_row(text, memory.tags if tags is None else tags, memory.kind, {**kept, **named})
        self._index_text(memory_id, row)

    def touch(self, ids: Sequence[int], now: datetime) -> None:
        """Record that a search returned these memories; increments are atomic in SQL, so
        concurrent searches lose no update."""
        if not ids:
            return
        try:
            # Threads of this process take turns here, so the short wait only ever gives way to
            # another process's writer, never to a sibling search.
            with self._access_lock, self.transaction(ACCESS_TIMEOUT_MS):
                self._db.executemany(
                    "UPDATE memories SET access_count = access_count + 1, "
                    "last_accessed_at = max(last_accessed_at, ?) WHERE id = ?",
                    [(to_iso(now), memory_id) for memory_id in ids],
                )
        except StoreUnavailableError as error:
            self._access_not_recorded(f"{self.path} is open read-only" if self.read_only else str(error))

    def _retag(self, db: sqlite3.Connection, memory: Memory, tags: Sequence[str]) -> None:
        self._rewrite_fts(memory.id, memory.text, tags, {})

    def _clear_vectors(self, db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM vectors")

    def _add_vectors(self, db: sqlite3.Connection, ids: Sequence[int], vectors: np.ndarray) -> None:
        db.executemany(
            "INSERT INTO vectors (memory_id, vector) VALUES (?, ?)",
            ((memory_id, SQLITE.vector_value(vectors[row])) for row, memory_id in enumerate(ids)),
        )

    # -- copy between stores -----------------------------------------------------------------

    def export(self, batch: int = 1000) -> Iterator[ExportedMemory]:
        """Every memory with all it holds, in id order (for `copy_store`)."""
        import numpy as np

        columns = ", ".join(f"m.{name.strip()}" for name in MEMORY_COLUMNS.split(","))
        last = 0
        while True:
            rows = self._db.execute(
                f"SELECT {columns}, f.context, f.prev FROM memories m JOIN memories_fts f ON f.rowid = m.id "
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
            if model is not None:
                self._set_meta("embedding_model", model.name)
                self._set_meta("embedding_dim", str(model.dim))
            for exported in memories:
                m = exported.memory
                self._db.execute(
                    f"INSERT INTO memories ({MEMORY_COLUMNS}) VALUES ({SQLITE.marks(len(MEMORY_FIELDS))})",
                    [None if f.spec.refers else SQLITE.write(f, getattr(m, f.name)) for f in MEMORY_FIELDS],
                )
                if any(getattr(m, name) is not None for name in REFERS):
                    links.append((*(getattr(m, name) for name in REFERS), m.id))
                self._index_text(m.id, fts_row(m.text, m.tags, m.kind, exported.lexical_views))
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
            self._bump_generation()
        return written

    # -- reads ----------------------------------------------------------------------------

    def get(self, memory_id: int) -> Memory:
        if not _fits(memory_id):  # an id SQLite cannot hold names no memory
            raise MemoryNotFoundError(f"no memory with id {memory_id}")
        return super().get(memory_id)

    def get_many(self, ids: Sequence[int]) -> dict[int, Memory]:
        found: dict[int, Memory] = {}
        unique = [i for i in dict.fromkeys(int(i) for i in ids) if _fits(i)]
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._db.execute(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({marks})", chunk):
                found[row[0]] = _row_to_memory(row)
        return found

    def iter_texts(self) -> Iterator[tuple[int, str]]:
        yield from self._db.execute("SELECT id, text FROM memories ORDER BY id")

    def count(self, scope: Scope = EVERYTHING) -> int:
        if scope.is_everything:
            return self._db.execute("SELECT count(*) FROM memories").fetchone()[0]
        if scope.only_kinds:
            return self.count() - len(self._ids_of_other_kinds(scope.kinds))
        where, params = SQLITE.where(scope)
        return self._db.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone()[0]

    def _scoped_ids(self, scope: Scope) -> builtins.list[int]:
        where, params = SQLITE.where(scope)
        return [row[0] for row in self._db.execute(f"SELECT m.id FROM memories m WHERE {where}", params)]

    def lexical_search(self, query: str, scope: Scope, limit: int, view: str | None = None) -> LexicalHits:
        """FTS5 BM25, best first, as (id, score) with higher scores better: over text and tags, or
        over one view's column (`context`, `prev`) only. Always exact."""
        check_text("the query", query)  # SQLite binds only valid Unicode
        if view is not None and view not in LEXICAL_VIEWS:
            raise ValueError(f"no full-text view {view!r}")
        if view is not None and self._lexical_views_alike():
            # Every memory's views hold the same text: one view's ranking is every view's, so the
            # legs over them run one query (the last one's hits are kept for the next leg).
            key = (self.generation(), query, scope, limit)
            last = self._lexical_memo
            if last is not None and last[0] == key:
                return LexicalHits(last[1])
            hits = self._lexical_query(query, scope, limit, LEXICAL_VIEWS[0])
            self._lexical_memo = (key, hits)
            return LexicalHits(hits)
        return LexicalHits(self._lexical_query(query, scope, limit, view))

    def _lexical_query(self, query: str, scope: Scope, limit: int, view: str | None) -> Hits:
        match = match_expression(query)
        grams = gram_expression(query)
        if match is None and grams is None:
            return []
        # Words in text and tags (or the view); CJK bigrams and symbols (none in plain English) in the gram column.
        columns = ("text", "tags") if view is None else (view,)
        parts = [
            f"{{{' '.join(columns)}}} : ({match})" if match else None,
            f"{{{GRAM_COLUMNS[view]}}} : ({grams})" if grams else None,
        ]
        expression = " OR ".join(part for part in parts if part)
        weights = ", ".join("1.0" if name in (*columns, GRAM_COLUMNS[view]) else "0.0" for name in FTS_COLUMNS)
        rank = f"bm25(memories_fts, {weights})"
        if scope.is_everything:
            sql = f"SELECT rowid, -{rank} FROM memories_fts WHERE memories_fts MATCH ? ORDER BY {rank} LIMIT ?"
            params: builtins.list[Any] = [expression, limit]
        else:
            where, scope_params = SQLITE.where(scope)
            sql = (
                f"SELECT f.rowid, -{rank} FROM memories_fts f JOIN memories m ON m.id = f.rowid "
                f"WHERE memories_fts MATCH ? AND {where} ORDER BY {rank} LIMIT ?"
            )
            params = [expression, *scope_params, limit]
        return [(int(row[0]), float(row[1])) for row in self._db.execute(sql, params)]

    def document_frequency(self, word: str, scope: Scope, at_most: int) -> int:
        """How many memories in scope hold `word` in their text or tags, counting no further than
        `at_most` (enough to tell a common word; a rare one answers at once)."""
        match = '"' + word.replace('"', '""') + '"'
        if scope.is_everything:
            sql = "SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)"
            params: builtins.list[Any] = [f"{{text tags}} : ({match})", at_most]
        else:
            where, scope_params = SQLITE.where(scope)
            sql = (
                "SELECT count(*) FROM (SELECT 1 FROM memories_fts f JOIN memories m ON m.id = f.rowid "
                f"WHERE memories_fts MATCH ? AND {where} LIMIT ?)"
            )
            params = [f"{{text tags}} : ({match})", *scope_params, at_most]
        return self._db.execute(sql, params).fetchone()[0]

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
        """The vector cache beside the store; None for a store that is only read here (or whose
        id cannot be recorded)."""
        if self.read_only or self._write_refusal is not None:
            return None
        store_id = self._meta("store_id")
        if store_id is None:  # a store last written by an older memsearch: give it its id
            try:
                with self.transaction(ACCESS_TIMEOUT_MS):
                    self._db.execute(_NEW_STORE_ID)
            except StoreUnavailableError:
                return None
            store_id = self._meta("store_id")
        return VectorCache(cache_folder(self.path), str(store_id))

    def _approximate(self, view: str | None, index: VectorIndex, admitted: int) -> AnnIndex | None:
        """The view's approximate index when the scope is large enough to want one (made when
        missing; None without the index library, or where the cache cannot be written)."""
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
            built = files.index(generation, name, index)
        except OSError as error:
            log.warning("approximate vector index not available (%s): searching exactly", error)
            return None
        self._ann_cache[name] = (index, built)
        return built

    def _scope_mask(self, index: VectorIndex, scope: Scope) -> np.ndarray | None:
        """Which rows of the index are in scope; None for all. A scope that only leaves out some
        kinds (session chunks, usually few) is computed from the memories it leaves out."""
        import numpy as np

        if scope.is_everything:
            return None
        if scope.only_kinds:
            return ~np.isin(index.ids, np.asarray(self._ids_of_other_kinds(scope.kinds), np.int64))
        return np.isin(index.ids, np.asarray(self._scoped_ids(scope), np.int64))

    def vector_search(self, vector: np.ndarray, scope: Scope, limit: int | None, view: str | None = None) -> VectorHits:
        """The query against the stored vectors of the view, in process: exactly, or, for a scope
        of at least `ann_threshold` memories, through the approximate index. A long note scores by
        its best chunk where its own vector stands (the own-text views)."""
        import numpy as np

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
        """Each memory's cosine as the vector leg scores it: a long note's is its best chunk's."""
        import numpy as np

        index = self.vector_index()
        found, rows = index.rows_of(ids)
        if found.size == 0:  # also a store with no vectors yet, whose matrix has no columns
            return {}
        scores = index.matrix[rows] @ vector
        best = {int(i): float(s) for i, s in zip(found, scores, strict=True)}
        chunks = self.vector_index(_CHUNKS)
        if chunks.ids.size:
            wanted = np.isin(chunks.ids, found)
            for memory_id, score in zip(chunks.ids[wanted], chunks.matrix[wanted] @ vector, strict=True):
                best[int(memory_id)] = max(best[int(memory_id)], float(score))
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


def _split_statements(script: str) -> builtins.list[str]:
    """Split a migration into statements; migrations contain no semicolons inside literals."""
    return [part.strip() for part in script.split(";") if part.strip()]


class _Transaction:
    """BEGIN IMMEDIATE … COMMIT, rolled back on any exception, so a failed write leaves nothing."""

    def __init__(self, connection: sqlite3.Connection, path: Path, busy_timeout_ms: int | None = None) -> None:
        self._db = connection
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms

    def __enter__(self) -> None:
        short = self._busy_timeout_ms is not None
        try:
            if short:
                self._db.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            if short and _is_busy(error):
                raise StoreUnavailableError(f"{self._path} is busy: another process is writing to it") from None
            raise environment_error(self._path, error) or error from None
        finally:
            if short:
                self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    def __exit__(self, exc_type: type[BaseException] | None, error: BaseException | None, *_: object) -> None:
        if exc_type is None:
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error as failed:
                self._rollback()
                raise environment_error(self._path, failed) or failed from None
            return
        self._rollback()
        if isinstance(error, sqlite3.Error) and (translated := environment_error(self._path, error)):
            raise translated from None

    def _rollback(self) -> None:
        # After some errors (a full disk) SQLite has already rolled back; a second ROLLBACK would
        # raise "no transaction is active" and hide the cause.
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")
