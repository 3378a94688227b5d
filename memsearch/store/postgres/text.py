"""FTS5's tokenizer and BM25 outside SQLite, so the PostgreSQL store ranks words exactly as the
SQLite store does.

Why not a Porter stemmer from PyPI: FTS5's `porter` tokenizer is SQLite's own C port of the
original algorithm wrapped around `unicode61 remove_diacritics 2` (its separators, case folding
and diacritic table); any other implementation drifts on some words. Python's standard `sqlite3`
module carries that very tokenizer, so text is tokenized by an in-memory FTS5 table and read back
through `fts5vocab` — no new dependency, and the same tokens by construction.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from memsearch.store.fts import FTS_COLUMNS, TOKENIZER

# FTS5's bm25() constants (fts5_aux.c).
K1 = 1.2
B = 0.75
MIN_IDF = 1e-6


@dataclass(frozen=True)
class Tokenized:
    """One row's tokens: (column, term) → the term's offsets in that column; and its length,
    the token count of all columns (what bm25() calls D)."""

    positions: dict[tuple[int, str], list[int]]
    length: int


class Fts5Tokenizer:
    """SQLite's FTS5 tokenizer over rows of up to `columns` texts. Thread-safe."""

    def __init__(self, columns: int = 4) -> None:
        self.columns = columns
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        names = ", ".join(f"c{i}" for i in range(columns))
        self._db.execute(f"CREATE VIRTUAL TABLE doc USING fts5 ({names}, tokenize = '{TOKENIZER}')")
        self._db.execute("CREATE VIRTUAL TABLE doc_vocab USING fts5vocab (doc, instance)")

    def rows(self, rows: Sequence[Sequence[str]]) -> list[Tokenized]:
        """Tokenize each row (a text per column)."""
        positions: list[dict[tuple[int, str], list[int]]] = [defaultdict(list) for _ in rows]
        lengths = [0] * len(rows)
        with self._lock:
            self._db.execute("BEGIN")
            try:
                marks = ", ".join("?" * (self.columns + 1))
                self._db.executemany(
                    f"INSERT INTO doc (rowid, {', '.join(f'c{i}' for i in range(self.columns))}) VALUES ({marks})",
                    [(i + 1, *row) for i, row in enumerate(rows)],
                )
                for term, doc, column, offset in self._db.execute(
                    "SELECT term, doc, col, offset FROM doc_vocab ORDER BY doc, col, offset"
                ):
                    positions[doc - 1][(int(column[1:]), term)].append(offset)
                    lengths[doc - 1] += 1
            finally:
                self._db.execute("ROLLBACK")
        return [Tokenized(dict(p), n) for p, n in zip(positions, lengths, strict=True)]

    def phrase(self, text: str) -> tuple[str, ...]:
        """The tokens of a query phrase, in order (as FTS5 reads a double-quoted string)."""
        tokenized = self.rows([(text, *[""] * (self.columns - 1))])[0]
        by_offset = sorted((offset, term) for (_, term), offsets in tokenized.positions.items() for offset in offsets)
        return tuple(term for _, term in by_offset)


def idf(rows: int, hits: int) -> float:
    """FTS5's idf: log((N - n + 0.5) / (n + 0.5)), a non-positive value replaced by 1e-6 (n is
    at most N; more would only come from counts read at different moments)."""
    value = math.log((max(0, rows - hits) + 0.5) / (hits + 0.5))
    return MIN_IDF if value <= 0.0 else value


def phrase_count(token_positions: Sequence[Sequence[int]]) -> int:
    """How often the phrase occurs in one column, given each of its tokens' offsets there."""
    later = [set(offsets) for offsets in token_positions[1:]]
    return sum(1 for start in token_positions[0] if all(start + k + 1 in offsets for k, offsets in enumerate(later)))


# The tokenizer of every full-text column of the store (fts.FTS_COLUMNS), shared by its writes and searches.
FTS_TOKENIZER = Fts5Tokenizer(len(FTS_COLUMNS))
