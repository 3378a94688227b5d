"""The impact index of a large SQLite store's full text (memsearch/store/lexical_index.py, kept
as lexical_cache.py says): FTS5's answers to the last bit, for the store's current state only,
from a file that is the store's own (its threshold forced low here)."""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.store import Scope, lexical_cache
from memsearch.store.base import EVERYTHING, Rewrite
from memsearch.store.lexical_cache import LexicalCache
from memsearch.store.lexical_delta import CHANGES_FROM
from memsearch.store.sqlite import SQLiteStore
from memsearch.store.vector_cache import cache_folder
from memsearch.text import LexicalQuery
from tests.conftest import T0

DIM = 8
MODEL = EmbeddingModelInfo("test-model", DIM)
WORDS = (  # noqa: SIM905 - a word list reads best as words
    "deploy config service retry queue worker billing auth token cache redis postgres migration timeout "
    "error crash fixed rollback release staging production monitor alert latency memory leak index search "
    "vector import export schema backup restore cluster node pod kubernetes docker image build pipeline"
).split()
QUERIES = (
    "deploy config", "retry queue worker", "billing auth_service", '"redis cache" timeout', "deploying deployed",
    "the", "nothing-matches-this zzz", "crash crash fixed", "postgres_migration rollback", "index search vector",
    "kubernetes pod node cluster docker image", "memory leak", "alert", "auth token",
)  # fmt: skip


def texts(n: int, seed: int) -> list[NewMemory]:
    """Memories of words drawn unevenly (a few common words, many rare), some joined by `_`."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(WORDS))]
    memories = []
    for i in range(n):
        words = rng.choices(WORDS, weights, k=rng.randint(3, 25))
        if rng.random() < 0.3:
            words.append(f"{rng.choice(WORDS)}_{rng.choice(WORDS)}")
        tags = tuple(rng.sample(WORDS[:8], rng.randint(0, 2)))
        kind_project = "ops" if i % 3 == 0 else "dev"
        memories.append(NewMemory(" ".join(words), tags=tags, project=kind_project))
    return memories


def vectors(n: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    unit: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


def filled(path: Path, n: int = 300, seed: int = 1) -> SQLiteStore:
    store = SQLiteStore.open(path, create=True)
    store.insert(texts(n, seed), vectors(n, seed), MODEL, T0)
    store.lexical_threshold = 1
    return store


def same_answer(got: list[tuple[int, float]], want: list[tuple[int, float]]) -> bool:
    """The same ids in the same order, equal scores by id as FTS5's query orders them, and the
    same scores to the last bits."""
    return [memory_id for memory_id, _ in got] == [memory_id for memory_id, _ in want] and all(
        a == b for (_, a), (_, b) in zip(got, want, strict=True)
    )


def fts5(
    store: SQLiteStore, query: str, scope: Scope = EVERYTHING, k: int = 10, view: str | None = None
) -> list[tuple[int, float]]:
    return store.lexical._fts5_query(LexicalQuery.of(query), scope, k, view)


def searched_once(store: SQLiteStore, view: str | None = None) -> None:
    """A first search (FTS5 answers it: there is no file yet), and the file it asks for made in the
    background, waited for (an event, with a timeout)."""
    hits = store.lexical_search(LexicalQuery.of("deploy"), Scope(), 10, view)
    assert same_answer(list(hits), fts5(store, "deploy", view=view))
    assert store.wait_for_impact_builds(60)


def impact_files(path: Path) -> list[Path]:
    return sorted(cache_folder(path).glob("*.impact"))


@pytest.mark.parametrize("k", [1, 5, 10, 50])
def test_the_index_gives_fts5s_answers(db_path: Path, k: int) -> None:
    store = filled(db_path)
    searched_once(store)
    for query in QUERIES:
        hits = store.lexical_search(LexicalQuery.of(query), Scope(), k)
        want = fts5(store, query, k=k)
        assert same_answer(list(hits), want), query
        assert hits.engine == "exact"  # FTS5's top k, as FTS5 would answer
    assert store._impact[None][1] is not None  # answered by the index
    assert len(impact_files(db_path)) == 1


@pytest.mark.parametrize("differ", [False, True])
def test_the_lexical_views_legs_are_answered_too(db_path: Path, differ: bool) -> None:
    """The legs over a lexical view's column (context, prev): one index for every view while the
    views hold the memories' own text, one a view once they differ."""
    store = filled(db_path)
    if differ:
        rng = random.Random(3)
        turns = [
            NewMemory(f"{w} said", views={"context": f"{w} deploy queue", "prev": f"{w} retry worker"})
            for w in rng.choices(WORDS, k=40)
        ]
        store.insert(turns, vectors(40, 5), MODEL, T0)
    for view in ("context", "prev"):
        for query in QUERIES:
            hits = store.lexical_search(LexicalQuery.of(query), Scope(), 10, view)
            assert same_answer(list(hits), fts5(store, query, view=view if differ else "context")), (view, query)
    assert store.wait_for_impact_builds(60)  # asked for by the first searches, made in the background
    assert len(impact_files(db_path)) == (2 if differ else 1)


