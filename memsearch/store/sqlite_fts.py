"""The SQLite store's full text: each memory's FTS5 row (text, tags, the lexical views and their
gram columns, see fts), and FTS5's BM25 search over it."""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from memsearch.errors import StoreUnavailableError
from memsearch.models import LEXICAL_VIEWS, Memory
from memsearch.store.base import Hits, LexicalHits, Scope
from memsearch.store.dialects import SQLITE
from memsearch.store.fts import (
    FTS_COLUMNS,
    FTS_TOKENIZER,
    GRAM_COLUMNS,
    fts_row,
    gram_expression,
    match_expression,
)
from memsearch.store.migrations import SECURE_DELETE_OFF, SECURE_DELETE_ON, fts_config, secure_delete_on
from memsearch.store.sqlite_driver import SECURE_DELETE, sqlite3
from memsearch.store.sqlite_errors import ACCESS_TIMEOUT_MS, NEWER_FORMAT, newer_fts_error
from memsearch.text import LexicalQuery

# Meta key: "same" while every memory's lexical views hold the same text, "differ" once one does not.
LEXICAL_VIEWS_STATE = "lexical_views"
_TERMS_A_QUERY = 500  # bound parameters of one vocabulary query (SQLite allows 32,766 since 3.32)

_FTS_INSERT = (
    f"INSERT INTO memories_fts (rowid, {', '.join(FTS_COLUMNS)}) VALUES ({', '.join('?' * (len(FTS_COLUMNS) + 1))})"
)
# A write transaction that deletes (or replaces) more than this share of the memories, and more than
# _BULK_FLOOR of them, deletes them without FTS5's secure-delete and merges the index once at its
# end ('optimize', which drops the deleted words as well), then turns secure-delete on again, all
# in the one transaction. Measured (bench/sqlite_driver.py --bulk, commit and checkpoint included),
# the merge's time over the secure-deletes' at 0.5 % of the store: 0.94 at 50k, 0.90 at 100k (at
# 1 %: 0.61, 0.63; at 2 %: 0.37, 0.40); at 10k, 1.25 at 100 rows and 0.65 at 200.
BULK_DELETE_SHARE = 0.005
_BULK_FLOOR = 150

T = TypeVar("T")

# Every write or delete of a full-text row names the memory in the change log, with the generation
# its write began at, in the write's transaction (the impact index's files of older generations
# stay usable for the rows not named: memsearch.store.sqlite_lexical).
_LOG_CHANGE = (
    "INSERT INTO lexical_changes (memory_id, generation) "
    "VALUES (?, coalesce((SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'generation'), 0)) "
    "ON CONFLICT (memory_id) DO UPDATE SET generation = excluded.generation"
)


class SQLiteFile(Protocol):
    """What the SQLite store's parts need of the store file they live in: this thread's
    connection, the meta rows, a write transaction and the write generation."""

    path: Path

    @property
    def read_only(self) -> bool: ...

    @property
    def _write_refusal(self) -> Exception | None: ...  # set when only reading works

    @property
    def _db(self) -> sqlite3.Connection: ...

    def _meta(self, key: str) -> str | None: ...

    def _set_meta(self, key: str, value: str) -> None: ...

    def transaction(self, busy_timeout_ms: int | None = None) -> AbstractContextManager[None]: ...

    def generation(self) -> int: ...

    def get(self, memory_id: int) -> Memory: ...

    def _refit_fts(self) -> None: ...  # rebuild a newer SQLite's full-text table, or raise the typed error


# FTS5's top k of a query over text and tags (or a view's column) by another route, or None when
# it cannot answer (memsearch.store.sqlite_lexical's impact index).
FasterLexical = Callable[[LexicalQuery, Scope, int, "str | None"], "Hits | None"]


