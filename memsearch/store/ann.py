"""The approximate vector index of a large SQLite store: an HNSW graph (usearch) over one view's
vectors, keyed by memory id, saved beside the store and memory-mapped by every search process.

Why usearch (measured on 100k clustered 384-d vectors, 2 shared cores; see the README): its
wheels cover CPython 3.11 on x86_64 and aarch64 Linux (hnswlib ships a source archive only, so an
install needs a C++ compiler); it removes vectors in place (faiss's HNSW cannot remove: every
delete would rebuild the graph) and takes 100 changes in ~45 ms (faiss ~680 ms for adds alone);
a saved index is memory-mapped in ~16 ms (faiss reads it: ~380 ms); its keys are 64-bit, so
memory ids are the keys. Query time (~0.5 ms; faiss ~0.3 ms) is small beside the rest of a
search. The index holds float16 copies of the vectors (half the disk); the candidates it finds
are scored again with the exact float32 vectors, so every score a search returns is exact.

Only what the index finds is approximate: which memories are candidates. Retrieval never sees
this module; `SQLiteStore.vector_search` decides when it answers (VectorHits.engine says which).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from memsearch.store.vectors import VectorIndex

log = logging.getLogger(__name__)

# Graph parameters: 16 links a node and a build beam of 64, about half the build time of usearch's
# default 128 (a million vectors: 26 min on 2 busy shared cores).
CONNECTIVITY = 16
EXPANSION_ADD = 64
# The search beam, at least (a search for more candidates widens it). On the benchmark's million
# clustered vectors recall@10 after re-scoring climbs with it to 0.96 at 768 and no further (the
# graph's own limit), at ~4 ms a query on a busy machine; 128 gave 0.915. On text vectors
# (bench/ann_scale.py --text, recall counting ties with the 10th score) it gives 0.993 at 100k in
# 0.44x the exact leg's time and 0.995 at 50k (256: 0.988 and 0.986 in 0.18x and 0.24x); kept at
# 768 for the million's sake.
EXPANSION_SEARCH = 768
# Past this share of the vectors changed since the saved index, building anew is cheaper than updating.
REBUILD_SHARE = 0.5


# Vectors: from here the index pays (bench/ann_scale.py --text, 2 busy cores): at 100k text vectors
# the exact leg takes ~8 ms a query, the index's 3.5 ms (recall 0.993); at 50k 3.1 against 2.9 ms
# and at 20k 1.5 against 2.1 (a build a bulk write makes: 28 s at 100k, 10 s at 50k).
DEFAULT_THRESHOLD = 100_000


def ann_threshold() -> int:
    """The scope size (memories) from which vector search goes through the index:
    MEMSEARCH_ANN_THRESHOLD, else DEFAULT_THRESHOLD."""
    value = os.environ.get("MEMSEARCH_ANN_THRESHOLD", "").strip()
    return int(value) if value.isascii() and value.isdigit() else DEFAULT_THRESHOLD


def private_temporary(path: Path) -> Path:
    """A new empty file beside `path`, readable by the owner only (as the store), to be renamed to
    `path`: threads of one process, or processes, that write the same file at once each write
    their own and rename a whole file into place."""
    import tempfile  # by what saves an index, not by every search

    descriptor, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(descriptor)
    return Path(name)


def index_library_available() -> bool:
    """Whether the index library is installed (without it every search is exact)."""
    try:
        # usearch 2.26 makes a later import of onnxruntime crash the process (the pin in
        # pyproject.toml keeps it out; this keeps an installed one harmless): onnxruntime first.
        # A search through the index embeds its query anyway.
        with contextlib.suppress(ImportError):
            import onnxruntime  # noqa: F401

        import usearch.index  # noqa: F401
    except ImportError:
        return False
    return True


class AnnIndex:
    """A loaded (memory-mapped) index: `search` returns candidate memory ids, nearest first."""

    def __init__(self, index: Any, path: Path) -> None:
        self._index = index
        self.path = path

    def __len__(self) -> int:
        return int(self._index.size)

    def search(self, query: np.ndarray, count: int) -> np.ndarray:
        import numpy as np

        self._index.expansion_search = max(EXPANSION_SEARCH, count)
        matches = self._index.search(query.astype(np.float32, copy=False), count, threads=1)
        return np.asarray(matches.keys, dtype=np.int64)


def open_index(path: Path, ids: np.ndarray) -> AnnIndex | None:
    """The saved index at `path`, memory-mapped; None when it is missing or does not hold exactly
    `ids` (a damaged or foreign file is rebuilt, never an error)."""
    from usearch.index import Index

    if not path.is_file():
        return None
    try:
        index = Index.restore(str(path), view=True)
    except Exception as error:  # usearch raises RuntimeError or ValueError for a damaged file
        log.info("vector index %s unreadable (%s): rebuilding it", path, error)
        return None
    if index is None or index.size != ids.size:
        return None
    return AnnIndex(index, path)


def _new_index(dim: int) -> Any:
    from usearch.index import Index

    return Index(
        ndim=dim, metric="ip", dtype="f16", connectivity=CONNECTIVITY, expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )  # fmt: skip


def build_index(
    path: Path,
    current: VectorIndex,
    previous: tuple[Path, VectorIndex] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> AnnIndex:
    """Write the index of `current` at `path` (through a temporary file, so readers never see half
    of one) and map it. With `previous` (an earlier generation's index file and the vectors it was
    built from) only what changed is removed and added, unless most of it changed. `progress`
    gets (vectors added, vectors to add) as they are."""
    import numpy as np

    index = None
    if previous is not None:
        index = _updated(previous[0], previous[1], current, progress)
    if index is None:
        index = _new_index(current.matrix.shape[1])
        if current.ids.size:
            index.add(
                current.ids.astype(np.uint64), np.asarray(current.matrix, np.float32), threads=os.cpu_count() or 1,
                progress=_told(progress),
            )  # fmt: skip
    temporary = private_temporary(path)
    try:
        index.save(str(temporary))
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    opened = open_index(path, current.ids)
    if opened is None:
        raise OSError(f"the vector index just written at {path} does not read back")
    return opened


def _told(progress: Callable[[int, int], None] | None) -> Callable[[int, int], bool] | None:
    """`progress` as the index library calls it back (True: go on)."""
    if progress is None:
        return None

    def callback(done: int, total: int) -> bool:
        progress(done, total)
        return True

    # The library checks the callback's annotations as types (this module's are strings).
    callback.__annotations__ = {"done": int, "total": int, "return": bool}
    return callback


def _updated(
    path: Path, old: VectorIndex, new: VectorIndex, progress: Callable[[int, int], None] | None = None
) -> Any | None:
    """The index at `path` (built from `old`) brought to `new`: vectors gone or changed removed,
    new or changed added. None when building anew is the better way (or the file is unusable)."""
    import numpy as np
    from usearch.index import Index

    if old.matrix.shape[1:] != new.matrix.shape[1:]:
        return None
    kept_old = np.isin(old.ids, new.ids, assume_unique=True)
    common = old.ids[kept_old]
    old_rows = np.flatnonzero(kept_old)
    new_rows = np.searchsorted(new.ids, common)
    changed = np.zeros(common.size, bool)
    for start in range(0, common.size, 65536):  # compare in slices: both matrices may be maps of files
        part = slice(start, start + 65536)
        changed[part] = np.any(old.matrix[old_rows[part]] != new.matrix[new_rows[part]], axis=1)
    removed = np.concatenate([old.ids[~kept_old], common[changed]])
    added_rows = np.concatenate([np.flatnonzero(~np.isin(new.ids, old.ids, assume_unique=True)), new_rows[changed]])
    if removed.size + added_rows.size > REBUILD_SHARE * max(new.ids.size, 1):
        return None
    try:
        index = Index.restore(str(path), view=False)
    except Exception:
        return None
    if index is None or index.size != old.ids.size:
        return None
    if removed.size:
        index.remove(removed.astype(np.uint64), compact=True)
    if added_rows.size:
        added_rows.sort()
        index.add(
            new.ids[added_rows].astype(np.uint64), np.asarray(new.matrix[added_rows], np.float32),
            threads=os.cpu_count() or 1, progress=_told(progress),
        )  # fmt: skip
    return index
