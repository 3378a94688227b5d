"""The PostgreSQL + pgvector store: the same protocol as the SQLite file, for a team's shared server.

Ranking parity with SQLite is the point: the lexical leg is FTS5's BM25 computed in SQL from
postings kept in each memory's own transaction (tokens from SQLite's own tokenizer, see
`text`; the engine is `bm25`), and vector scores are recomputed in float32 from the stored
vectors (`vectors`), so a store answers like a SQLite file of the same memories. Vector search
runs in SQL (`<=>`): exactly below EXACT_SEARCH_BELOW vectors, through the HNSW index with
iterative scans above it. `schema` holds the migrations; `store` the store itself.
"""

from memsearch.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from memsearch.store.postgres.store import PostgresStore

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresStore"]
