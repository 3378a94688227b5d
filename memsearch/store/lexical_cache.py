"""Where a large SQLite store keeps its impact index (memsearch.store.lexical_index), and when it
has one: the vector cache's folder and trust rules (memsearch.store.vector_cache: a file of the
user's that no one else may write, opened without following links, whose keyed BLAKE3 digest is
the one the store recorded when it was written), one file a column set, named by the generation
it was made at.

A file serves every later generation the store's change log reaches back to: the rows written
or deleted since are searched beside it (memsearch.store.lexical_delta), so a write never makes
the lexical leg disagree with the store, and never makes the next search rebuild the file. A new
file is made at a bulk write's end (index, import, reindex, copy: prepare_search_indexes) when
the changed rows are over REBUILD_SHARE of the store, or when there is no file the log reaches
back to (a store that just grew past the threshold). A search never makes one: over
SEARCH_REBUILD_SHARE (or without a file) it asks for one to be made in the background
(memsearch.store.lexical_builds; a one-shot process makes it at the end of a command that
wrote). A search that cannot have one (a store only read here, no trusted place, a disk that
refuses the file) asks FTS5, which gives the same answers more slowly.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from memsearch.store.ann import private_temporary
from memsearch.store.lexical_index import TEXT_COLUMNS, ImpactIndex, build_from_connection, read, write
from memsearch.store.sqlite_driver import sqlite3
from memsearch.store.vector_cache import VectorCache

log = logging.getLogger(__name__)

# Stores of at least this many memories search by words through the impact index, unless
# MEMSEARCH_LEXICAL_THRESHOLD names another size (0: never). Measured through the API, with 1,100
# rows changed since the file (bench/lexical_scale.py --api, README): FTS5's bm25 against the
# index 8.6 → 2.6 ms p50 at 10k (a new file each time: more than 5 % changed), 8.9 → 6.3 ms at
# 30k, 41 → 10 ms at 100k, 480 → 27 ms at 1M; its file takes 2 s to make at 30k, 12 s at 100k.
DEFAULT_THRESHOLD = 50_000
# In a process that has numpy loaded already (a hybrid or vector search, a server, a library
# user), from this size under the default threshold: the index's query costs 0.6–1.1 ms CPU at 10k
# against FTS5's 2.2–2.6 (the same answers, scores to the bit; its two files take 0.47–0.65 s to
# make), 0.6–1.0 against 1.0–1.5 ms at 5k, no gain at 2k (bench/fixed_cost.py, issue 32). A
# lexical search from a fresh shell never imports numpy below DEFAULT_THRESHOLD: that import
# (~0.1–0.3 s) would cost it more than the index saves.
WARM_THRESHOLD = 10_000
# The share of the store's rows changed since its file was made above which a bulk write's end
# (prepare_search_indexes) makes a new file, and above which a search asks for one to be made in
# the background (the changed rows are searched beside the file: their cost grows with them).
REBUILD_SHARE = 0.01
SEARCH_REBUILD_SHARE = 0.05
# In a long-lived process, while a new file is made in the background, searches answer from the
# file and the rows changed since up to this share of the store (the changed rows are copied into
# memory once, as they come); past it FTS5 answers until the new file is swapped in.
HOLD_SHARE = 0.2
_FEWEST_CHANGES = 1_000  # changed rows a store of any size may keep before a new file is made

_NAME = re.compile(r"^(?P<store>[0-9a-f]+)-g(?P<generation>\d+)-fts-(?P<columns>[\w-]+)\.impact$")


def lexical_threshold() -> int:
    """The store size (memories) from which lexical search goes through the impact index:
    MEMSEARCH_LEXICAL_THRESHOLD, else DEFAULT_THRESHOLD (0: never)."""
    value = os.environ.get("MEMSEARCH_LEXICAL_THRESHOLD", "").strip()
    return int(value) if value.isascii() and value.isdigit() else DEFAULT_THRESHOLD


def index_wanted(rows: int, threshold: int) -> bool:
    """Whether a store of `rows` rows searches by words through the impact index: from
    `threshold` rows (0: never), and, while the threshold is the default, from WARM_THRESHOLD
    rows in a process that has numpy loaded (see WARM_THRESHOLD)."""
    if threshold <= 0:
        return False
    if rows >= threshold:
        return True
    return threshold == DEFAULT_THRESHOLD and rows >= WARM_THRESHOLD and "numpy" in sys.modules


def rebuild_after(rows: int, *, searching: bool) -> int:
    """How many changed rows a store of `rows` rows keeps beside its file before a new one is made
    at a bulk write's end (`searching` False) or by a search."""
    share = SEARCH_REBUILD_SHARE if searching else REBUILD_SHARE
    return max(_FEWEST_CHANGES, int(share * rows))