@pytest.mark.parametrize("scope", [Scope(project="ops"), Scope(kinds=("note",)), Scope(tags=("deploy",))])
def test_a_scope_is_answered_as_fts5_answers_it(db_path: Path, scope: Scope) -> None:
    store = filled(db_path)
    for query in QUERIES:
        hits = store.lexical_search(LexicalQuery.of(query), scope, 10)
        assert same_answer(list(hits), fts5(store, query, scope)), query
        assert all(scope.admits(store.get(memory_id)) for memory_id, _ in hits)


def test_below_the_threshold_fts5_answers_and_no_file_is_made(db_path: Path) -> None:
    store = filled(db_path)
    store.lexical_threshold = 301
    hits = store.lexical_search(LexicalQuery.of("deploy config"), Scope(), 10)
    assert hits == fts5(store, "deploy config")
    assert store._impact[None][1] is None
    assert impact_files(db_path) == []


def test_every_write_is_seen_by_the_next_search(db_path: Path) -> None:
    """Adding, deleting and editing memories (here and in another process's store object): the
    next search answers for the store as it is now, and only the current generation's file stays."""
    store = filled(db_path)
    query = "zebra deploy"
    searched_once(store)
    other = SQLiteStore.open(db_path)
    (added,) = other.insert([NewMemory("zebra zebra deploy")], vectors(1, 7), MODEL, T0)
    hits = store.lexical_search(LexicalQuery.of(query), Scope(), 10)
    assert hits[0][0] == added and same_answer(list(hits), fts5(store, query))
    edited = int(hits[1][0])
    other.rewrite([Rewrite(edited, "zebra zebra zebra crossing", {}, vectors(1, 8)[0], {})])
    hits = store.lexical_search(LexicalQuery.of(query), Scope(), 10)
    assert edited in {i for i, _ in hits[:2]} and same_answer(list(hits), fts5(store, query))
    other.delete([added])
    hits = store.lexical_search(LexicalQuery.of(query), Scope(), 10)
    assert added not in {i for i, _ in hits} and same_answer(list(hits), fts5(store, query))
    other.update(edited, {"tags": ["zebra"]})
    hits = store.lexical_search(LexicalQuery.of("zebra"), Scope(), 10)
    assert same_answer(list(hits), fts5(store, "zebra"))
    other.close()
    files = impact_files(db_path)  # the first file stays: the rows written since are searched beside it
    assert len(files) == 1 and "-g1-" in files[0].name and store.generation() > 1
    assert files[0].stat().st_mode & 0o077 == 0  # private, as the store


