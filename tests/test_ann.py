"""Vector search at scale in the SQLite store: the memory-mapped vector cache beside the store and
the approximate index (usearch) that answers large scopes. Both are tied to the store's id and
generation: never stale, rebuilt when missing or damaged, exact where they should be."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.store import Scope
from memsearch.store.ann import index_library_available
from memsearch.store.sqlite import SQLiteStore
from memsearch.store.vector_cache import cache_folder
from memsearch.store.vectors import vector_top
from tests.conftest import T0

DIM = 16
MODEL = EmbeddingModelInfo("test-model", DIM)


def unit_rows(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    unit: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


def filled(path: Path, n: int, seed: int = 1) -> SQLiteStore:
    store = SQLiteStore.open(path, create=True)
    memories = [NewMemory(f"memory {i}", project="small" if i % 10 == 0 else "large") for i in range(n)]
    store.insert(memories, unit_rows(n, seed), MODEL, T0)
    return store


def exact(store: SQLiteStore, query: np.ndarray, scope: Scope, limit: int) -> list[tuple[int, float]]:
    """The reference: every vector in scope scored."""
    index = store.vector_index()
    mask = store._scope_mask(index, scope)
    return vector_top(index, query, limit, mask)


def close_to_exact(store: SQLiteStore, hits: list[tuple[int, float]], query: np.ndarray, limit: int) -> bool:
    """What an approximate search must give: exact scores in order, and nearly every one of the
    exact search's memories (an HNSW graph may leave a node out of reach: its recall is measured
    by bench/bench.py --million)."""
    reference = exact(store, query, Scope(), limit)
    scores = dict(exact(store, query, Scope(), store.count()))
    in_order = [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    scored = all(abs(scores[i] - s) < 1e-6 for i, s in hits)
    found = len({i for i, _ in hits} & {i for i, _ in reference})
    return in_order and scored and len(hits) == len(reference) and found >= 0.8 * len(reference)


def cache_files(path: Path, suffix: str) -> list[Path]:
    return sorted(cache_folder(path).glob(f"*{suffix}"))


# -- the vector cache (no index library needed) -----------------------------------------------


def test_a_fresh_process_maps_the_vectors_written_by_the_first(db_path: Path) -> None:
    filled(db_path, 50).close()
    first = SQLiteStore.open(db_path)
    matrix = first.vector_index().matrix
    assert isinstance(matrix, np.memmap)  # written beside the store, then mapped
    assert len(cache_files(db_path, ".f32.npy")) == 1
    written = cache_files(db_path, ".f32.npy")[0].stat().st_mtime_ns
    second = SQLiteStore.open(db_path)
    assert np.array_equal(second.vector_index().matrix, matrix)
    assert cache_files(db_path, ".f32.npy")[0].stat().st_mtime_ns == written  # mapped, not written again
    assert cache_files(db_path, ".f32.npy")[0].stat().st_mode & 0o077 == 0  # private, as the store


def test_a_view_without_vectors_of_its_own_shares_the_memories_matrix(db_path: Path) -> None:
    store = filled(db_path, 20)
    assert store.vector_index("context") is store.vector_index()


@pytest.mark.parametrize("damage", ["missing", "truncated", "garbage", "wrong shape"])
def test_a_missing_or_damaged_cache_file_is_written_again(db_path: Path, damage: str) -> None:
    filled(db_path, 30).close()
    expected = SQLiteStore.open(db_path).vector_index()
    reference = (expected.ids.copy(), np.array(expected.matrix))
    del expected
    for file in cache_files(db_path, ".npy"):
        if damage == "missing":
            file.unlink()
        elif damage == "truncated":
            file.write_bytes(file.read_bytes()[:100])
        elif damage == "garbage":
            file.write_bytes(b"not an npy file" * 10)
        else:
            np.save(file.open("wb"), np.zeros((3, 2), np.float32))
    index = SQLiteStore.open(db_path).vector_index()
    assert np.array_equal(index.ids, reference[0])
    assert np.array_equal(index.matrix, reference[1])


def _replace_keeping_identity(file: Path, content: bytes) -> None:
    """Put `content` in place of `file` as the user could (same name, owner and mode)."""
    replacement = file.with_name(file.name + ".new")
    replacement.write_bytes(content)
    replacement.chmod(0o600)
    replacement.replace(file)


@pytest.mark.parametrize("planted", ["other vectors", "an older generation's files"])
def test_a_cache_file_that_does_not_hold_what_the_store_recorded_is_not_read(db_path: Path, planted: str) -> None:
    """Well-formed files of the right shape under the right names are still not the store's:
    each file's digest, recorded in the store when it was written, must match."""
    store = filled(db_path, 40)
    store.vector_index()
    older = {file.name.split("-", 2)[2]: file.read_bytes() for file in cache_files(db_path, ".npy")}
    store.delete([1])
    store.close()
    reference = SQLiteStore.open(db_path).vector_index()  # writes the newer generation's files
    expected = (reference.ids.copy(), np.array(reference.matrix))
    del reference
    for file in cache_files(db_path, ".npy"):
        if planted == "other vectors" and file.name.endswith(".f32.npy"):
            buffer = io.BytesIO()
            np.save(buffer, -expected[1])
            _replace_keeping_identity(file, buffer.getvalue())
        elif planted != "other vectors":  # ids and rows of 40 memories, the deleted one among them
            _replace_keeping_identity(file, older[file.name.split("-", 2)[2]])
    fresh = SQLiteStore.open(db_path).vector_index()
    assert np.array_equal(fresh.ids, expected[0]) and np.array_equal(fresh.matrix, expected[1])
    assert [np.load(file).shape[0] for file in cache_files(db_path, ".npy")] == [39, 39]  # written again


