"""Stores behind one protocol (`memsearch.store.base`): the embedded SQLite file by default.

Importing this package loads no store implementation; `open_store` picks and loads one.
"""

from __future__ import annotations

from pathlib import Path

from memsearch.store.base import EVERYTHING, EmbeddingModelInfo, Scope, SearchBackend, Store

__all__ = ["EVERYTHING", "EmbeddingModelInfo", "Scope", "SearchBackend", "Store", "open_store"]


def open_store(location: Path, *, create: bool = False) -> Store:
    """Open (or, with `create`, create) the store at `location`."""
    from memsearch.store.sqlite import SQLiteStore

    return SQLiteStore.open(location, create=create)
