"""SQLite's failures as memsearch's typed errors: what is wrong with the store's file or disk, in
words that say what to do (a full disk, a busy or damaged file, a folder that cannot be written)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from memsearch.errors import MemsearchError, StoreCorruptError, StoreUnavailableError
from memsearch.store.sqlite_driver import sqlite3

BUSY_TIMEOUT_MS = 30_000  # a writer waits this long for another; better slow than failed
# Recording access after a search waits no longer than this for another writer: it is best effort,
# and a search must answer while an import holds the store.
ACCESS_TIMEOUT_MS = 200


def os_reason(path: Path, error: OSError) -> str:
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


# What an SQLite before 3.42 says of a full-text table a newer one wrote (FTS5's format 5: migrations).
NEWER_FORMAT = "invalid fts5 file format"


def newer_fts_error(path: Path | str) -> StoreUnavailableError:
    """A store whose full-text table a newer SQLite wrote (FTS5 secure-delete, SQLite 3.42 on) met
    on an older one, where it cannot be rebuilt (migrations.fts_format)."""
    return StoreUnavailableError(
        f"{path}'s full-text index was written by SQLite 3.42 or newer and this memsearch runs on SQLite "
        f"{sqlite3.sqlite_version}: install sqlean.py (pip install sqlean.py), or open the store once where "
        "it can be written (its index is then rebuilt from its text)"
    )


def store_error(path: Path | str, error: sqlite3.Error) -> MemsearchError:
    """The typed error for an SQLite failure: what is wrong with the store's file, and what to do."""
    return environment_error(path, error) or StoreCorruptError(f"{path} is not a usable memsearch store ({error})")


def full_disk(path: Path | str) -> StoreUnavailableError:
    return StoreUnavailableError(
        f"the disk holding {path} is full; free some space and run it again (nothing of this command was stored)"
    )


def disk_full(path: Path | str) -> bool:
    try:
        return os.statvfs(Path(path).parent).f_bavail == 0
    except OSError:
        return False


def is_busy(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def environment_error(path: Path | str, error: sqlite3.Error) -> MemsearchError | None:
    """The typed error for an SQLite failure caused by the store's file or disk, None for others."""
    code = getattr(error, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if NEWER_FORMAT in str(error):  # another process's newer SQLite wrote the table since this one opened
        return newer_fts_error(path)
    if primary == sqlite3.SQLITE_FULL:
        return full_disk(path)
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
        if disk_full(path):  # a WAL index that cannot grow on a full disk is an I/O error to SQLite
            return full_disk(path)
        return StoreUnavailableError(f"the disk failed reading or writing {path} ({error}); check the disk")
    return None