def test_the_cache_follows_writes_of_another_process(db_path: Path) -> None:
    store = filled(db_path, 20)
    before = store.vector_index()
    other = SQLiteStore.open(db_path)
    (added,) = other.insert([NewMemory("new one")], unit_rows(1, 99), MODEL, T0)
    other.delete([int(before.ids[0])])
    other.close()
    after = store.vector_index()
    assert added in after.ids.tolist() and int(before.ids[0]) not in after.ids.tolist()
    assert len(cache_files(db_path, ".f32.npy")) == 1  # the older generation's file is gone


def test_a_read_only_store_reads_its_vectors_without_a_cache(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    filled(db_path, 10).close()
    monkeypatch.setenv("MEMSEARCH_READ_ONLY", "1")
    store = SQLiteStore.open(db_path)
    assert store.read_only
    assert store.vector_index().ids.size == 10
    assert not cache_folder(db_path).exists()


# -- the approximate index --------------------------------------------------------------------


def test_the_index_library_and_the_encoder_load_in_either_order() -> None:
    """usearch 2.26 made a process that imports onnxruntime after it crash."""
    for first, second in (("usearch.index", "onnxruntime"), ("onnxruntime", "usearch.index")):
        if index_library_available():  # (which imports onnxruntime first itself)
            done = subprocess.run([sys.executable, "-c", f"import {first}; import {second}"], check=False, timeout=120)
            assert done.returncode == 0, f"importing {second} after {first} failed ({done.returncode})"


needs_index = pytest.mark.skipif(not index_library_available(), reason="usearch is not installed")


@needs_index
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(1, 120),
    limit=st.integers(1, 40),
    seed=st.integers(0, 10_000),
    project=st.sampled_from([None, "small", "large"]),
)
def test_search_equals_exact_search_below_the_threshold_and_in_small_scopes(
    tmp_path_factory: pytest.TempPathFactory, n: int, limit: int, seed: int, project: str | None
) -> None:
    store = filled(tmp_path_factory.mktemp("ann") / "store.db", n, seed)
    scope = Scope(project=project)
    query = unit_rows(1, seed + 1)[0]
    in_scope = store.count(scope)
    store.ann_threshold = n + 1  # below the threshold: exact
    below = store.vector_search(query, scope, limit)
    assert below.engine == "exact" and below == exact(store, query, scope, limit)
    store.ann_threshold = max(1, in_scope + 1)  # a scope smaller than the threshold: exact
    small = store.vector_search(query, scope, limit)
    assert small.engine == "exact" and small == below
    if not in_scope:
        return
    store.ann_threshold = 1  # through the index: candidates from the graph, each scored exactly
    through = store.vector_search(query, scope, limit)
    if through.engine == "exact":  # the graph gave fewer than asked for: exact search answered
        assert through == below
        return
    assert len(through) == len(below)
    index = store.vector_index()
    rows = {int(i): row for row, i in enumerate(index.ids)}
    assert all(s == pytest.approx(float(index.matrix[rows[i]] @ query), abs=1e-6) for i, s in through)
    assert [s for _, s in through] == sorted((s for _, s in through), reverse=True)
    assert all(store.get(i).project == project for i, _ in through if project)


@needs_index
def test_the_index_is_never_stale_after_writes_of_another_process(db_path: Path) -> None:
    store = filled(db_path, 200)
    store.ann_threshold = 100
    query = unit_rows(1, 5)[0]
    assert store.vector_search(query, Scope(), 10).engine == "index"
    assert len(cache_files(db_path, ".hnsw")) == 1
    best = store.vector_search(query, Scope(), 1)[0][0]
    script = f"""
import numpy as np
from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.store.sqlite import SQLiteStore
from tests.conftest import T0
from pathlib import Path
store = SQLiteStore.open(Path({str(db_path)!r}))
query = np.asarray({query.tolist()!r}, np.float32)
store.delete([{best}])
store.insert([NewMemory("closest")], query[None, :], EmbeddingModelInfo("test-model", {DIM}), T0)
store.insert([NewMemory("memory 3", key=None)], -query[None, :], EmbeddingModelInfo("test-model", {DIM}), T0)
"""
    subprocess.run([sys.executable, "-c", script], check=True, cwd=Path(__file__).parent.parent, timeout=120)
    hits = store.vector_search(query, Scope(), 10)
    assert hits.engine == "index"
    assert close_to_exact(store, hits, query, 10)
    assert best not in [i for i, _ in hits] and hits[0][1] == pytest.approx(1.0)
    assert len(cache_files(db_path, ".hnsw")) == 1  # updated into the new generation's file


