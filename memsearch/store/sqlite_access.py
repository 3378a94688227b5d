"""The SQLite store's record of accesses (how often a search returned a memory, and when last),
kept in a small database file of its own beside the store (`<store>-access`), attached to every
connection as the schema `access`.

Why a file of its own: SQLite's page cache is per connection, and a connection drops all of it
when another one has changed the database file. Each search records the accesses of what it
returns; written into the store, that made every other connection on the store (`memsearch
serve` and a CLI, two agents) read its pages anew after each search of another (1.25x slower
searches at 10k memories, 1.66x at 100k). Written here, it drops their cache of this small file
only, and a recording no longer waits on, nor holds up, a writer of the store itself.

What a memory's row says is the sum of both: `access_count` is the store's count (accesses
recorded before this file existed, or copied in) plus this file's, `last_accessed_at` the later
of the two times. So decay ranks exactly as if the store held it all (`MEMORY_SELECT`).

The file names the store it belongs to (the store's id): one left beside a store made anew at
the same path is emptied (or, read-only, not read) rather than added to the new store's memories.
It is as private as the store (0600), and a store opened read-only reads it read-only (or, where
it does not exist or cannot be read, an empty one in memory).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from memsearch.errors import StoreUnavailableError
from memsearch.models import MEMORY_FIELDS
from memsearch.store.sqlite_driver import sqlite3
from memsearch.store.sqlite_errors import ACCESS_TIMEOUT_MS, BUSY_TIMEOUT_MS, environment_error, is_busy

SUFFIX = "-access"
_TABLES = (
    "CREATE TABLE IF NOT EXISTS access.accesses ("
    "memory_id INTEGER PRIMARY KEY, accesses INTEGER NOT NULL DEFAULT 0, accessed_at TEXT)",
    "CREATE TABLE IF NOT EXISTS access.owner (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)
_MERGED = {
    "access_count": "m.access_count + coalesce(a.accesses, 0) AS access_count",
    "last_accessed_at": "CASE WHEN a.accessed_at > m.last_accessed_at THEN a.accessed_at "
    "ELSE m.last_accessed_at END AS last_accessed_at",
}
# A memory row (MEMORY_COLUMNS, table alias m) with its accesses recorded in both places.
MEMORY_SELECT = (
    f"SELECT {', '.join(_MERGED.get(f.name, f'm.{f.name}') for f in MEMORY_FIELDS)} "
    "FROM memories m LEFT JOIN access.accesses a ON a.memory_id = m.id"
)
_RECORD = (
    "INSERT INTO access.accesses (memory_id, accesses, accessed_at) VALUES (?, 1, ?) "
    "ON CONFLICT (memory_id) DO UPDATE SET accesses = accesses + 1, "
    "accessed_at = max(coalesce(accessed_at, ''), excluded.accessed_at)"
)


def access_path(store: Path) -> Path:
    return Path(f"{store}{SUFFIX}")


def access_files(store: Path) -> tuple[Path, ...]:
    """The access file with its WAL and WAL index."""
    side = access_path(store)
    return (side, Path(f"{side}-wal"), Path(f"{side}-shm"))


def _trusted(side: Path, store: Path) -> bool:
    """Whether `side` is a regular file (not a link) of the store's owner that no one else may
    write: one planted beside a store in a shared folder is never read or written."""
    try:
        found, owner = os.lstat(side), os.stat(store).st_uid
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_uid == owner and not found.st_mode & 0o022


def attach(db: sqlite3.Connection, store: Path, *, writable: bool) -> bool:
    """Attach the store's access file as `access` (made, private, when `writable`); where it
    cannot be had (or cannot be trusted), an empty one in memory. Whether the file is attached."""
    side = access_path(store)
    try:
        if writable:
            with contextlib.suppress(FileExistsError):
                os.close(os.open(side, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
            if not _trusted(side, store):
                raise OSError(f"{side} is not a private file of the store's owner")
            db.execute("ATTACH DATABASE ? AS access", (str(side),))
            db.execute("PRAGMA access.journal_mode = WAL")
            db.execute("PRAGMA access.synchronous = NORMAL")
            if _missing_tables(db):
                for statement in _TABLES:
                    db.execute(statement)
            if _stale(db):  # another store's: emptied (or, failing that, not used)
                db.execute("BEGIN IMMEDIATE")
                if _stale(db):
                    db.execute("DELETE FROM access.accesses")
                    db.execute("DELETE FROM access.owner")
                db.execute("COMMIT")
            return True
        if _trusted(side, store) and _attach_read_only(db, side):
            return True
    except (OSError, sqlite3.Error):
        if db.in_transaction:
            db.execute("ROLLBACK")
        with contextlib.suppress(sqlite3.Error):
            db.execute("DETACH DATABASE access")
    db.execute("ATTACH DATABASE ':memory:' AS access")
    for statement in _TABLES:
        db.execute(statement)
    return False


def _attach_read_only(db: sqlite3.Connection, side: Path) -> bool:
    """Attach the access file read-only: `mode=ro`, or where its WAL index cannot be made (a
    read-only folder) and no WAL is pending, as immutable (as the store itself is read)."""
    wal = Path(f"{side}-wal")
    ways = ["mode=ro"] + ([] if wal.exists() and wal.stat().st_size > 0 else ["immutable=1"])
    for way in ways:
        db.execute("ATTACH DATABASE ? AS access", (f"{side.as_uri()}?{way}",))
        try:
            if not _missing_tables(db) and not _stale(db):
                return True
        except sqlite3.Error:
            pass
        db.execute("DETACH DATABASE access")
    return False


def _missing_tables(db: sqlite3.Connection) -> bool:
    (tables,) = db.execute(
        "SELECT count(*) FROM access.sqlite_schema WHERE type = 'table' AND name IN ('accesses', 'owner')"
    ).fetchone()
    return bool(tables != 2)


def _store_id(db: sqlite3.Connection) -> str | None:
    try:
        row = db.execute("SELECT value FROM main.meta WHERE key = 'store_id'").fetchone()
    except sqlite3.OperationalError:  # a store not made yet
        return None
    return str(row[0]) if row else None


def _stale(db: sqlite3.Connection) -> bool:
    """Whether the access file names another store than the one it is beside."""
    row = db.execute("SELECT value FROM access.owner WHERE key = 'store_id'").fetchone()
    return row is not None and row[0] != _store_id(db)


def record(db: sqlite3.Connection, store: Path, store_id: str, ids: Sequence[int], when: str) -> None:
    """Count an access of each memory at `when` (ISO time, as stored), in the access file alone:
    waits at most ACCESS_TIMEOUT_MS for another recorder (StoreUnavailableError when busy)."""
    db.execute(f"PRAGMA busy_timeout = {ACCESS_TIMEOUT_MS}")
    try:
        db.execute("BEGIN")  # deferred: only the access file is written, so only its lock is taken
        try:
            db.execute("INSERT OR IGNORE INTO access.owner (key, value) VALUES ('store_id', ?)", (store_id,))
            db.executemany(_RECORD, [(memory_id, when) for memory_id in ids])
            db.execute("COMMIT")
        finally:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
    except sqlite3.Error as error:
        if is_busy(error):
            raise StoreUnavailableError(f"{store} is busy: another process is recording accesses") from None
        raise environment_error(store, error) or error from None
    finally:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


def forget(db: sqlite3.Connection, ids: Sequence[int]) -> None:
    """Drop the accesses of deleted memories (in the store's write transaction)."""
    db.executemany("DELETE FROM access.accesses WHERE memory_id = ?", [(memory_id,) for memory_id in ids])


def restart_clock(db: sqlite3.Connection, memory_id: int) -> None:
    """A memory rewritten in place was last accessed when it was made anew (its count stays)."""
    db.execute("UPDATE access.accesses SET accessed_at = NULL WHERE memory_id = ?", (memory_id,))
