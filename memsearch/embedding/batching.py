"""How both embedding routes (ONNX and sentence-transformers) spend the CPU: texts sorted by length
into small batches, each padded only to its own longest text, and the batches run side by side on
the usable CPUs, each run one-threaded. A batch that mixes a 30-token turn with a 1,000-token
session chunk pads the turn to 1,000 tokens; a model's own threads on small matrix products spend a
third more CPU time, far more when other processes share the cores."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from memsearch.embedding.base import Progress

T = TypeVar("T")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def batch_size(texts: int, workers: int, largest: int) -> int:
    """How many texts a batch takes: `largest`, or fewer when the call has too few texts to give
    every worker a batch of that size (an indexer embedding one file's few chunks, a small commit):
    then the texts are split evenly over the workers, so they all work and each batch pads less.

    Measured (bench/encoder_floor.py, one onnxruntime thread, texts cut to 64 tokens so nothing
    pads, sentences per CPU-second): batch 1 65, 4 84, 8 88, 16 82, 32 74, 128 67. Batches of
    8 cost least; 4 to 16 are within 7 % of it, so a smaller batch that keeps a second CPU busy
    is the better trade whenever there is one."""
    return max(1, min(largest, math.ceil(texts / max(1, workers))))


def length_batches(lengths: Sequence[int], size: int) -> list[list[int]]:
    """The positions of the texts, shortest first, in batches of at most `size`."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    return [order[start : start + size] for start in range(0, len(order), size)]


def run_side_by_side(run: Callable[[T], np.ndarray], batches: Sequence[T], workers: int) -> Iterator[np.ndarray]:
    """`run`'s output for each batch, in order; with several workers the batches run on that many
    threads (the runtimes let go of the GIL while they compute)."""
    workers = min(workers, len(batches))
    if workers <= 1:
        yield from map(run, batches)
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="memsearch-encode")
    try:
        yield from pool.map(run, batches)
    finally:
        # On an error or Ctrl-C, batches not yet started are dropped rather than waited for.
        pool.shutdown(wait=False, cancel_futures=True)


def encode_in_batches(
    lengths: Sequence[int],
    size: int,
    run: Callable[[list[int]], np.ndarray],
    dim: int,
    workers: int,
    progress: Progress | None = None,
) -> np.ndarray:
    """The unit vectors of texts whose lengths are given: `run` embeds the texts at a batch's
    positions (at most `size` of them, fewer when that keeps all `workers` busy: batch_size); rows
    come back in the texts' order, `progress` told after each batch in order."""
    out = np.zeros((len(lengths), dim), dtype=np.float32)
    batches = length_batches(lengths, batch_size(len(lengths), workers, size))
    done = 0
    for rows, vectors in zip(batches, run_side_by_side(run, batches, workers), strict=True):
        out[rows] = vectors
        done += len(rows)
        if progress:
            progress(done, len(lengths))
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    normalised: np.ndarray = out / np.maximum(norms, 1e-12)  # numpy types a ufunc's result as Any
    return normalised
