"""Recall legs: each turns the query into one ranked list of (memory id, score)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from contextlib import AbstractContextManager

import numpy as np

from memsearch.retrieval.candidates import LegHit
from memsearch.store import VectorIndex


@functools.cache
def _blas() -> object:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def one_blas_thread() -> AbstractContextManager[object]:
    """Run numpy's BLAS on one thread: right after a query is embedded, onnxruntime's threads
    still spin on the cores, and a multi-threaded product fights them (measured: a 10k search
    in 11 ms instead of 20, a 100k one in 36 instead of 50)."""
    return _blas().limit(limits=1, user_api="blas")  # type: ignore[attr-defined,no-any-return]


def vector_top(
    index: VectorIndex, query: np.ndarray, pool: int, allowed: np.ndarray | None = None
) -> list[tuple[int, float]]:
    """The `pool` stored vectors most cosine-similar to `query` (all rows are unit length).

    `allowed`, a boolean mask over the index rows, restricts the search to a scope.
    """
    if index.ids.size == 0 or pool <= 0:
        return []
    with one_blas_thread():
        scores = index.matrix @ query.astype(np.float32, copy=False)
    rows = np.flatnonzero(allowed) if allowed is not None else np.arange(scores.size)
    if rows.size == 0:
        return []
    subset = scores[rows]
    top = np.argpartition(-subset, pool - 1)[:pool] if subset.size > pool else np.arange(subset.size)
    # Stable order: best score first, then the older (smaller) id.
    ordered = sorted(top, key=lambda i: (-subset[i], index.ids[rows[i]]))
    return [(int(index.ids[rows[i]]), float(subset[i])) for i in ordered]


def rank_hits(hits: Sequence[tuple[int, float]]) -> dict[int, LegHit]:
    """Number a leg's best-first hits 1, 2, 3, …"""
    return {memory_id: LegHit(rank, score) for rank, (memory_id, score) in enumerate(hits, start=1)}
