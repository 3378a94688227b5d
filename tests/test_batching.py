"""How the encoders cut a call into batches (embedding.batching): no model is loaded here."""

from __future__ import annotations

import numpy as np
import pytest

from memsearch.embedding.batching import batch_size, encode_in_batches


@pytest.mark.parametrize(
    ("texts", "workers", "expected"),
    [(1000, 2, 8), (16, 2, 8), (15, 2, 8), (9, 2, 5), (5, 2, 3), (2, 2, 1), (1, 2, 1), (0, 2, 1), (9, 1, 8), (5, 4, 2)],
)
def test_a_batch_is_the_measured_size_unless_that_leaves_a_worker_idle(texts: int, workers: int, expected: int) -> None:
    assert batch_size(texts, workers, 8) == expected


def test_one_files_chunks_are_split_over_the_workers_shortest_together() -> None:
    """An indexer embedding one file's five chunks keeps both CPUs busy (one batch of five used one)."""
    batches: list[list[int]] = []

    def run(rows: list[int]) -> np.ndarray:
        batches.append(rows)
        return np.tile(np.asarray(rows, np.float32)[:, None] + 1, (1, 3))

    lengths = [50, 10, 40, 20, 30]
    vectors = encode_in_batches(lengths, 8, run, 3, workers=2)
    assert sorted(batches) == [[1, 3, 4], [2, 0]]  # by length: 10, 20, 30 | 40, 50
    np.testing.assert_allclose(vectors, np.full((5, 3), 3**-0.5), rtol=1e-6)  # rows back in place, unit length
