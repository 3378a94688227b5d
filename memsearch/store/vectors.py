"""Exact vector search in process: every stored vector of a view as one matrix, scored at once."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class VectorIndex:
    """All stored vectors as one contiguous matrix, row i belonging to memory ids[i]."""

    ids: np.ndarray
    matrix: np.ndarray

    def rows_of(self, ids: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Of `ids`, those that have a vector here, and their rows in the matrix (ids are sorted)."""
        wanted = np.asarray(ids, np.int64)
        rows, present = self.locate(wanted)
        return wanted[present], rows[present]

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each id's row here (meaningless where absent) and whether it is present."""
        if self.ids.size == 0 or ids.size == 0:
            return ids[:0], np.zeros(ids.size, bool)
        rows = np.minimum(np.searchsorted(self.ids, ids), self.ids.size - 1)
        return rows, self.ids[rows] == ids


@functools.cache
def _blas() -> object:
    from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

    return ThreadpoolController()


def one_blas_thread() -> AbstractContextManager[object]:
    """Run numpy's BLAS on one thread: right after a query is embedded, onnxruntime's threads
    still spin on the cores, and a multi-threaded product fights them (measured: a 10k search
    in 11 ms instead of 20, a 100k one in 36 instead of 50)."""
    return _blas().limit(limits=1, user_api="blas")  # type: ignore[attr-defined,no-any-return]


def vector_top(
    index: VectorIndex,
    query: np.ndarray,
    pool: int,
    allowed: np.ndarray | None = None,
    chunks: VectorIndex | None = None,
) -> list[tuple[int, float]]:
    """The `pool` stored vectors most cosine-similar to `query` (all rows are unit length).

    `allowed`, a boolean mask over the index rows, restricts the search to a scope. `chunks` (ids
    repeat) are more vectors of some memories: each of those scores by its best vector.
    """
    if index.ids.size == 0 or pool <= 0:
        return []
    with one_blas_thread():
        scores = index.matrix @ query.astype(np.float32, copy=False)
        if chunks is not None and chunks.ids.size:
            rows, present = index.locate(chunks.ids)
            np.maximum.at(scores, rows[present], (chunks.matrix @ query.astype(np.float32, copy=False))[present])
    rows = np.flatnonzero(allowed) if allowed is not None else np.arange(scores.size)
    if rows.size == 0:
        return []
    subset = scores[rows]
    top = np.argpartition(-subset, pool - 1)[:pool] if subset.size > pool else np.arange(subset.size)
    # Stable order: best score first, then the older (smaller) id.
    ordered = sorted(top, key=lambda i: (-subset[i], index.ids[rows[i]]))
    return [(int(index.ids[rows[i]]), float(subset[i])) for i in ordered]
