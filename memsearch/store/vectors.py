"""Exact vector search in process: every stored vector of a view as one matrix, scored at once."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True, eq=False)
class VectorIndex:
    """All stored vectors as one contiguous matrix, row i belonging to memory ids[i] (both may be
    maps of the store's vector cache files)."""

    ids: np.ndarray
    matrix: np.ndarray
    # The last query's scores against every row: a search's vector legs, its time leg and its
    # candidates' cosines share one query vector, so one product serves them all.
    _last: list[tuple[bytes, np.ndarray]] = field(default_factory=list, repr=False)

    def scores(self, query: np.ndarray) -> np.ndarray:
        """`query`'s cosine with every row (read-only: it is shared)."""
        import numpy as np

        query = query.astype(np.float32, copy=False)
        known = self.known_scores(query)
        if known is not None:
            return known
        scores = row_scores(self.matrix, query)
        scores.flags.writeable = False
        self._last[:] = [(query.tobytes(), scores)]
        return scores

    def known_scores(self, query: np.ndarray) -> np.ndarray | None:
        """The scores of `query` if this is the last query scored, else None."""
        import numpy as np

        last = self._last[-1] if self._last else None
        return last[1] if last is not None and last[0] == query.astype(np.float32, copy=False).tobytes() else None

    def rows_of(self, ids: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Of `ids`, those that have a vector here, and their rows in the matrix (ids are sorted)."""
        import numpy as np

        wanted = np.asarray(ids, np.int64)
        rows, present = self.locate(wanted)
        return wanted[present], rows[present]

    def locate(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each id's row here (meaningless where absent) and whether it is present."""
        return locate(self.ids, ids)  # no vector yet: none present (they wait: see Store.pending_count)


def locate(sorted_ids: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each of `ids`'s position in `sorted_ids` (ascending; meaningless where absent) and whether
    it is there."""
    import numpy as np

    if sorted_ids.size == 0 or ids.size == 0:
        return np.zeros(ids.size, np.int64), np.zeros(ids.size, bool)
    rows = np.minimum(np.searchsorted(sorted_ids, ids), sorted_ids.size - 1)
    return rows, sorted_ids[rows] == ids


def row_scores(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each row's dot product with `query`, in float32, summed row by row: a row's score is the
    same bits whichever other rows are scored with it. (A BLAS matrix-vector product sums a row
    in an order that depends on its place in the block: scoring a subset of rows changed ~2 % of
    their scores in the last bits.) So the scores a vector leg takes from the whole matrix, a
    small scope's or an approximate index's rows scored alone, and the candidates' cosines are
    one number for one memory, and a search reuses the leg's scores as the cosines. It runs on
    this thread alone (no BLAS threads to fight onnxruntime's, still spinning after an
    embedding), as fast as a one-thread BLAS product."""
    import numpy as np

    query = query.astype(np.float32, copy=False)
    vecdot = getattr(np, "vecdot", None)  # numpy >= 2; einsum's loop is as row-by-row, a little slower
    if vecdot is not None:
        return np.asarray(vecdot(matrix, query), np.float32)
    return np.asarray(np.einsum("ij,j->i", matrix, query), np.float32)


LARGE = 65_536  # rows: from here a small scope's rows are scored alone, not the whole matrix


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
    import numpy as np

    if index.ids.size == 0 or pool <= 0:
        return []
    rows = np.flatnonzero(allowed) if allowed is not None else None
    if rows is not None and rows.size == 0:
        return []
    small = rows is not None and index.ids.size >= LARGE and rows.size < index.ids.size // 8
    if small and index.known_scores(query) is None:
        # A small scope of a large matrix: score its rows only.
        subset = row_scores(index.matrix[rows], query)
    else:
        scores = index.scores(query)
        subset = scores if rows is None else scores[rows]
    if chunks is not None and chunks.ids.size:
        chunk_rows, present = index.locate(chunks.ids)
        if rows is not None:  # chunk rows as positions in the subset
            at = np.minimum(np.searchsorted(rows, chunk_rows), rows.size - 1)
            present &= rows[at] == chunk_rows
            chunk_rows = at
        subset = subset.copy()  # the shared scores stay as they are
        np.maximum.at(subset, chunk_rows[present], chunks.scores(query)[present])
    return _best(index.ids if rows is None else index.ids[rows], subset, pool)


def _best(ids: np.ndarray, scores: np.ndarray, pool: int) -> list[tuple[int, float]]:
    """The `pool` best (id, score) pairs; stable order: best score first, then the older (smaller) id."""
    import numpy as np

    top = np.argpartition(-scores, pool - 1)[:pool] if scores.size > pool else np.arange(scores.size)
    top_ids, top_scores = np.asarray(ids[top], np.int64), np.asarray(scores[top])
    order = np.lexsort((top_ids, -top_scores))  # by score, then id (the last key sorts first)
    return list(zip(top_ids[order].tolist(), top_scores[order].tolist(), strict=True))


class Candidates(Protocol):
    """An approximate index: the ids of about the `count` nearest vectors, nearest first."""

    def search(self, query: np.ndarray, count: int) -> np.ndarray: ...


def approximate_top(
    index: VectorIndex,
    ann: Candidates,
    query: np.ndarray,
    pool: int,
    allowed: np.ndarray | None = None,
    chunks: VectorIndex | None = None,
) -> list[tuple[int, float]] | None:
    """`vector_top` through an approximate index: it proposes candidates, each scored exactly (so
    scores and order are those of `vector_top`; only a memory the index missed can be missing).
    A scope admits a share of the rows: the index is asked for enough more that `pool` of them
    are likely in scope, and again for four times as many while too few are. None when even
    that leaves fewer than `pool` (the caller searches exactly)."""
    import numpy as np

    total = index.ids.size
    admitted = total if allowed is None else int(np.count_nonzero(allowed))
    if total == 0 or pool <= 0 or admitted == 0:
        return []
    wanted = min(pool, admitted)
    count = min(total, int(pool * total / admitted * 1.5) + 10)
    chunk_best: dict[int, float] = {}
    if chunks is not None and chunks.ids.size:  # few: scored exactly, every one
        for memory_id, score in zip(chunks.ids.tolist(), chunks.scores(query).tolist(), strict=True):
            chunk_best[memory_id] = max(score, chunk_best.get(memory_id, -2.0))
    while True:
        found = np.union1d(ann.search(query, count), np.fromiter(chunk_best, np.int64, len(chunk_best)))
        rows, present = index.locate(found)
        rows = rows[present]
        if allowed is not None:
            rows = rows[allowed[rows]]
        if rows.size >= wanted or count >= total:
            break
        count = min(total, count * 4)
    if rows.size < wanted:
        return None
    scores = row_scores(index.matrix[rows], query)
    ids = index.ids[rows]
    if chunk_best:
        scores = np.maximum(scores, np.asarray([chunk_best.get(int(i), -2.0) for i in ids], np.float32))
    return _best(ids, scores, pool)
