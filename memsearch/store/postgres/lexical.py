"""The PostgreSQL store's LexicalIndex part: FTS5's BM25 in SQL (postgres.bm25) over the postings
each memory's own transaction keeps, read in one snapshot."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memsearch.store.base import LexicalHits, Scope
from memsearch.store.postgres.bm25 import Bm25, query_phrases
from memsearch.store.postgres.schema import OWN_VIEWS_DIFFER
from memsearch.text import LexicalQuery

if TYPE_CHECKING:
    from psycopg import Connection


class PgLexicalIndex:
    """Lexical search in the database `connection()` gives (this thread's connection)."""

    def __init__(self, connection: Callable[[], Connection[Any]]) -> None:
        self._connection = connection
        self._local = threading.local()  # this thread's last view query (`memo`)

    def lexical_search(self, query: LexicalQuery, scope: Scope, limit: int, view: str | None = None) -> LexicalHits:
        """FTS5's BM25 (see Bm25), best first, ties to the smaller id: over text and tags, or over
        one view's column only. The statistics and the ranking are read in one snapshot, so
        concurrent writers cannot make them disagree."""
        phrases = query_phrases(query, view)
        if not phrases or limit <= 0:
            return LexicalHits()
        key = (query, scope, limit)
        alike = False
        db = self._connection()
        if view is not None:
            # Where every memory's views hold its own text (a store of notes), each view ranks
            # alike: the leg over the next view is the one just run, if nothing was written since
            # (the same snapshot), as the SQLite store shares one query between them.
            snapshot, alike = db.execute(
                f"SELECT pg_current_snapshot()::text, NOT EXISTS (SELECT 1 FROM memories WHERE {OWN_VIEWS_DIFFER})"
            ).fetchone()  # type: ignore[misc]
            last = getattr(self._local, "memo", None)
            if alike and last is not None and last[:2] == (key, snapshot):
                return LexicalHits(last[2], last[2].engine)
        with db.transaction():
            db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            hits = Bm25(db).search(phrases, scope, limit)
        if alike:
            self._local.memo = (key, snapshot, hits)
        return LexicalHits(hits, hits.engine)

    def document_frequency(self, word: str, scope: Scope, at_most: int) -> int:
        """How many memories in scope hold `word` in their text or tags, counting no further than `at_most`."""
        return Bm25(self._connection()).document_frequency(word, scope, at_most)

    def word_documents(self, words: Sequence[str]) -> tuple[int, builtins.list[int]]:
        """See SearchBackend.word_documents: the term_docs counters of the text and tags columns."""
        return Bm25(self._connection()).word_documents(words)