class Fts5Index:
    """The SQLite store's LexicalIndex part: its full-text rows and FTS5's BM25 search over them,
    in the store file it is given."""

    def __init__(self, file: SQLiteFile, faster: FasterLexical | None = None) -> None:
        self._file = file
        self._faster = faster  # answers as FTS5 would, sooner, where it can (a large store's impact index)
        self._memo: tuple[tuple[Any, ...], Hits] | None = None  # the last lexical view query
        self.rows_written = 0  # full-text rows written or deleted through this object (committed or not)
        self._deletes = threading.local()  # this thread's write transaction's deletes (see `deleting`)

    def index_text(self, memory_id: int, row: Sequence[str]) -> None:
        """Write a memory's full-text row; one whose lexical views differ marks the store so (see
        `_lexical_views_alike`)."""
        self._file._db.execute(_FTS_INSERT, (memory_id, *row))
        self._file._db.execute(_LOG_CHANGE, (memory_id,))
        self.rows_written += 1
        views = [row[FTS_COLUMNS.index(view)] for view in LEXICAL_VIEWS]
        if any(text != views[0] for text in views) and self._file._meta(LEXICAL_VIEWS_STATE) != "differ":
            self._file._set_meta(LEXICAL_VIEWS_STATE, "differ")

    def unindex(self, memory_id: int) -> None:
        """Remove a memory's full-text row (its memory deleted, or about to be indexed anew)."""
        self._file._db.execute("DELETE FROM memories_fts WHERE rowid = ?", (memory_id,))
        self._file._db.execute(_LOG_CHANGE, (memory_id,))
        self.rows_written += 1

    def deleting(self, rows: int) -> None:
        """`rows` full-text rows are about to be deleted in this thread's write transaction: past
        BULK_DELETE_SHARE of the store, FTS5's secure-delete goes off until `deletes_merged`."""
        deletes = self._deletes
        deletes.rows = getattr(deletes, "rows", 0) + rows
        if not SECURE_DELETE or deletes.rows <= _BULK_FLOOR or getattr(deletes, "merging", False):
            return
        if getattr(deletes, "total", None) is None:  # the store's size as the transaction began (once)
            (left,) = self._file._db.execute("SELECT count(*) FROM memories").fetchone()
            deletes.total = int(left) + deletes.rows - rows
        bulk = deletes.rows > BULK_DELETE_SHARE * deletes.total
        if bulk and secure_delete_on(fts_config(self._file._db)):
            self._file._db.execute(SECURE_DELETE_OFF)
            deletes.merging = True

    def deletes_merged(self) -> None:
        """The transaction's deletes are merged out of the index: secure-delete on again if
        `deleting` turned it off (in the same transaction)."""
        if getattr(self._deletes, "merging", False):
            self._file._db.execute(SECURE_DELETE_ON)
        self.transaction_ended()

    def transaction_ended(self) -> None:
        self._deletes.rows, self._deletes.total, self._deletes.merging = 0, None, False

    def _lexical_views_alike(self) -> bool:
        """Whether every memory's lexical views hold the same text (a store of notes, which are
        their own views), as the store keeps track since it was made; a store made by an older
        memsearch is read once to know (when it can be written, to keep the answer)."""
        state = self._file._meta(LEXICAL_VIEWS_STATE)
        if state is None and not self._file.read_only and self._file._write_refusal is None:
            differs = " OR ".join(f"{view} IS NOT {LEXICAL_VIEWS[0]}" for view in LEXICAL_VIEWS[1:])
            found = self._file._db.execute(f"SELECT 1 FROM memories_fts WHERE {differs} LIMIT 1").fetchone()
            try:
                with self._file.transaction(ACCESS_TIMEOUT_MS):
                    self._file._db.execute(
                        "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                        (LEXICAL_VIEWS_STATE, "differ" if found else "same"),
                    )
            except StoreUnavailableError:
                return False
            state = self._file._meta(LEXICAL_VIEWS_STATE)
        return state == "same"

    def rewrite(self, memory_id: int, text: str, tags: Sequence[str] | None, views: Mapping[str, str | None]) -> None:
        """Index a memory anew with its new text and tags (None: as stored) and the named lexical
        views (None: the view's default for the text); other views keep their indexed text."""
        memory = self._file.get(memory_id)
        stored = self._file._db.execute(
            f"SELECT {', '.join(LEXICAL_VIEWS)} FROM memories_fts WHERE rowid = ?", (memory_id,)
        ).fetchone()
        kept = {view: value for view, value in zip(LEXICAL_VIEWS, stored, strict=True) if view not in views}
        named = {view: value for view, value in views.items() if view in LEXICAL_VIEWS and value is not None}
        self.unindex(memory_id)
        row = fts_row(text, memory.tags if tags is None else tags, memory.kind, {**kept, **named})
        self.index_text(memory_id, row)

    def _reading(self, read: Callable[[], T]) -> T:
        """`read` of the full-text table. A newer SQLite's process may have written the table since
        this store opened (FTS5's format 5, which an SQLite before 3.42 refuses): it is rebuilt once
        as an open does (the store's `_refit_fts`) and read again, or, where the store is only
        read, the typed error says so."""
        try:
            return read()
        except sqlite3.OperationalError as error:
            if NEWER_FORMAT not in str(error):
                raise
        self._file._refit_fts()
        try:
            return read()
        except sqlite3.OperationalError as error:
            if NEWER_FORMAT not in str(error):
                raise
            raise newer_fts_error(self._file.path) from None

    def lexical_search(self, query: LexicalQuery, scope: Scope, limit: int, view: str | None = None) -> LexicalHits:
        """FTS5 BM25, best first, as (id, score) with higher scores better: over text and tags, or
        over one view's column (`context`, `prev`) only. Always exact."""
        return self._reading(lambda: self._lexical_search(query, scope, limit, view))

    def _lexical_search(self, query: LexicalQuery, scope: Scope, limit: int, view: str | None) -> LexicalHits:
        if view is not None and view not in LEXICAL_VIEWS:
            raise ValueError(f"no full-text view {view!r}")
        if view is not None and self._lexical_views_alike():
            # Every memory's views hold the same text: one view's ranking is every view's, so the
            # legs over them run one query (the last one's hits are kept for the next leg).
            key = (self._file.generation(), query, scope, limit)
            last = self._memo
            if last is not None and last[0] == key:
                return LexicalHits(last[1])
            hits = self._lexical_query(query, scope, limit, LEXICAL_VIEWS[0])
            self._memo = (key, hits)
            return LexicalHits(hits)
        return LexicalHits(self._lexical_query(query, scope, limit, view))

    def _lexical_query(self, query: LexicalQuery, scope: Scope, limit: int, view: str | None) -> Hits:
        if self._faster is not None and (found := self._faster(query, scope, limit, view)) is not None:
            return found  # FTS5's answer (exact), found sooner
        return self._fts5_query(query, scope, limit, view)

    def _fts5_query(self, query: LexicalQuery, scope: Scope, limit: int, view: str | None) -> Hits:
        """FTS5's BM25 top `limit` (see lexical_search)."""
        match = match_expression(query)
        grams = gram_expression(query)
        if match is None and grams is None:
            return []
        # Words in text and tags (or the view); CJK bigrams and symbols (none in plain English) in the gram column.
        columns = ("text", "tags") if view is None else (view,)
        parts = [
            f"{{{' '.join(columns)}}} : ({match})" if match else None,
            f"{{{GRAM_COLUMNS[view]}}} : ({grams})" if grams else None,
        ]
        expression = " OR ".join(part for part in parts if part)
        weights = ", ".join("1.0" if name in (*columns, GRAM_COLUMNS[view]) else "0.0" for name in FTS_COLUMNS)
        rank = f"bm25(memories_fts, {weights})"  # equal scores by id, as the impact index and PostgreSQL order them
        if scope.is_everything:
            sql = f"SELECT rowid, -{rank} FROM memories_fts WHERE memories_fts MATCH ? ORDER BY {rank}, rowid LIMIT ?"
            params: builtins.list[Any] = [expression, limit]
        else:
            where, scope_params = SQLITE.where(scope)
            sql = (
                f"SELECT f.rowid, -{rank} FROM memories_fts f JOIN memories m ON m.id = f.rowid "
                f"WHERE memories_fts MATCH ? AND {where} ORDER BY {rank}, f.rowid LIMIT ?"
            )
            params = [expression, *scope_params, limit]
        return [(int(row[0]), float(row[1])) for row in self._file._db.execute(sql, params)]

    def word_documents(self, words: Sequence[str]) -> tuple[int, builtins.list[int]]:
        """See SearchBackend.word_documents: FTS5's per-column document counts (fts5vocab, a
        table of this connection's own temp schema, which even a read-only store can hold)."""
        return self._reading(lambda: self._word_documents(words))

    def _word_documents(self, words: Sequence[str]) -> tuple[int, builtins.list[int]]:
        phrases = FTS_TOKENIZER.phrases(words)
        terms = sorted({term for phrase in phrases for term in phrase})
        self._file._db.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memories_vocab USING fts5vocab(main, memories_fts, col)"
        )
        counts: dict[str, int] = {}
        for start in range(0, len(terms), _TERMS_A_QUERY):
            batch = terms[start : start + _TERMS_A_QUERY]
            counts.update(
                self._file._db.execute(
                    "SELECT term, sum(doc) FROM temp.memories_vocab WHERE col IN ('text', 'tags') "
                    f"AND term IN ({', '.join('?' * len(batch))}) GROUP BY term",
                    batch,
                ).fetchall()
            )
        memories = int(self._file._db.execute("SELECT count(*) FROM memories").fetchone()[0])
        return memories, [min((counts.get(term, 0) for term in phrase), default=0) for phrase in phrases]

    def document_frequency(self, word: str, scope: Scope, at_most: int) -> int:
        """How many memories in scope hold `word` in their text or tags, counting no further than
        `at_most` (enough to tell a common word; a rare one answers at once)."""
        return self._reading(lambda: self._document_frequency(word, scope, at_most))

    def _document_frequency(self, word: str, scope: Scope, at_most: int) -> int:
        match = '"' + word.replace('"', '""') + '"'
        if scope.is_everything:
            sql = "SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)"
            params: builtins.list[Any] = [f"{{text tags}} : ({match})", at_most]
        else:
            where, scope_params = SQLITE.where(scope)
            sql = (
                "SELECT count(*) FROM (SELECT 1 FROM memories_fts f JOIN memories m ON m.id = f.rowid "
                f"WHERE memories_fts MATCH ? AND {where} LIMIT ?)"
            )
            params = [f"{{text tags}} : ({match})", *scope_params, at_most]
        return int(self._file._db.execute(sql, params).fetchone()[0])