@contextlib.contextmanager
def _every_change_rebuilds(searching: bool = False) -> Iterator[None]:
    """A bulk write's end (or, `searching`, a search too) makes a new file after any change."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lexical_cache, "_FEWEST_CHANGES", 0)
        patch.setattr(lexical_cache, "REBUILD_SHARE", 0.0)
        if searching:
            patch.setattr(lexical_cache, "SEARCH_REBUILD_SHARE", 0.0)
        yield


def _replace_keeping_identity(file: Path, content: bytes) -> None:
    replacement = file.with_name(file.name + ".new")
    replacement.write_bytes(content)
    replacement.chmod(0o600)
    replacement.replace(file)


@pytest.mark.parametrize("planted", ["an older generation's file", "garbage", "a link"])
def test_a_file_the_store_did_not_record_is_not_used(db_path: Path, planted: str) -> None:
    """A well-formed index of another state of the store under the current name (or a damaged
    file, or a link) is not read: its digest is not the one recorded; the index is built again."""
    store = filled(db_path)
    searched_once(store)
    older = impact_files(db_path)[0].read_bytes()
    store.delete([1, 2, 3])
    store.close()
    fresh = SQLiteStore.open(db_path)
    fresh.lexical_threshold = 1
    with _every_change_rebuilds():
        fresh.prepare_search_indexes()  # writes this generation's file
    current = next(file for file in impact_files(db_path) if "-fts-text-tags" in file.name)
    assert f"-g{fresh.generation()}-" in current.name
    fresh.close()
    if planted == "an older generation's file":
        _replace_keeping_identity(current, older)
    elif planted == "garbage":
        _replace_keeping_identity(current, b"MSLEX001" + b"\xff" * 200)
    else:
        target = current.with_name("elsewhere")
        target.write_bytes(older)
        current.unlink()
        current.symlink_to(target)
    store = SQLiteStore.open(db_path)
    store.lexical_threshold = 1
    hits = store.lexical_search(LexicalQuery.of("deploy"), Scope(), 50)
    assert {1, 2, 3}.isdisjoint(i for i, _ in hits)
    assert same_answer(list(hits), fts5(store, "deploy", k=50))
    assert store.wait_for_impact_builds(60)  # FTS5 answered; the file asked for is made in the background
    assert not current.is_symlink() and current.read_bytes() != older  # built again


def test_a_read_only_store_asks_fts5(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    filled(db_path).close()
    monkeypatch.setenv("MEMSEARCH_READ_ONLY", "1")
    store = SQLiteStore.open(db_path)
    assert store.read_only
    store.lexical_threshold = 1
    hits = store.lexical_search(LexicalQuery.of("deploy config"), Scope(), 10)
    assert hits == fts5(store, "deploy config")
    assert store._impact[None][1] is None
    assert not cache_folder(db_path).exists()


def test_the_file_round_trips(db_path: Path) -> None:
    store = filled(db_path, 50)
    files = store._files()
    assert files is not None
    index = LexicalCache(files).build(store.generation(), store._db)
    store._cache_records.flush()
    again = LexicalCache(files).load(store.generation())
    assert again is not None
    for name in ("ids", "lengths", "starts", "rows", "counts", "vocabulary"):
        assert np.array_equal(getattr(index, name), getattr(again, name))


def test_the_index_is_on_from_a_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """On from DEFAULT_THRESHOLD memories (where it beats FTS5's bm25 with the changed rows
    searched beside the file); MEMSEARCH_LEXICAL_THRESHOLD names another size, 0 turns it off."""
    from memsearch.store.lexical_cache import lexical_threshold

    monkeypatch.delenv("MEMSEARCH_LEXICAL_THRESHOLD", raising=False)
    assert lexical_threshold() == 50_000
    monkeypatch.setenv("MEMSEARCH_LEXICAL_THRESHOLD", "200000")
    assert lexical_threshold() == 200_000
    monkeypatch.setenv("MEMSEARCH_LEXICAL_THRESHOLD", "0")
    assert lexical_threshold() == 0


def test_a_process_with_numpy_loaded_uses_the_index_from_a_smaller_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the default threshold, from WARM_THRESHOLD rows once numpy is loaded (a hybrid
    search, a server): the index's import is paid. A fresh shell's lexical search, numpy not
    loaded, keeps FTS5 below the default; a threshold named by hand (or 0) is kept as named."""
    from memsearch.store.lexical_cache import DEFAULT_THRESHOLD, WARM_THRESHOLD, index_wanted

    assert WARM_THRESHOLD == 10_000
    assert index_wanted(WARM_THRESHOLD, DEFAULT_THRESHOLD)  # numpy: loaded by this module
    assert not index_wanted(WARM_THRESHOLD - 1, DEFAULT_THRESHOLD)
    assert index_wanted(DEFAULT_THRESHOLD, DEFAULT_THRESHOLD)
    assert not index_wanted(WARM_THRESHOLD, 0)
    assert not index_wanted(DEFAULT_THRESHOLD * 10, 0)
    assert not index_wanted(WARM_THRESHOLD, 20_000)  # a size named: that size
    assert index_wanted(20_000, 20_000)
    monkeypatch.delitem(sys.modules, "numpy")  # only looked up, never imported again here
    assert not index_wanted(WARM_THRESHOLD, DEFAULT_THRESHOLD)
    assert index_wanted(DEFAULT_THRESHOLD, DEFAULT_THRESHOLD)


