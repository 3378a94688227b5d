"""The rows of a SQLite store's full text written or deleted since its impact index file was made
(memsearch.store.lexical_index, lexical_cache), kept beside the file so a write does not make the
next search rebuild it (54-69 s at a million memories).

The store names every memory whose full-text row it writes or deletes in its change log
(`lexical_changes`, in the write's transaction, with the generation the write began at;
sqlite_fts). A file made at generation G answers for every row not named since G; the rows named
are copied, as they are now, into an in-memory FTS5 table of the same columns and tokenizer (so
the same tokens and lengths as the store's), whose own impact index is searched beside the file.
Both are scored with the table's statistics as they are now (row count, average length, each
token's row count), so the answer is FTS5's (lexical_index.answer_parts). Each search after a
write reads only the log entries since the last one it saw.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from memsearch.store.fts import FTS_COLUMNS, TOKENIZER
from memsearch.store.lexical_index import ImpactIndex, Part, _varint_sum, assemble, read_varints
from memsearch.store.sqlite_driver import sqlite3
from memsearch.store.vectors import locate

if TYPE_CHECKING:
    import numpy as np

# The meta row naming the generation from which the change log holds every change (a file of an
# older generation cannot be brought up to date: its rows may have changed unlogged).
CHANGES_FROM = "lexical_changes_from"
_BATCH = 500  # ids a query (SQLite's bound parameters)
_TABLE = "changed"


def fts5_totals(db: sqlite3.Connection, table: str = "memories_fts") -> tuple[int, int]:
    """The row count and the token count of all columns, as FTS5's bm25 reads them (its
    averages record: the row count, then each column's tokens)."""
    found = db.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    if found is None or not found[0]:
        return 0, 0
    values = read_varints(bytes(found[0]))
    return values[0], sum(values[1:])


