"""The vector cache beside a SQLite store: each view's ids and vectors as .npy files that a search
process memory-maps instead of reading every vector out of SQLite (~0.3 s for 100k), and, for a
large view, its approximate index (memsearch.store.ann).

Every file is named by the store's id and generation (which every write moves on), so a file is
only ever used for the state of the store it was made from: a stale or foreign file is never read,
and a missing, partial or damaged one is made again. Files are written under a temporary name and
renamed, so a reader sees a whole file or none; files of older generations are removed once the
current one is written (a process that still maps one keeps reading it: unlinking does not unmap).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from memsearch.paths import make_private_dirs
from memsearch.store.ann import AnnIndex, build_index, open_index, private_temporary
from memsearch.store.vectors import VectorIndex

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(?P<store>[0-9a-f]+)-g(?P<generation>\d+)-(?P<view>[\w-]+)\.(?P<part>ids\.npy|f32\.npy|hnsw)$")


def cache_folder(store_path: Path) -> Path:
    return store_path.with_name(f"{store_path.name}.vectors")


class VectorCache:
    """The cache files of one store (`store_id`) in `folder`."""

    def __init__(self, folder: Path, store_id: str) -> None:
        self.folder = folder
        self.store_id = store_id

    def _path(self, generation: int, view: str, part: str) -> Path:
        return self.folder / f"{self.store_id}-g{generation}-{view}.{part}"

    def load(self, generation: int, view: str, dim: int) -> VectorIndex | None:
        """The view's vectors of this generation, memory-mapped; None if not (wholly) there."""
        try:
            ids = np.load(self._path(generation, view, "ids.npy"), mmap_mode="r")
            matrix = np.load(self._path(generation, view, "f32.npy"), mmap_mode="r")
        except (OSError, ValueError):  # missing, cut short or not an .npy file: made again
            return None
        if ids.dtype != np.int64 or ids.ndim != 1 or matrix.dtype != np.float32 or matrix.shape != (ids.size, dim):
            return None
        return VectorIndex(ids=ids, matrix=matrix)

    def write(
        self, generation: int, view: str, dim: int, count: int, batches: Iterable[list[tuple[int, bytes]]]
    ) -> VectorIndex:
        """Write the view's `count` (id, float32 bytes) rows, in id order, and map them. The rows
        stream into the file a batch at a time: a process never holds the matrix twice."""
        make_private_dirs(self.folder)
        matrix_path, ids_path = self._path(generation, view, "f32.npy"), self._path(generation, view, "ids.npy")
        # Temporary files of their own (private, as the store): threads of one process, or other
        # processes, may write the same generation at once; each renames a whole file into place.
        matrix_tmp, ids_tmp = (private_temporary(path) for path in (matrix_path, ids_path))
        try:
            matrix = np.lib.format.open_memmap(matrix_tmp, mode="w+", dtype=np.float32, shape=(count, dim))
            ids = np.zeros(count, np.int64)
            filled = 0
            for batch in batches:
                if filled + len(batch) > count:
                    raise ValueError("more vectors than counted")
                wrong = sum(1 for _, blob in batch if len(blob) != 4 * dim)
                if wrong:
                    raise WrongDimension(wrong)
                ids[filled : filled + len(batch)] = [memory_id for memory_id, _ in batch]
                block = np.frombuffer(b"".join(blob for _, blob in batch), dtype="<f4")
                matrix[filled : filled + len(batch)] = block.reshape(len(batch), dim)
                filled += len(batch)
            if filled != count:
                raise ValueError("fewer vectors than counted")
            matrix.flush()
            del matrix
            with open(ids_tmp, "wb") as file:
                np.save(file, ids)
            os.replace(matrix_tmp, matrix_path)
            os.replace(ids_tmp, ids_path)  # last: the pair is whole once the ids are there
        finally:
            matrix_tmp.unlink(missing_ok=True)
            ids_tmp.unlink(missing_ok=True)
        loaded = self.load(generation, view, dim)
        if loaded is None:
            raise OSError(f"the vector cache just written in {self.folder} does not read back")
        self._remove_older(generation, view, keep_index=True)
        return loaded

    def index(self, generation: int, view: str, vectors: VectorIndex) -> AnnIndex:
        """The view's approximate index of this generation: mapped if saved, else updated from the
        newest saved generation's (when its vectors are still there to compare), else built."""
        path = self._path(generation, view, "hnsw")
        opened = open_index(path, vectors.ids)
        if opened is not None:
            return opened
        previous = self._previous_index(generation, view, vectors.matrix.shape[1])
        log.info("building the approximate vector index of %s (%d vectors)", self.folder, vectors.ids.size)
        built = build_index(path, vectors, previous)
        self._remove_older(generation, view, keep_index=False)
        return built

    def _previous_index(self, generation: int, view: str, dim: int) -> tuple[Path, VectorIndex] | None:
        older = sorted(
            (int(m["generation"]) for m in self._own_files() if m["view"] == view and m["part"] == "hnsw"),
            reverse=True,
        )
        for candidate in older:
            if candidate < generation and (vectors := self.load(candidate, view, dim)) is not None:
                return self._path(candidate, view, "hnsw"), vectors
        return None

    def _own_files(self) -> list[re.Match[str]]:
        try:
            names = os.listdir(self.folder)
        except OSError:
            return []
        return [m for name in names if (m := _NAME.match(name)) and m["store"] == self.store_id]

    def _remove_older(self, generation: int, view: str, *, keep_index: bool) -> None:
        """Remove the view's files of older generations (and of other stores that were at this
        path); with `keep_index`, the newest older index and its vectors stay until the current
        index is made from them."""
        try:
            names = os.listdir(self.folder)
        except OSError:
            return
        newest_index = max(
            (int(m["generation"]) for m in self._own_files() if m["view"] == view and m["part"] == "hnsw"
             and int(m["generation"]) < generation),
            default=None,
        )  # fmt: skip
        for name in names:
            match = _NAME.match(name)
            if match is None or match["view"] != view:
                continue
            other_store = match["store"] != self.store_id
            if other_store or int(match["generation"]) < generation:
                if keep_index and not other_store and int(match["generation"]) == newest_index:
                    continue
                with contextlib.suppress(OSError):
                    (self.folder / name).unlink()


class WrongDimension(ValueError):
    """Some stored vectors are not of the store's dimension."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} vectors of another dimension")
        self.count = count


def batches(fetch: Callable[[int], list[tuple[int, bytes]]], size: int = 4096) -> Iterable[list[tuple[int, bytes]]]:
    """A cursor's rows, `size` at a time."""
    while batch := fetch(size):
        yield batch
