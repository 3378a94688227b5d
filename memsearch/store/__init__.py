"""The embedded store. The pipeline talks to it through SQLiteStore's methods only."""

from memsearch.store.sqlite import EVERYTHING, EmbeddingModelInfo, Scope, SQLiteStore, VectorIndex

__all__ = ["EVERYTHING", "EmbeddingModelInfo", "SQLiteStore", "Scope", "VectorIndex"]
