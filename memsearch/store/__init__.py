"""Stores behind one protocol (`memsearch.store.base`): the embedded SQLite file by default.

Importing this package loads no store implementation; `open_store` picks and loads one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memsearch.errors import MemsearchError, StoreNotFoundError
from memsearch.models import EmbeddingModelInfo
from memsearch.store.base import EVERYTHING, Scope, SearchBackend, Store

__all__ = [
    "BACKENDS", "EVERYTHING", "Backend", "EmbeddingModelInfo", "Scope", "SearchBackend", "Store",
    "describe_store_error", "is_postgres_url", "open_store",
]  # fmt: skip


POSTGRES_SCHEMES = ("postgresql://", "postgres://")
POSTGRES_EXTRA = ("psycopg", "pgvector")  # the modules of the postgres extra (pyproject.toml)


def is_postgres_url(location: str | os.PathLike[str]) -> bool:
    """Whether `location` names a PostgreSQL database rather than a SQLite file."""
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


@dataclass(frozen=True)
class Backend:
    """A kind of store: which locations are its own and how one is opened (its module imported
    then, so importing this package loads no store)."""

    name: str
    accepts: Callable[[Path | str], bool]
    open: Callable[[Path | str, bool], Store]  # (location, create) → the store


def _open_postgres(location: Path | str, create: bool) -> Store:
    try:
        from memsearch.store.postgres import PostgresStore
    except ImportError as error:
        if not (error.name or "").startswith(POSTGRES_EXTRA):  # memsearch's own: a bug, said as one
            raise
        raise StoreNotFoundError(
            f'a PostgreSQL store needs the postgres extra ({error.name} is missing): pip install "memsearch[postgres]"'
        ) from None
    return PostgresStore.open(str(location), create=create)


def _open_sqlite(location: Path | str, create: bool) -> Store:
    from memsearch.store.sqlite import SQLiteStore

    return SQLiteStore.open(Path(location), create=create)


# The backends, the first that accepts a location opens it: a new backend is one row (before
# SQLite, which takes every path).
BACKENDS: list[Backend] = [
    Backend("postgresql", is_postgres_url, _open_postgres),
    Backend("sqlite", lambda location: True, _open_sqlite),
]


def open_store(location: Path | str, *, create: bool = False) -> Store:
    """Open (or, with `create`, create) the store at `location`: a `postgresql://` URL or a SQLite
    path (or another registered backend's location, `BACKENDS`)."""
    backend = next(backend for backend in BACKENDS if backend.accepts(location))
    return backend.open(location, create)


def describe_store_error(error: BaseException) -> MemsearchError | None:
    """A store's own exception met outside a write (a damaged file, a failing disk) as the typed
    error that says what to do; None for anything else."""
    from memsearch.store.sqlite_driver import sqlite3

    if isinstance(error, sqlite3.DatabaseError):
        from memsearch.store.sqlite_errors import store_error

        return store_error("the store", error)
    return None
