"""The SQLite store's schema (a part of SQLiteStore): its migrations run once when a store opens,
and its full-text table's format suited to the SQLite it runs on (migrations.fts_format)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memsearch.errors import MemsearchError, StoreCorruptError, StoreUnavailableError
from memsearch.store.fts import gram_text
from memsearch.store.migrations import (
    BACK_TO_FORMAT_4,
    MIGRATIONS,
    SCHEMA_VERSION,
    fts_config,
    fts_format,
    split_statements,
)
from memsearch.store.sqlite_driver import SECURE_DELETE, sqlite3
from memsearch.store.sqlite_errors import ACCESS_TIMEOUT_MS, newer_fts_error
from memsearch.store.sqlite_fts import LEXICAL_VIEWS_STATE

log = logging.getLogger(__name__)
# "MSRC" in the SQLite header marks the file as a memsearch store.
APPLICATION_ID = 0x4D535243


class SQLiteSchema:
    """Migrations and the full-text table's format (a part of SQLiteStore)."""

    path: Path
    read_only: bool
    _write_refusal: MemsearchError | None

    if TYPE_CHECKING:  # what the store provides

        @property
        def _db(self) -> sqlite3.Connection: ...

        def transaction(self, busy_timeout_ms: int | None = None) -> contextlib.AbstractContextManager[None]: ...

        def _set_meta(self, key: str, value: str) -> None: ...

    def _migrate(self) -> None:
        """Bring the schema up to date. The version is read inside the write transaction, so
        processes opening a new or old store at once migrate it exactly once between them."""
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        rebuild = version > 0 and self._fts_format() == BACK_TO_FORMAT_4  # a newer SQLite's full-text table
        if version == SCHEMA_VERSION and not rebuild:
            self._suit_fts_format()
            return
        if self.read_only and 0 < version < SCHEMA_VERSION:
            raise StoreUnavailableError(
                f"{self.path} has schema version {version} and this memsearch reads {SCHEMA_VERSION}: it is "
                "read-only here, so it cannot be upgraded; open it once where it can be written"
            )
        if self.read_only and rebuild:
            raise newer_fts_error(self.path)
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
            if version > 0:  # an older SQLite rebuilds a newer one's full-text table before a migration reads it
                self._run(self._fts_format())
            for number in range(version + 1, SCHEMA_VERSION + 1):
                self._run(split_statements(MIGRATIONS[number - 1]))
                self._db.execute(f"PRAGMA user_version = {number}")
            self._run(self._fts_format())
            self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            if version == 0:
                self._set_meta(LEXICAL_VIEWS_STATE, "same")

    def _run(self, statements: Sequence[str]) -> None:
        for statement in statements:
            self._db.execute(statement)

    def _fts_format(self) -> tuple[str, ...]:
        """What suits the full-text table to this SQLite (migrations.fts_format); nothing for a
        file without the table (another program's: the migration says so)."""
        try:
            config = fts_config(self._db)
        except sqlite3.OperationalError:
            return ()
        return fts_format(config, SECURE_DELETE)

    def _refit_fts(self) -> None:
        """Rebuild the full-text table a newer SQLite's process wrote since this store opened, as
        an open does (_migrate); where the store is only read, the typed error says so."""
        if self.read_only or self._write_refusal is not None:
            raise newer_fts_error(self.path)
        with self.transaction():
            self._run(self._fts_format())

    def _suit_fts_format(self) -> None:
        """Turn FTS5's secure-delete on where this SQLite has it and the table has not (a store
        made or last opened by an older SQLite). Best effort: a store only read here, or held by
        another writer, deletes by merging the index until an open that can do it."""
        if not SECURE_DELETE or self.read_only or self._write_refusal is not None or not self._fts_format():
            return
        try:
            with self.transaction(ACCESS_TIMEOUT_MS):
                self._run(self._fts_format())
        except StoreUnavailableError as error:
            log.debug("full-text secure-delete not turned on for %s: %s", self.path, error)