def test_a_store_over_the_warm_size_searches_through_the_index(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's own default threshold, with WARM_THRESHOLD lowered to this store's size: its
    lexical legs go through the index (and its bulk write's end makes the file), FTS5's answers."""
    monkeypatch.setattr(lexical_cache, "WARM_THRESHOLD", 300)
    store = filled(db_path)
    store.lexical_threshold = lexical_cache.DEFAULT_THRESHOLD
    assert store.prepare_impact_indexes() >= 1
    for query in QUERIES:
        hits = store.lexical_search(LexicalQuery.of(query), Scope(), 10)
        assert same_answer(list(hits), fts5(store, query)), query
    assert store._impact[None][1] is not None  # answered by the index


def test_a_search_tokenizes_the_query_once(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The query's phrases are FTS5's tokens, found by a statement on the tokenizer's own table:
    once a search through the index (they were found twice: to pick the parts, then to answer)."""
    from memsearch.store.fts import FTS_TOKENIZER

    store = filled(db_path)
    searched_once(store)  # the file made
    calls: list[object] = []
    phrases = FTS_TOKENIZER.phrases

    def counted(texts: list[str]) -> list[tuple[str, ...]]:
        calls.append(texts)
        return phrases(texts)

    monkeypatch.setattr(FTS_TOKENIZER, "phrases", counted)
    hits = store.lexical_search(LexicalQuery.of("retry worker"), Scope(), 10)
    assert same_answer(list(hits), fts5(store, "retry worker"))
    assert store._impact[None][1] is not None  # answered by the index
    assert len(calls) == 1


# -- the rows changed since the file: searched beside it, never disagreeing with FTS5 ----------------

_OPS = st.lists(
    st.tuples(st.sampled_from(["add", "add-long", "delete", "delete-many", "rewrite", "retag", "rebuild"]),
              st.integers(0, 2**31)),
    min_size=1,
    max_size=12,
)  # fmt: skip


def _words(rng: random.Random, low: int, high: int) -> str:
    weights = [1.0 / (rank + 1) for rank in range(len(WORDS))]
    words = rng.choices(WORDS, weights, k=rng.randint(low, high))
    if rng.random() < 0.3:
        words.append(f"{rng.choice(WORDS)}_{rng.choice(WORDS)}")
    return " ".join(words)


def _apply(writer: SQLiteStore, op: str, seed: int) -> None:
    """One write of the writer's (another store object, as another process)."""
    rng = random.Random(seed)
    ids = [memory.id for memory in writer.list()]
    if op in ("add", "add-long"):
        text = _words(rng, 1, 200) if op == "add-long" else "zebra " + _words(rng, 1, 12)
        writer.insert(
            [NewMemory(text, tags=tuple(rng.sample(WORDS[:8], rng.randint(0, 2))))], vectors(1, seed), MODEL, T0
        )
    elif op == "delete" and ids:
        writer.delete([rng.choice(ids)])
    elif op == "delete-many" and ids:
        writer.delete(rng.sample(ids, min(len(ids), 15)))
    elif op == "rewrite" and ids:
        writer.rewrite([Rewrite(rng.choice(ids), _words(rng, 1, 30), {}, vectors(1, seed)[0], {})])
    elif op == "retag" and ids:
        writer.update(rng.choice(ids), {"tags": rng.sample(WORDS, 2)})
    elif op == "rebuild":
        with _every_change_rebuilds():
            assert writer.prepare_search_indexes() == 0  # (vectors: none indexed)
        assert writer._db.execute("SELECT count(*) FROM lexical_changes").fetchone()[0] == 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, seed=st.integers(0, 1000))
def test_after_any_writes_the_answers_are_fts5s(
    tmp_path_factory: pytest.TempPathFactory, ops: list[Any], seed: int
) -> None:
    """Random adds (some long: the average length moves), deletes (one, or many: the row count and
    every token's idf move), rewrites, retags and remakes of the file, by another store object:
    after each, the searcher's answers over its first file and the rows changed since are FTS5's
    (scores to the last bits, ids in the same order), for every query, k and scope."""
    path = tmp_path_factory.mktemp("writes") / "store" / "memsearch.db"
    store = filled(path, 80, seed)
    searched_once(store)  # the file of the first generation
    writer = SQLiteStore.open(path)
    writer.lexical_threshold = 1
    try:
        for op, number in ops:
            _apply(writer, op, number)
            for i, query in enumerate((*QUERIES, "zebra", "zebra deploy crash")):
                k = (1, 5, 20)[i % 3]
                scope = Scope(project="ops") if i % 4 == 0 else Scope()
                view = "context" if i % 5 == 1 else None  # a view leg's file (the views hold the text)
                hits = store.lexical_search(LexicalQuery.of(query), scope, k, view)
                assert same_answer(list(hits), fts5(store, query, scope, k, view)), (op, query, k, view)
            (rows,) = writer._db.execute("SELECT count(*) FROM memories").fetchone()
            assert store._impact[None][1] is not None or rows == 0  # answered through the index (none for no rows)
    finally:
        writer.close()
        store.close()


def test_a_single_write_is_searched_beside_the_file_not_rebuilt(db_path: Path) -> None:
    store = filled(db_path)
    searched_once(store)
    (first,) = impact_files(db_path)
    store.insert([NewMemory("zebra zebra")], vectors(1, 3), MODEL, T0)
    store.delete([5])
    hits = store.lexical_search(LexicalQuery.of("zebra deploy"), Scope(), 10)
    assert same_answer(list(hits), fts5(store, "zebra deploy"))
    assert impact_files(db_path) == [first]
    current = store._impact[None][1]
    assert current is not None and current.base_generation == 1 and current.changed.size == 2


def test_a_search_asks_for_a_new_file_when_the_changed_rows_are_too_many(db_path: Path) -> None:
    """Made in the background (tests/test_impact_builds.py: what the searches answer meanwhile)."""
    store = filled(db_path)
    searched_once(store)
    store.insert([NewMemory("zebra zebra")], vectors(1, 3), MODEL, T0)
    with _every_change_rebuilds(searching=True):
        hits = store.lexical_search(LexicalQuery.of("zebra"), Scope(), 10)
        assert store.wait_for_impact_builds(60)
    assert same_answer(list(hits), fts5(store, "zebra"))
    generation = store.generation()
    (file,) = impact_files(db_path)
    assert f"-g{generation}-" in file.name
    # The log keeps only what the new file does not hold; older files cannot be brought up to date.
    assert store._db.execute("SELECT count(*) FROM lexical_changes").fetchone()[0] == 0
    assert store._meta(CHANGES_FROM) == str(generation)


def test_a_bulk_writes_end_makes_a_new_file_over_the_share(db_path: Path) -> None:
    """The files of text and tags and of the view legs (one for all views while they hold the same
    text): kept while the changed rows are few, made anew over the share, progress told."""
    store = filled(db_path)
    for view in (None, "context"):
        searched_once(store, view)
    store.insert([NewMemory("zebra zebra")], vectors(1, 3), MODEL, T0)
    told: list[tuple[int, int]] = []
    assert store.prepare_impact_indexes(lambda done, total: told.append((done, total))) == 0  # 1 changed: kept
    assert all("-g1-" in file.name for file in impact_files(db_path)) and told == []
    with _every_change_rebuilds():
        assert store.prepare_impact_indexes(lambda done, total: told.append((done, total))) == 2
    assert told == [(0, 301), (301, 301)] * 2
    files = impact_files(db_path)
    assert len(files) == 2 and all(f"-g{store.generation()}-" in file.name for file in files)


def test_a_bulk_writes_end_makes_the_first_file_of_a_large_store(db_path: Path) -> None:
    store = filled(db_path)
    assert impact_files(db_path) == []
    store.prepare_search_indexes()
    assert len(impact_files(db_path)) == 2  # text and tags; the views (alike)
    store.lexical_threshold = 1000
    store.insert([NewMemory("zebra")], vectors(1, 3), MODEL, T0)
    assert store.prepare_search_indexes() == 0  # below the threshold: nothing made


def test_a_file_older_than_the_log_reaches_is_not_brought_up_to_date(db_path: Path) -> None:
    """A searcher holding the first file while another process writes twice and makes a new file
    (the log's older entries dropped): it takes the new file, and misses none of the writes."""
    store = filled(db_path)
    searched_once(store)
    writer = SQLiteStore.open(db_path)
    writer.lexical_threshold = 1
    added = [writer.insert([NewMemory(f"zebra zebra {w}")], vectors(1, 3), MODEL, T0)[0] for w in ("one", "two")]
    with _every_change_rebuilds():
        writer.prepare_search_indexes()
    writer.close()
    hits = store.lexical_search(LexicalQuery.of("zebra"), Scope(), 10)
    assert {i for i, _ in hits} == set(added) and same_answer(list(hits), fts5(store, "zebra"))
    current = store._impact[None][1]
    assert current is not None and current.base_generation == store.generation() and current.changed.size == 0


def test_a_write_the_log_missed_is_noticed_and_the_file_made_again(db_path: Path) -> None:
    """A full-text row removed without its log entry (as a writer that does not keep the log would):
    the counts FTS5 keeps do not add up, so the file is made anew rather than read."""
    store = filled(db_path)
    searched_once(store)
    store._write(lambda db: db.execute("DELETE FROM memories_fts WHERE rowid = 7"))
    hits = store.lexical_search(LexicalQuery.of("deploy config"), Scope(), 50)
    assert 7 not in {i for i, _ in hits} and same_answer(list(hits), fts5(store, "deploy config", k=50))
    assert store.wait_for_impact_builds(60)  # FTS5 answered; the file is made anew in the background
    (file,) = impact_files(db_path)
    assert f"-g{store.generation()}-" in file.name


def test_the_change_log_is_written_with_each_write(db_path: Path) -> None:
    store = filled(db_path, 5)
    start = store.generation()
    store.delete([2])
    store.rewrite([Rewrite(3, "new text", {}, vectors(1, 1)[0], {})])
    rows = dict(store._db.execute("SELECT memory_id, generation FROM lexical_changes").fetchall())
    assert rows[2] == start and rows[3] == start + 1 and rows[1] == 0  # the generation each write began at


def test_a_new_file_of_one_leg_keeps_the_log_another_legs_file_needs(db_path: Path) -> None:
    """Text and tags' file made anew by a search while the view leg's file is older: the log keeps
    what the older file needs, so the view leg is still answered from it and the changes."""
    store = filled(db_path)
    for view in (None, "context"):
        searched_once(store, view)
    store.insert([NewMemory("zebra zebra")], vectors(1, 3), MODEL, T0)
    with _every_change_rebuilds(searching=True):
        store.lexical_search(LexicalQuery.of("zebra"), Scope(), 10)
        assert store.wait_for_impact_builds(60)
    names = sorted(file.name for file in impact_files(db_path))
    assert "-g1-fts-context" in names[0] and f"-g{store.generation()}-fts-text-tags" in names[1]
    hits = store.lexical_search(LexicalQuery.of("zebra deploy"), Scope(), 10, "context")
    assert same_answer(list(hits), fts5(store, "zebra deploy", view="context"))
    current = store._impact["context"][1]
    assert current is not None and current.base_generation == 1 and current.changed.size == 1


def test_the_log_of_a_store_without_a_file_is_kept_short(db_path: Path) -> None:
    """Below the threshold no file is made, and a bulk write's end drops the log's entries once
    they are more than a search would keep beside a file."""
    store = filled(db_path)
    store.lexical_threshold = 0
    assert store._db.execute("SELECT count(*) FROM lexical_changes").fetchone()[0] == 300
    with _every_change_rebuilds(searching=True):
        assert store.prepare_search_indexes() == 0
    assert store._db.execute("SELECT count(*) FROM lexical_changes").fetchone()[0] == 0
    assert store._meta(CHANGES_FROM) == str(store.generation())
    assert impact_files(db_path) == []