@needs_index
def test_a_replaced_memory_is_found_by_its_new_vector(db_path: Path) -> None:
    store = SQLiteStore.open(db_path, create=True)
    rows = unit_rows(150, 3)
    store.insert([NewMemory(f"m{i}", key=f"k{i}") for i in range(150)], rows, MODEL, T0)
    store.ann_threshold = 100
    query = unit_rows(1, 8)[0]
    store.vector_search(query, Scope(), 5)
    (replaced,) = store.insert([NewMemory("m7 again", key="k7")], query[None, :], MODEL, T0, replace=True)
    hits = store.vector_search(query, Scope(), 5)
    assert hits.engine == "index" and hits[0][0] == replaced and close_to_exact(store, hits, query, 5)


@needs_index
@pytest.mark.parametrize("damage", ["missing", "garbage", "truncated", "another index"])
def test_a_missing_damaged_or_unrecorded_index_is_rebuilt_not_an_error(db_path: Path, damage: str) -> None:
    """ "another index": a readable index over the same ids built from other vectors (one that
    could hide the nearest memories from a search), in place of the store's, is not used either."""
    store = filled(db_path, 150)
    store.ann_threshold = 100
    query = unit_rows(1, 4)[0]
    assert store.vector_search(query, Scope(), 10).engine == "index"
    store.close()
    (index_file,) = cache_files(db_path, ".hnsw")
    if damage == "missing":
        index_file.unlink()
    elif damage == "garbage":
        index_file.write_bytes(b"\x00garbage" * 1000)
    elif damage == "truncated":
        index_file.write_bytes(index_file.read_bytes()[:1000])
    else:
        from usearch.index import Index

        planted = Index(ndim=DIM, metric="ip", dtype="f16")
        planted.add(np.arange(1, 151, dtype=np.uint64), unit_rows(150, 999))
        planted.save(str(index_file.with_name("planted")))
        _replace_keeping_identity(index_file, index_file.with_name("planted").read_bytes())
    planted_bytes = index_file.read_bytes() if index_file.exists() else b""
    fresh = SQLiteStore.open(db_path)
    fresh.ann_threshold = 100
    hits = fresh.vector_search(query, Scope(), 10)
    assert hits.engine == "index" and close_to_exact(fresh, hits, query, 10)
    assert index_file.read_bytes() != planted_bytes  # built again


@needs_index
def test_health_says_whether_an_index_serves(db_path: Path) -> None:
    store = filled(db_path, 30)
    assert not store.health().ann_index
    store.ann_threshold = 10
    assert store.health().ann_index


def test_a_memory_has_one_cosine_however_its_vector_is_scored(db_path: Path) -> None:
    """The candidates' cosines are the vector leg's scores to the last bit, whether the leg scored
    every row (and the cosines reuse them) or not, and an approximate search's scores are the
    exact search's: a row's score does not depend on the rows scored with it (a BLAS product of
    a subset of rows rounded ~2 % of them otherwise)."""
    dim = 384  # as the default model's: a BLAS kernel's blocks differ from a toy width's
    rows = np.random.default_rng(5).normal(size=(3000, dim)).astype(np.float32)
    store = SQLiteStore.open(db_path, create=True)
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    store.insert([NewMemory(f"memory {i}") for i in range(len(rows))], unit, EmbeddingModelInfo("test-model", dim), T0)
    pick = np.random.default_rng(6)
    for seed in range(12):
        query = np.random.default_rng(100 + seed).normal(size=dim).astype(np.float32)
        query /= np.linalg.norm(query)
        size = int(pick.integers(1, 120))  # a block of rows and a tail of any length
        ids = sorted(int(i) for i in pick.choice(np.arange(1, len(rows) + 1), size, replace=False))
        fresh = store.cosines(query, ids)  # before any leg scored this query: the rows' own scores
        every = dict(store.vector_search(query, Scope(), None))  # every row scored, ranked
        assert fresh == {i: every[i] for i in ids}
        assert store.cosines(query, ids) == fresh  # now from the leg's scores
        if index_library_available():
            store.ann_threshold = 100
            through = store.vector_search(query, Scope(), 20)
            store.ann_threshold = 10**9
            assert through.engine == "index" and all(score == every[i] for i, score in through)
