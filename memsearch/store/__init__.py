"""Stores behind one protocol (`memsearch.store.base`): the embedded SQLite file by default.

Importing this package loads no store implementation; `open_store` picks and loads one.
"""

from __future__ import annotations

import os
from pathlib import Path

from memsearch.errors import MemsearchError, StoreNotFoundError
from memsearch.models import EmbeddingModelInfo
from memsearch.store.base import EVERYTHING, Scope, SearchBackend, Store

__all__ = [
    "EVERYTHING", "EmbeddingModelInfo", "Scope", "SearchBackend", "Store", "describe_store_error", "is_postgres_url",
    "open_store",
]  # fmt: skip


POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(location: str | os.PathLike[str]) -> bool:
    """Whether `location` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


def open_store(location: Path | str, *, create: bool = False) -> Store:
    """Open (or, with `create`, create) the store at `location`: a `postgresql://` URL or a SQLite path."""
    if is_postgres_url(location):
        try:
            from memsearch.store.postgres import PostgresStore
        except ImportError as error:
            raise StoreNotFoundError(
                f"a PostgreSQL store needs the postgres extra ({error.name} is missing): "
                'pip install "memsearch[postgres]"'
            ) from None
        return PostgresStore.open(str(location), create=create)
    from memsearch.store.sqlite import SQLiteStore

    return SQLiteStore.open(Path(location), create=create)


def describe_store_error(error: BaseException) -> MemsearchError | None:
    """A store's own exception met outside a write (a damaged file, a failing disk) as the typed
    error that says what to do; None for anything else."""
    import sqlite3

    if isinstance(error, sqlite3.DatabaseError):
        from memsearch.store.sqlite_errors import store_error

        return store_error("the store", error)
    return None
