"""The SQLite store's lexical search through the impact index (memsearch.store.lexical_index,
kept as memsearch.store.lexical_cache says, with the rows changed since its file searched beside
it: memsearch.store.lexical_delta) for a large store: FTS5's answers, without FTS5 scoring every
match. A part of SQLiteStore; `Fts5Index.lexical_search` asks it first.

Safety: every part is read in one snapshot of the store (its generation, the change log, the
changed rows, FTS5's phrase scores); the row and token counts the parts add up to are checked
against FTS5's own (its averages record) once a generation, so a write the log missed makes a
new file instead of a wrong answer (made off the search path: memsearch.store.lexical_builds).
Lexical searches of one store object take turns (a lock: the changed rows' in-memory table is
shared by its threads); a file made in the background is swapped in under the same lock.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Literal

from memsearch.errors import MemsearchError
from memsearch.models import LEXICAL_VIEWS
from memsearch.store.base import Hits, Scope
from memsearch.store.lexical_builds import ImpactBuilds
from memsearch.store.lexical_cache import LexicalCache, hold_after, index_wanted, rebuild_after, search_step
from memsearch.store.lexical_delta import CHANGES_FROM, ChangedRows, fts5_totals
from memsearch.store.lexical_index import TEXT_COLUMNS, ImpactIndex, answer_parts, query_phrases
from memsearch.store.sqlite_driver import sqlite3
from memsearch.store.sqlite_errors import ACCESS_TIMEOUT_MS
from memsearch.store.sqlite_vectors import CacheRecords
from memsearch.store.vector_cache import VectorCache
from memsearch.store.vectors import locate

if TYPE_CHECKING:
    import numpy as np

    from memsearch.store.sqlite_fts import Fts5Index
    from memsearch.text import LexicalQuery

log = logging.getLogger(__name__)

_NO_FILE = 2**62  # the changed rows when no file can be brought up: more than any share
_SWAPPED = -1  # the generation of an index swapped in by the builder: the next search brings it up


class ImpactLexical:
    """Lexical search over text and tags through the impact index (a part of SQLiteStore)."""

    lexical_threshold: int
    read_only: bool
    _cache_records: CacheRecords
    _impact: dict[str | None, tuple[int, ChangedRows | None]]  # view → (generation, its index or None)
    _impact_lock: threading.Lock
    # Whether this process lives on after a search (a server, a library user: True), so a search
    # may ask for a file to be made in the background; a one-shot process (a CLI command) makes
    # one at its end when it wrote (see _close_impact).
    impact_background = True
    _impact_builds: ImpactBuilds | None = None  # the files being made in the background, once asked for
    _impact_made: int | None = None  # the generation of a file made in the current snapshot

    if TYPE_CHECKING:  # what the store provides
        lexical: Fts5Index

        @property
        def _db(self) -> sqlite3.Connection: ...

        def generation(self) -> int: ...

        def _meta(self, key: str) -> str | None: ...

        def _set_meta(self, key: str, value: str) -> None: ...

        def transaction(self, busy_timeout_ms: int | None = None) -> AbstractContextManager[None]: ...

        def _files(self) -> VectorCache | None: ...

        def _scoped_ids(self, scope: Scope) -> builtins.list[int]: ...

        def _ids_of_other_kinds(self, kinds: Sequence[str]) -> builtins.list[int]: ...

        def _close_thread_connection(self) -> None: ...

    def _impact_search(self, query: LexicalQuery, scope: Scope, limit: int, view: str | None) -> Hits | None:
        """FTS5's top `limit` over text and tags (or the lexical view's column) through the impact
        index, when the store is large enough to want one and it can be had for the store's
        current state without making a file; else None (FTS5 answers)."""
        if self.lexical_threshold <= 0 or limit <= 0:
            return None
        db = self._db
        if db.in_transaction:  # inside a write: the rows are not yet a generation's
            return None
        known, generation = self._impact.get(view), self.generation()
        if known is not None and known[0] == generation and known[1] is None:
            return None  # a small store (or one without a place for the file, or a file being made)
        files: VectorCache | bool | None = False  # False: not looked for (the index is known)
        if known is None or known[0] != generation:
            if not index_wanted(fts5_totals(db)[0], self.lexical_threshold):
                self._impact[view] = (generation, None)
                return None
            files = self._files()  # before the snapshot: an older store's id is written on first need
        columns = TEXT_COLUMNS if view is None else (view,)
        with self._impact_snapshot() as db:  # the generation, the log, the changed rows and FTS5's phrases
            current = self._impact_current(view, columns, files, "search")
            if current is None:
                return None
            phrases = query_phrases(query)
            if phrases is None:
                return None
            rows, tokens = current.totals()
            parts = current.parts(columns, {phrase[0] for phrase in phrases if len(phrase) == 1})
            named = self._scope_named(scope)  # the scope's SQL, once a search
            masks = [self._impact_mask(part.index, named) for part in parts]
            return answer_parts(parts, masks, db, query, limit, columns, rows, tokens, phrases)

    @contextmanager
    def _impact_snapshot(self) -> Iterator[sqlite3.Connection]:
        """One read snapshot of the store, the impact indexes' lock held; after it, the cache
        records made in it written, and the change log shortened when a file was made."""
        made: int | None = None
        with self._impact_lock:
            db = self._db
            db.execute("BEGIN")
            self._impact_made = None
            try:
                yield db
            finally:
                db.execute("COMMIT")
                self._cache_records.flush()
                made, self._impact_made = self._impact_made, None
        if made is not None:
            self._forget_changes_before(made, self._files())

    def _impact_current(
        self,
        view: str | None,
        columns: Sequence[str],
        files: VectorCache | bool | None,
        mode: Literal["search", "bulk", "close"],
        progress: Callable[[int, int], None] | None = None,
    ) -> ChangedRows | None:
        """The view's index brought up to the store's generation (in the caller's snapshot): the
        latest file the change log reaches back to, with the rows changed since. When there is
        none, or the changed rows are over the share of the store (rebuild_after): a bulk write's
        end makes a new file here (`mode` "bulk"; "close": a one-shot process that wrote, over a
        search's share), `progress` told; a search never does — in a long-lived process
        (`impact_background`) it asks for one in the background and answers from the file and the
        changed rows meanwhile (up to HOLD_SHARE of the store, copying at most SEARCH_STEP rows
        written since its last look); past that, or without a file, FTS5 answers (a one-shot
        process: past the share). None when FTS5 is to answer."""
        generation = self.generation()
        known = self._impact.get(view)
        if mode == "search" and known is not None and known[0] == generation:
            return known[1]
        if isinstance(files, bool):  # a write came between: FTS5 answers, the next search looks
            return None
        totals = fts5_totals(self._db)
        rows = totals[0]
        if files is None or not index_wanted(rows, self.lexical_threshold):
            self._impact[view] = (generation, None)
            return None
        due = rebuild_after(rows, searching=mode != "bulk")
        if mode == "search" and self.impact_background:  # (past `due` a new file is asked for)
            most, step = hold_after(rows), (due, search_step())
        else:
            most, step = due, None
        current, changed = self._brought_up(known[1] if known else None, generation, columns, files, totals, most, step)
        if changed > due:
            if mode != "search":
                if progress is not None:
                    progress(0, rows)
                current = self._built(generation, columns, files, rows)
                if current is not None and progress is not None:
                    progress(rows, rows)
            elif self.impact_background:
                self._impact_build_later(view, tuple(columns))
        self._impact[view] = (generation, current)
        return current

    def _brought_up(
        self,
        current: ChangedRows | None,
        generation: int,
        columns: Sequence[str],
        files: VectorCache,
        totals: tuple[int, int],
        most: int,
        step: tuple[int, int] | None = None,
    ) -> tuple[ChangedRows | None, int]:
        """`current` (or the latest file the log reaches back to) with the log read up to
        `generation`, and how many rows have changed since its file (more than any share when
        there is no file). None with it when there is none, the log does not reach back, the
        changed rows are more than `most`, or a `step` too large (see ChangedRows.update: nothing
        copied), or the counts do not add up to `totals`
        (FTS5's, read in the caller's snapshot: a write the log missed, never used)."""
        start = self._meta(CHANGES_FROM)
        oldest = generation if start is None else int(start)
        if current is None or current.base_generation < oldest:
            found = LexicalCache(files, columns).newest(oldest, generation)
            if found is None:
                return None, _NO_FILE
            current = ChangedRows(found[1], found[0])
        changed, copied = current.update(self._db, generation, most, step)
        if not copied:
            return None, changed
        if current.totals() != totals:
            log.warning("the full-text change log does not account for every row: a new impact index is due")
            return None, _NO_FILE
        return current, changed

    def _built(self, generation: int, columns: Sequence[str], files: VectorCache, rows: int) -> ChangedRows | None:
        """A new file of `generation` made in the caller's snapshot (the change log shortened after it)."""
        log.info("building the full-text impact index of %s (%d memories)", files.folder, rows)
        try:
            index = LexicalCache(files, columns).build(generation, self._db)
        except (OSError, MemsearchError, ValueError) as error:
            log.warning("full-text impact index not available (%s): FTS5 answers", error)
            return None
        self._impact_made = generation if self._impact_made is None else min(self._impact_made, generation)
        return ChangedRows(index, generation)

    def _impact_build_later(self, view: str | None, columns: tuple[str, ...]) -> None:
        builds = self._impact_builds
        if builds is None:
            builds = self._impact_builds = ImpactBuilds(self._build_in_background)
        builds.want(view, columns)

    def _build_in_background(
        self, view: str | None, columns: tuple[str, ...], seen: Callable[[sqlite3.Connection], None]
    ) -> None:
        """Make the view's file (in the builder's thread: its own connection and snapshot, its own
        records of the file, written once the file is whole), then swap it in for the next search,
        unless a newer one is there already, and shorten the change log. The thread's connection
        is closed after (each file is made by a thread of its own)."""
        try:
            self._make_in_background(view, columns, seen)
        finally:
            self._close_thread_connection()

    def _make_in_background(
        self, view: str | None, columns: tuple[str, ...], seen: Callable[[sqlite3.Connection], None]
    ) -> None:
        files = self._files()
        if files is None:
            return
        db = self._db  # this thread's own connection
        seen(db)
        records = CacheRecords(self._cache_records._store)
        own = VectorCache(files.folder, files.store_id, records)
        db.execute("BEGIN")
        try:
            generation = self.generation()
            rows = fts5_totals(db)[0]
            log.info("building the full-text impact index of %s (%d memories) in the background", files.folder, rows)
            index = LexicalCache(own, columns).build(generation, db)
        finally:
            if db.in_transaction:
                db.execute("COMMIT")
        records.flush()
        with self._impact_lock:
            known = self._impact.get(view)
            if known is None or known[1] is None or known[1].base_generation < generation:
                self._impact[view] = (_SWAPPED, ChangedRows(index, generation))  # the next search brings it up
        self._forget_changes_before(generation, files)

    def wait_for_impact_builds(self, timeout: float) -> bool:
        """Wait until no impact index file is being made in the background; False when `timeout`
        (s) passed first."""
        builds = self._impact_builds
        return True if builds is None else builds.wait(timeout)

    def _close_impact(self) -> None:
        """Before the store's connections close: the file being made in the background is given
        up (its statement interrupted); a one-shot process that wrote makes what its searches
        would otherwise have wanted (a write's end pays for it, not a search)."""
        builds, self._impact_builds = self._impact_builds, None
        if builds is not None:
            builds.stop()
        elif not self.impact_background and not self.read_only and self._impact_wrote():
            try:
                self.prepare_impact_indexes(searching=True)
            except MemsearchError as error:
                log.debug("full-text impact index not made at the end (%s)", error)

    def _impact_wrote(self) -> bool:
        """Whether this store object wrote full-text rows (a search that records accesses does not)."""
        return self.lexical.rows_written > 0

    def _forget_changes_before(self, generation: int, files: VectorCache | None) -> None:
        """After a file of `generation` was made: the log's entries older than it and every other
        file kept are no longer needed, and files older than that can no longer be brought up to
        date (best effort: a busy store keeps them, which only costs room)."""
        generation = min([generation, *(LexicalCache.kept(files).values() if files is not None else ())])
        try:
            with self.transaction(ACCESS_TIMEOUT_MS):
                start = self._meta(CHANGES_FROM)
                if start is not None and int(start) >= generation:
                    return
                self._db.execute("DELETE FROM lexical_changes WHERE generation < ?", (generation,))
                self._set_meta(CHANGES_FROM, str(generation))
        except MemsearchError as error:
            log.debug("full-text change log not shortened (%s)", error)

    def prepare_impact_indexes(
        self, progress: Callable[[int, int], None] | None = None, *, searching: bool = False
    ) -> int:
        """After a bulk write: make the impact index files a search reads (text and tags, and the
        lexical views': one for all while they hold the same text; and any other kept) when the
        store is large enough to want them and has none the change log reaches back to, or more
        changed rows than REBUILD_SHARE of it (`searching`: than SEARCH_REBUILD_SHARE, what a
        search would ask for), so the next search only maps them; `progress` gets (rows indexed,
        rows) of each. Returns how many files were made."""
        if self.read_only:
            return 0
        rows, _ = fts5_totals(self._db)
        files = self._files()
        if not index_wanted(rows, self.lexical_threshold) or files is None:
            # No file wanted here: the log is kept short all the same (another process may want one).
            (logged,) = self._db.execute("SELECT count(*) FROM lexical_changes").fetchone()
            if logged > rebuild_after(rows, searching=True):
                self._forget_changes_before(self.generation(), files)
            return 0
        views = [LEXICAL_VIEWS[0]] if self.lexical._lexical_views_alike() else list(LEXICAL_VIEWS)
        wanted = [TEXT_COLUMNS, *((view,) for view in views)]  # what a search's legs read
        made = 0
        for columns in dict.fromkeys([*wanted, *LexicalCache.kept(files)]):
            view = None if columns == TEXT_COLUMNS else columns[0]
            with self._impact_snapshot():
                self._impact_current(view, columns, files, "close" if searching else "bulk", progress)
                made += self._impact_made is not None
        return made

    def _scope_named(self, scope: Scope) -> tuple[np.ndarray, bool] | None:
        """The ids a scope names and whether they are the rows out of it (the other
        kinds', for a kinds-only scope) rather than those in it; None for all rows."""
        import numpy as np

        if scope.is_everything:
            return None
        if scope.only_kinds:
            return np.asarray(self._ids_of_other_kinds(scope.kinds), np.int64), True
        return np.asarray(self._scoped_ids(scope), np.int64), False

    @staticmethod
    def _impact_mask(index: ImpactIndex, named: tuple[np.ndarray, bool] | None) -> np.ndarray | None:
        """Which rows of the index are in scope (`named`: see `_scope_named`); None for all."""
        import numpy as np

        if named is None:
            return None
        ids, excluded = named
        rows, found = locate(index.ids, ids)
        mask = np.full(index.ids.size, excluded, bool)
        mask[rows[found]] = not excluded
        return mask


__all__ = ["ImpactLexical"]