class ChangedRows:
    """The rows changed since the file of generation `base_generation` was made (see the module's
    doc): their ids (`changed`, sorted) and their current text in an in-memory FTS5 table. One
    thread at a time (the store's lexical search holds a lock)."""

    def __init__(self, base: ImpactIndex, base_generation: int) -> None:
        import numpy as np

        self.base = base
        self.base_generation = base_generation
        self.seen = base_generation  # the log's entries of this generation on are still to read
        self.changed = np.zeros(0, np.int64)
        self._db: sqlite3.Connection | None = None
        self._ids = np.zeros(0, np.int64)  # the changed rows there now (in the table), sorted
        self._lengths = np.zeros(0, np.int64)  # their lengths (all columns)
        self._tokens = 0  # their tokens
        self._dead = np.zeros(0, np.int64)  # rows of the base index among `changed`
        self._live: np.ndarray | None = None
        self._base_tokens = base.total_tokens

    def update(
        self,
        store: sqlite3.Connection,
        generation: int,
        most: int | None = None,
        step: tuple[int, int] | None = None,
    ) -> tuple[int, bool]:
        """Read the log's entries since the last update, in the caller's snapshot of the store at
        `generation`, and copy the rows they name as they are now (the cost grows with the
        entries read, not with the rows changed before). Returns how many rows have changed
        since the base was made, and whether they were copied: not when that is over `most`, nor
        (`step`: changed rows, entries) over the first of `step` with more new entries than its
        second (this object is then no longer to be used)."""
        import numpy as np

        ids = [row[0] for row in store.execute(
            "SELECT memory_id FROM lexical_changes WHERE generation >= ? ORDER BY memory_id", (self.seen,)
        )]  # fmt: skip
        if not ids:
            self.seen = generation
            return int(self.changed.size), True
        limit = most
        if step is not None and len(ids) > step[1]:
            limit = step[0] if limit is None else min(limit, step[0])
        if limit is not None and int(self.changed.size) + len(ids) > limit:
            changed = int(np.union1d(self.changed, np.asarray(ids, np.int64)).size)
            if changed > limit:
                return changed, False
        self.seen = generation
        db = self._table()
        columns = ", ".join(FTS_COLUMNS)
        copied: list[int] = []
        db.execute("BEGIN")
        try:
            for start in range(0, len(ids), _BATCH):
                batch = ids[start : start + _BATCH]
                marks = ", ".join("?" * len(batch))
                db.execute(f"DELETE FROM {_TABLE} WHERE rowid IN ({marks})", batch)
                rows = store.execute(
                    f"SELECT rowid, {columns} FROM memories_fts WHERE rowid IN ({marks})", batch
                ).fetchall()
                db.executemany(
                    f"INSERT INTO {_TABLE} (rowid, {columns}) VALUES ({', '.join('?' * (len(FTS_COLUMNS) + 1))})",
                    rows,
                )
                copied.extend(row[0] for row in rows)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        named = np.asarray(ids, np.int64)
        kept = ~np.isin(self._ids, named)
        new_ids = np.asarray(copied, np.int64)
        new_lengths = np.zeros(new_ids.size, np.int64)
        for start in range(0, len(copied), _BATCH):
            batch = copied[start : start + _BATCH]
            found = dict(db.execute(
                f"SELECT id, sz FROM {_TABLE}_docsize WHERE id IN ({', '.join('?' * len(batch))})", batch
            ).fetchall())  # fmt: skip
            new_lengths[start : start + len(batch)] = [_varint_sum(found[i]) for i in batch]
        ids_now = np.concatenate([self._ids[kept], new_ids])
        order = np.argsort(ids_now, kind="stable")
        self._ids = ids_now[order]
        self._lengths = np.concatenate([self._lengths[kept], new_lengths])[order]
        self._tokens = int(self._lengths.sum())
        self.changed = np.union1d(self.changed, named)
        where, held = locate(self.base.ids, self.changed)
        self._dead = where[held]
        self._base_tokens = self.base.total_tokens - int(self.base.lengths[self._dead].sum(dtype="int64"))
        self._live = None
        if self._dead.size:
            self._live = np.ones(self.base.ids.size, bool)
            self._live[self._dead] = False
        return int(self.changed.size), True

    def totals(self) -> tuple[int, int]:
        """The table's row count and token count (all columns) as they are now: the base's less its
        changed rows, and the changed rows as they are."""
        rows = int(self.base.ids.size) - int(self._dead.size) + int(self._ids.size)
        return rows, self._base_tokens + self._tokens

    def parts(self, columns: Sequence[str], tokens: Iterable[str]) -> list[Part]:
        """The base (less its changed rows) and the changed rows as they are, the latter indexed
        over `columns` for `tokens` only (FTS5 finds their instances in the in-memory table)."""
        import numpy as np

        parts = [Part(self.base, self._dead, self._live)]
        if not self._ids.size:
            return parts
        db = self._table()
        named = ", ".join("?" * len(columns))
        vocabulary = sorted(set(tokens), key=lambda token: token.encode("utf-8"))
        terms: list[int] = []
        docs: list[int] = []
        counts: list[int] = []
        for term, token in enumerate(vocabulary):
            for doc, count in db.execute(
                f"SELECT doc, count(*) FROM temp.{_TABLE}_instances WHERE term = ? AND col IN ({named}) "
                "GROUP BY doc ORDER BY doc",
                (token, *columns),
            ):
                terms.append(term)
                docs.append(doc)
                counts.append(count)
        rows = np.searchsorted(self._ids, np.asarray(docs, np.int64))
        index = assemble(
            self._ids, self._lengths, vocabulary, np.asarray(terms, np.int64), rows, np.asarray(counts, np.int64)
        )
        parts.append(Part(index, np.zeros(0, np.int64)))
        return parts

    def _table(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
            names = ", ".join(FTS_COLUMNS)
            self._db.execute(f"CREATE VIRTUAL TABLE {_TABLE} USING fts5 ({names}, tokenize = '{TOKENIZER}')")
            # Its instances (token, row, column), which `parts` reads.
            self._db.execute(f"CREATE VIRTUAL TABLE temp.{_TABLE}_instances USING fts5vocab(main, {_TABLE}, instance)")
        return self._db


__all__ = ["CHANGES_FROM", "ChangedRows", "fts5_totals"]
