"""FTS5 as both stores use it: any user query (its LexicalQuery) as a safe FTS5 MATCH expression,
and FTS5's tokenizer and idf outside SQLite's tables.

Every word becomes a double-quoted FTS5 string, so operators (AND, NEAR, column filters,
`*`, `^`, `-`) in the query are searched as words instead of parsed as syntax.

Why not a Porter stemmer from PyPI for the tokens: FTS5's `porter` tokenizer is SQLite's own C
port of the original algorithm wrapped around `unicode61 remove_diacritics 2` (its separators,
case folding and diacritic table); any other implementation drifts on some words. Python's
standard `sqlite3` module carries that very tokenizer, so text is tokenized by an in-memory FTS5
table and read back through `fts5vocab` — no new dependency, and the same tokens by construction.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memsearch.models import LEXICAL_VIEWS, default_view_text
from memsearch.store.sqlite_driver import sqlite3
from memsearch.text import LexicalQuery, gram_terms

# The full-text tokenizer of both stores (SQLite's FTS5 table; the PostgreSQL store tokenizes with it too).
TOKENIZER = "porter unicode61 remove_diacritics 2"

# Each text searched by words (text and tags together, each lexical view) has a column of its CJK
# bigrams and symbols (see text.gram_terms) beside it: empty for plain English text.
GRAM_COLUMNS: dict[str | None, str] = {None: "grams", **{view: f"{view}_grams" for view in LEXICAL_VIEWS}}
# The full-text columns, in the stores' order: text, tags, the lexical views, their gram columns.
FTS_COLUMNS = ("text", "tags", *LEXICAL_VIEWS, *GRAM_COLUMNS.values())


def match_expression(query: LexicalQuery) -> str | None:
    """An OR of the query's words (and of its quoted phrases, as phrases); None if it has no words."""
    terms = [f'"{phrase}"' for phrase in query.match_phrases]
    return " OR ".join(terms) if terms else None


def fts_row(text: str, tags: Sequence[str], kind: str, views: Mapping[str, str]) -> tuple[str, ...]:
    """A memory's text for each of FTS_COLUMNS; a lexical view it has no text of its own for is
    indexed as models.default_view_text says."""
    own = [views.get(view, default_view_text(kind, view, text)) for view in LEXICAL_VIEWS]
    tag_text = " ".join(tags)
    return (text, tag_text, *own, gram_text(text, tag_text), *(gram_text(view_text) for view_text in own))


def gram_text(text: str, tags: str = "") -> str:
    """What the `grams` full-text column indexes for a memory's text and tags (see text.gram_terms)."""
    return " ".join(gram_terms(f"{text} {tags}" if tags else text))


def gram_expression(query: LexicalQuery) -> str | None:
    """An OR of the query's gram terms (CJK bigrams, symbols), for the `grams` column; None if it has none."""
    terms = [f'"{term}"' for term in query.grams]
    return " OR ".join(terms) if terms else None


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
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
        return self.phrases([text])[0]

    def phrases(self, texts: Sequence[str]) -> list[tuple[str, ...]]:
        """The tokens of each text, in order, tokenized together (see `phrase`)."""
        blank = ("",) * (self.columns - 1)
        rows = self.rows([(text, *blank) for text in texts])
        placed = [sorted((o, term) for (_, term), offsets in row.positions.items() for o in offsets) for row in rows]
        return [tuple(term for _, term in terms) for terms in placed]


# The tokenizer of every full-text column of the store (FTS_COLUMNS), shared by its writes and searches.
FTS_TOKENIZER = Fts5Tokenizer(len(FTS_COLUMNS))
