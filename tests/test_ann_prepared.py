"""The approximate vector index of a large SQLite store is made by the bulk write that makes it
due (`index`, `import`, `reindex`, `copy`), in the writing process, never by the next search;
a single `add` leaves it to the next search, which updates it (cheap). Thresholds are forced low
with MEMSEARCH_ANN_THRESHOLD."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memsearch.api import Memsearch
from memsearch.embedding.base import Progress
from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.retrieval.pipeline import SearchRequest
from memsearch.store import Scope, ann
from memsearch.store import vector_cache as vector_cache_module
from memsearch.store.ann import index_library_available
from memsearch.store.sqlite import SQLiteStore
from memsearch.store.vector_cache import cache_folder
from memsearch.store.vectors import vector_top
from tests.conftest import T0

pytestmark = pytest.mark.skipif(not index_library_available(), reason="the index library is not installed")

DIM = 16
THRESHOLD = 30
BULK = 300  # over the threshold, and over the pool a vector leg asks for (fewer: it searches exactly)


class HashEncoder:
    """A unit vector a text, from its hash (no model runs)."""

    info = EmbeddingModelInfo("hash-test-model", DIM)

    def encode(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        rows = np.stack(
            [np.random.default_rng(zlib.crc32(text.encode())).normal(size=DIM).astype(np.float32) for text in texts]
        ) if texts else np.zeros((0, DIM), np.float32)  # fmt: skip
        if progress is not None:
            progress(len(texts), len(texts))
        unit: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        return unit


@pytest.fixture(autouse=True)
def low_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSEARCH_ANN_THRESHOLD", str(THRESHOLD))


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each index build or update (True: from a previous generation's index), counted by wrapping."""
    made: list[bool] = []
    real = ann.build_index

    def counted(path: Path, current: Any, previous: Any = None, progress: Any = None) -> Any:
        made.append(previous is not None)
        return real(path, current, previous, progress)

    monkeypatch.setattr(vector_cache_module, "build_index", counted)
    return made


def jsonl(count: int, start: int = 0) -> str:
    return "\n".join(
        json.dumps({"text": f"memory number {i} about topic {i % 7}"}) for i in range(start, start + count)
    )


def current_index(path: Path) -> list[Path]:
    """The index files of the store's current generation whose digest the store recorded."""
    store = SQLiteStore.open(path)
    try:
        generation = store.generation()
        recorded = [
            file
            for file in cache_folder(path).glob(f"*-g{generation}-*.hnsw")
            if store._meta(f"cache_file:{file.name}") is not None
        ]
    finally:
        store.close()
    return recorded


@pytest.fixture
def ms(db_path: Path) -> Iterator[Memsearch]:
    with Memsearch(db_path, encoder=HashEncoder()) as instance:
        yield instance


def searched(ms: Memsearch, query: str) -> Any:
    return ms.search(SearchRequest(query, k=5, mode="vector", touch=False))


def test_an_import_over_the_threshold_leaves_a_current_index_and_the_search_builds_none(
    ms: Memsearch, db_path: Path, builds: list[bool]
) -> None:
    reports: list[tuple[int, int]] = []
    ms.import_text(jsonl(BULK), source="bulk.jsonl", progress=lambda done, total: reports.append((done, total)))
    assert builds == [False]  # made by the import, in this process
    assert len(current_index(db_path)) == 1  # beside the store, recorded, of the generation the import left
    assert reports[-1] == (BULK, BULK)  # the index's progress followed the embedding's
    with Memsearch(db_path, encoder=HashEncoder()) as fresh:  # the next process's search maps it
        outcome = searched(fresh, "memory number 3 about topic 3")
    assert set(outcome.vector_engines.values()) == {"index"}
    assert builds == [False]


def test_an_import_below_the_threshold_makes_no_index(ms: Memsearch, db_path: Path, builds: list[bool]) -> None:
    ms.import_text(jsonl(THRESHOLD - 5), source="small.jsonl")
    assert builds == [] and current_index(db_path) == []


def test_a_single_add_is_left_to_the_next_search_which_updates_the_index_exactly_rescored(
    ms: Memsearch, db_path: Path, builds: list[bool]
) -> None:
    ms.import_text(jsonl(BULK), source="bulk.jsonl")
    ms.add(NewMemory("a single new memory about gardening"))
    assert builds == [False]  # the add made none
    outcome = searched(ms, "a single new memory about gardening")
    assert builds == [False, True]  # the search updated the previous generation's index
    assert set(outcome.vector_engines.values()) == {"index"}
    store = ms.store()
    assert isinstance(store, SQLiteStore)
    query = HashEncoder().encode(["a single new memory about gardening"])[0]
    hits = store.vector_search(query, Scope(), 5)
    assert hits.engine == "index"
    reference = vector_top(store.vector_index(), query, 5)
    assert [(i, round(s, 6)) for i, s in hits] == [(i, round(s, 6)) for i, s in reference]  # scored exactly


def test_reindex_and_copy_leave_a_current_index(ms: Memsearch, db_path: Path, builds: list[bool]) -> None:
    ms.import_text(jsonl(BULK), source="bulk.jsonl")
    ms.reindex()
    assert len(current_index(db_path)) == 1
    copy = db_path.with_name("copy.db")
    ms.copy_to(copy)
    assert len(current_index(copy)) == 1
    made = len(builds)
    with Memsearch(copy, encoder=HashEncoder()) as copied:
        assert set(searched(copied, "memory number 5 about topic 5").vector_engines.values()) == {"index"}
    assert len(builds) == made


def test_index_of_notes_over_the_threshold_builds_the_index_with_a_progress_phase(
    ms: Memsearch, db_path: Path, tmp_path: Path, builds: list[bool]
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for n in range(BULK):
        (folder / f"note{n}.md").write_text(f"# Note {n}\n\nSomething about topic {n} and more.\n", encoding="utf-8")
    phases: list[str] = []
    ms.index([folder], on_progress=lambda event: phases.append(event.phase))
    assert "search index" in phases and phases.index("search index") > phases.index("vectors")
    assert phases[-1] == "done"
    assert builds == [False] and len(current_index(db_path)) == 1
    assert set(searched(ms, "Something about topic 4").vector_engines.values()) == {"index"}
    assert builds == [False]


def test_a_store_below_the_threshold_or_postgres_prepares_nothing(db_path: Path, builds: list[bool]) -> None:
    store = SQLiteStore.open(db_path, create=True)
    store.insert([NewMemory(f"m {i}") for i in range(5)], HashEncoder().encode([f"m {i}" for i in range(5)]),
                 HashEncoder.info, T0)  # fmt: skip
    assert store.prepare_search_indexes() == 0
    assert builds == []
    store.close()
