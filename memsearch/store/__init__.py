"""Stores behind one protocol (`memsearch.store.base`): the embedded SQLite file by default.

Importing this package loads no store implementation; `open_store` picks and loads one.
"""

from __future__ import annotations

from pathlib import Path

from memsearch.errors import MemsearchError
from memsearch.store.base import EVERYTHING, EmbeddingModelInfo, Scope, SearchBackend, Store

__all__ = ["EVERYTHING", "EmbeddingModelInfo", "Scope", "SearchBackend", "Store", "describe_store_error", "open_store"]


def open_store(location: Path, *, create: bool = False) -> Store:
    """Open (or, with `create`, create) the store at `location`."""
    from memsearch.store.sqlite import SQLiteStore

    return SQLiteStore.open(location, create=create)


def describe_store_error(error: BaseException) -> MemsearchError | None:
    """A store's own exception met outside a write (a damaged file, a failing disk) as the typed
    error that says what to do; None for anything else."""
    import sqlite3

    if isinstance(error, sqlite3.DatabaseError):
        from memsearch.store.sqlite import store_error

        return store_error("the store", error)
    return None