# Once a new file is due, the most rows written since its last look that a search of a long-lived
# process copies beside the file (at about 6,000 rows a second, bench/lexical_rebuild.py); a
# larger batch is answered by FTS5 until the new file is swapped in.
SEARCH_STEP = 1_000


def search_step() -> int:
    return SEARCH_STEP


def hold_after(rows: int) -> int:
    """How many changed rows a search of a long-lived process reads beside the file while a new
    one is made (HOLD_SHARE)."""
    return max(4 * _FEWEST_CHANGES, int(HOLD_SHARE * rows))


class LexicalCache:
    """The impact index files of one store, in its vector cache's (trusted) folder, checked
    against the same ledger."""

    def __init__(self, files: VectorCache, columns: Sequence[str] = TEXT_COLUMNS) -> None:
        self._files = files
        self.columns = tuple(columns)
        self._key = "-".join(self.columns)

    def path(self, generation: int) -> Path:
        return self._files.folder / f"{self._files.store_id}-g{generation}-fts-{self._key}.impact"

    @staticmethod
    def kept(files: VectorCache) -> dict[tuple[str, ...], int]:
        """The files of the store's in the folder: their columns, and the oldest generation of each."""
        kept: dict[tuple[str, ...], int] = {}
        for match in LexicalCache._own_files(files):
            columns = tuple(match["columns"].split("-"))
            kept[columns] = min(kept.get(columns, int(match["generation"])), int(match["generation"]))
        return kept

    @staticmethod
    def _own_files(files: VectorCache) -> list[re.Match[str]]:
        """The names of the store's files in the folder, matched (none when it cannot be listed)."""
        try:
            names = os.listdir(files.folder)
        except OSError:
            return []
        return [
            match for name in names if (match := _NAME.match(name)) is not None and match["store"] == files.store_id
        ]

    def newest(self, oldest: int, newest: int) -> tuple[int, ImpactIndex] | None:
        """The file of the latest generation from `oldest` to `newest` that is there as recorded
        (memory-mapped), with its generation; None when there is none."""
        found = sorted(
            (int(match["generation"]) for match in self._own_files(self._files) if match["columns"] == self._key),
            reverse=True,
        )
        for generation in found:
            if oldest <= generation <= newest:
                index = self.load(generation)
                if index is not None:  # (a newer one not recorded: a process killed while making it)
                    return generation, index
        return None

    def load(self, generation: int) -> ImpactIndex | None:
        """The index of this generation, memory-mapped, when it is there as recorded; else None."""
        path = self.path(generation)
        expected = self._files.ledger.recorded(path.name)
        if expected is None:
            return None
        with self._files._opened(path, expected=expected) as opened:
            if opened is None:
                return None
            try:
                mapped = mmap.mmap(opened[0].fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):
                return None
        index = read(mapped)
        if index is None:
            log.debug("impact index %s unreadable: building it again", path)
        return index

    def build(self, generation: int, db: sqlite3.Connection) -> ImpactIndex:
        """Build the index of this generation from `db` (in the caller's read snapshot of it),
        write it under a temporary name and rename it into place, record its digest, remove older
        generations' files; the index mapped from the file written."""
        index = build_from_connection(db, self.columns)
        folder = self._files.folder
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.path(generation)
        temporary = private_temporary(path)
        try:
            with open(temporary, "wb") as handle:
                write(index, handle)
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
        with self._files._opened(path, expected=None) as written:
            if written is None:
                raise OSError(f"the impact index just written at {path} does not read back")
            self._files.ledger.record(path.name, written[1])
        self._remove_older(generation)
        loaded = self.load(generation)
        if loaded is None:
            raise OSError(f"the impact index just written at {path} does not read back")
        return loaded

    def _remove_older(self, generation: int) -> None:
        try:
            names = os.listdir(self._files.folder)
        except OSError:
            return
        for name in names:
            match = _NAME.match(name)
            if match is None or match["columns"] != self._key:
                continue
            ours = match["store"] == self._files.store_id
            if not ours or int(match["generation"]) < generation:
                with contextlib.suppress(OSError):
                    (self._files.folder / name).unlink()
                if ours:
                    self._files.ledger.record(name, None)
