"""The vector cache of a SQLite store: each view's ids and vectors as .npy files that a search
process memory-maps instead of reading every vector out of SQLite (~0.3 s for 100k), and, for a
large view, its approximate index (memsearch.store.ann).

Where (`cache_place`): beside the store, in `STORE.vectors/`, when the store's folder is one other
users cannot change entries of (theirs to write only if sticky) and `STORE.vectors/` is the
user's own folder that no one else may write; else in a private folder of the cache dir (one
line says why when a `STORE.vectors/` is there but not trusted: someone else may have made it).

What is read back: every file is named by the store's id and generation (which every write
moves on), so a file is only ever used for the state of the store it was made from. When a file
is written, its keyed digest (BLAKE3, keyed by a secret kept in the store, which only its owner
can read) is recorded in the store (`CacheLedger`); a file is used only when it is a regular file
of the user's that no one else may write, opened without following links, and its digest is the
one recorded: a planted, replaced, stale (an older generation's under this name, a restored
store) or damaged file is made again. The file is mapped from the descriptor that was checked.

Files are written under a temporary name and renamed, so a reader sees a whole file or none;
files of older generations are removed once the current one is written (a process that still
maps one keeps reading it: unlinking does not unmap).
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

from memsearch.paths import cache_dir, file_problem, folder_problem, make_private_dirs, own_folder_problem
from memsearch.store.ann import AnnIndex, build_index, open_index, private_temporary
from memsearch.store.vectors import VectorIndex

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

_NAME = re.compile(r"^(?P<store>[0-9a-f]+)-g(?P<generation>\d+)-(?P<view>[\w-]+)\.(?P<part>ids\.npy|f32\.npy|hnsw)$")


def cache_folder(store_path: Path) -> Path:
    """The cache folder beside the store (used when it can be trusted, see `cache_place`)."""
    return store_path.with_name(f"{store_path.name}.vectors")


def private_cache_folder(store_path: Path) -> Path:
    """The store's cache folder in the user's cache dir, under a hash of the store's path."""
    import hashlib  # hashlib and hmac start OpenSSL: imported by what uses them, not by every search

    digest = hashlib.sha256(str(store_path.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return cache_dir() / "vectors" / digest


def _claim(folder: Path) -> str | None:
    """Make `folder` (owner-only) if missing; why it is not the user's own private folder, or None."""
    try:
        make_private_dirs(folder)
    except OSError as error:
        return f"cannot make {folder}: {error.strerror or error}"
    return own_folder_problem(folder)


def cache_place(store_path: Path) -> Path | None:
    """The folder for the store's cache files: beside the store when it can be trusted, else a
    private folder in the cache dir; None (vectors are read out of the store) when neither can."""
    beside = cache_folder(store_path)
    problem = folder_problem(store_path.parent)  # another user could swap STORE.vectors/ for theirs
    if problem is None and (problem := _claim(beside)) is None:
        return beside
    private = private_cache_folder(store_path)
    private_problem = _claim(private) or folder_problem(private.parent)
    if os.path.lexists(beside) and own_folder_problem(beside) is not None:  # made by someone else?
        instead = f"using {private}" if private_problem is None else "reading vectors from the store"
        log.warning("not using %s for the vector cache: %s; %s", beside, problem, instead)
    else:
        log.debug("vector cache not beside the store (%s)", problem)
    if private_problem is not None:
        log.warning("vector cache not used: %s", private_problem)
        return None
    return private


class CacheLedger(Protocol):
    """The store's records of its cache files: each file's keyed digest, recorded when written."""

    @property
    def key(self) -> bytes:
        """The digest's key: a secret kept in the store."""

    def recorded(self, name: str) -> str | None:
        """The digest recorded for the file `name`, if any."""

    def record(self, name: str, digest: str | None) -> None:
        """Record the file's digest (None: forget the file)."""


class VectorCache:
    """The cache files of one store (`store_id`) in `folder` (a trusted place, see `cache_place`),
    each checked against `ledger` when read back."""

    def __init__(self, folder: Path, store_id: str, ledger: CacheLedger) -> None:
        self.folder = folder
        self.store_id = store_id
        self.ledger = ledger

    def _path(self, generation: int, view: str, part: str) -> Path:
        return self.folder / f"{self.store_id}-g{generation}-{view}.{part}"

    @contextlib.contextmanager
    def _opened(self, path: Path, *, expected: str | None) -> Iterator[tuple[BinaryIO, str] | None]:
        """The file at `path` and its digest, when it is a regular file of the user's that no one
        else may write and (with `expected`) its digest is that one; else None."""
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:  # missing, or a symbolic link
            yield None
            return
        with os.fdopen(descriptor, "rb") as handle:
            info = os.fstat(descriptor)
            problem = file_problem(path, info) if stat.S_ISREG(info.st_mode) else f"{path} is not a regular file"
            if problem is None and info.st_size == 0:
                problem = f"{path} is empty"
            digest = "" if problem is not None else self._digest(descriptor)
            import hmac

            if problem is None and expected is not None and not hmac.compare_digest(digest, expected):
                problem = f"{path} does not hold what the store recorded"
            if problem is not None:
                log.debug("vector cache file not used: %s", problem)
                yield None
            else:
                yield handle, digest

    def _digest(self, descriptor: int) -> str:
        import blake3

        with mmap.mmap(descriptor, 0, access=mmap.ACCESS_READ) as mapped:
            return str(blake3.blake3(mapped, key=self.ledger.key, max_threads=blake3.blake3.AUTO).hexdigest())

    def _map(self, path: Path, expected: str | None) -> tuple[np.ndarray, str] | None:
        """The .npy file at `path` memory-mapped, and its digest (see `_opened`)."""
        import numpy as np

        with self._opened(path, expected=expected) as opened:
            if opened is None:
                return None
            handle, digest = opened
            try:
                npy = np.lib.format
                version = npy.read_magic(handle)
                read_header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
                shape, fortran_order, dtype = read_header(handle)
                if fortran_order:
                    return None
                return np.memmap(handle, dtype=dtype, mode="r", offset=handle.tell(), shape=shape), digest
            except (OSError, ValueError):  # cut short or not an .npy file: made again
                return None

    def load(self, generation: int, view: str, dim: int) -> VectorIndex | None:
        """The view's vectors of this generation, memory-mapped; None if not (wholly) there as recorded."""
        mapped = []
        for part in ("ids.npy", "f32.npy"):
            path = self._path(generation, view, part)
            expected = self.ledger.recorded(path.name)
            if expected is None or (found := self._map(path, expected)) is None:
                return None
            mapped.append(found[0])
        return _vector_index(mapped[0], mapped[1], dim)

    def write(
        self, generation: int, view: str, dim: int, count: int, batches: Iterable[list[tuple[int, bytes]]]
    ) -> VectorIndex:
        """Write the view's `count` (id, float32 bytes) rows, in id order, and map them. The rows
        stream into the file a batch at a time: a process never holds the matrix twice."""
        import numpy as np

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
        mapped = []
        for path in (ids_path, matrix_path):
            found = self._map(path, None)
            if found is None:
                raise OSError(f"the vector cache just written in {self.folder} does not read back")
            mapped.append(found[0])
            self.ledger.record(path.name, found[1])
        loaded = _vector_index(mapped[0], mapped[1], dim)
        if loaded is None:
            raise OSError(f"the vector cache just written in {self.folder} does not read back")
        self._remove_older(generation, view, keep_index=True)
        return loaded

    @contextlib.contextmanager
    def _verified_index(self, path: Path) -> Iterator[Path | None]:
        """A path to the index file at `path` as recorded in the store (see `_opened`), valid in
        the block: on Linux the checked descriptor's own (/proc/self/fd/N), so the library maps
        the very file that was checked; None when there is no such file."""
        expected = self.ledger.recorded(path.name)
        if expected is None:
            yield None
            return
        with self._opened(path, expected=expected) as opened:
            if opened is None:
                yield None
            else:
                by_descriptor = Path(f"/proc/self/fd/{opened[0].fileno()}")
                yield by_descriptor if by_descriptor.exists() else path

    def index(
        self, generation: int, view: str, vectors: VectorIndex, progress: Callable[[int, int], None] | None = None
    ) -> AnnIndex:
        """The view's approximate index of this generation: mapped if saved, else updated from the
        newest saved generation's (when its vectors are still there to compare), else built
        (`progress` gets (vectors added, vectors to add) while it is)."""
        path = self._path(generation, view, "hnsw")
        with self._verified_index(path) as verified:
            opened = open_index(verified, vectors.ids) if verified is not None else None
        if opened is not None:
            return opened
        with self._previous_index(generation, view, vectors.matrix.shape[1]) as previous:
            log.info("building the approximate vector index of %s (%d vectors)", self.folder, vectors.ids.size)
            built = build_index(path, vectors, previous, progress)
        # The digest of what is at the name now. Two processes building this generation's index at
        # once may leave the record naming the other's file: the next process rebuilds, nothing worse.
        with self._opened(path, expected=None) as written:
            if written is None:
                raise OSError(f"the vector index just written at {path} does not read back")
            self.ledger.record(path.name, written[1])
        self._remove_older(generation, view, keep_index=False)
        return built

    @contextlib.contextmanager
    def _previous_index(self, generation: int, view: str, dim: int) -> Iterator[tuple[Path, VectorIndex] | None]:
        older = sorted(
            (int(m["generation"]) for m in self._own_files() if m["view"] == view and m["part"] == "hnsw"),
            reverse=True,
        )
        for candidate in older:
            if candidate < generation and (vectors := self.load(candidate, view, dim)) is not None:
                with self._verified_index(self._path(candidate, view, "hnsw")) as verified:
                    if verified is not None:
                        yield verified, vectors
                        return
        yield None

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
                if not other_store:
                    self.ledger.record(name, None)


def _vector_index(ids: np.ndarray, matrix: np.ndarray, dim: int) -> VectorIndex | None:
    """The pair as a VectorIndex, if they are what the cache writes (int64 ids, float32 rows of `dim`)."""
    import numpy as np

    if ids.dtype != np.int64 or ids.ndim != 1 or matrix.dtype != np.float32 or matrix.shape != (ids.size, dim):
        return None
    return VectorIndex(ids=ids, matrix=matrix)


class WrongDimension(ValueError):
    """Some stored vectors are not of the store's dimension."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} vectors of another dimension")
        self.count = count


def batches(fetch: Callable[[int], list[tuple[int, bytes]]], size: int = 4096) -> Iterable[list[tuple[int, bytes]]]:
    """A cursor's rows, `size` at a time."""
    while batch := fetch(size):
        yield batch
