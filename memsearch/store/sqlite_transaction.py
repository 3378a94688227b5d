"""A write transaction on a SQLite store file: BEGIN IMMEDIATE … COMMIT, or a rollback that
leaves nothing, with SQLite's errors said as memsearch's (sqlite_errors); and a write inside a
batch's transaction, which leaves nothing of itself when it fails (a savepoint)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from memsearch.errors import StoreUnavailableError
from memsearch.store.sqlite_driver import sqlite3
from memsearch.store.sqlite_errors import BUSY_TIMEOUT_MS, environment_error, is_busy


class Transaction:
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
            if short and is_busy(error):
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


class Savepoint:
    """A write inside a batch's transaction: SAVEPOINT … RELEASE, or, on any exception, ROLLBACK TO
    it, so a write that fails (an unknown id among those deleted, say) leaves nothing of itself
    and the batch, if its caller goes on, commits only the writes that succeeded."""

    NAME = "memsearch_write"  # nested writes nest savepoints of one name: ROLLBACK TO takes the innermost

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._db = connection

    def __enter__(self) -> None:
        self._db.execute(f"SAVEPOINT {self.NAME}")

    def __exit__(self, exc_type: type[BaseException] | None, error: BaseException | None, *_: object) -> None:
        if exc_type is None:
            self._db.execute(f"RELEASE {self.NAME}")
            return
        if self._db.in_transaction:  # (after some errors SQLite has rolled the whole transaction back)
            with contextlib.suppress(sqlite3.Error):
                self._db.execute(f"ROLLBACK TO {self.NAME}")
                self._db.execute(f"RELEASE {self.NAME}")
