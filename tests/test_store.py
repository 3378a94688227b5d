"""The SQLite store: file, schema, transactions, model bookkeeping and scope."""

from __future__ import annotations

import stat
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from memsearch.errors import (
    DuplicateKeyError,
    MemoryNotFoundError,
    ModelMismatchError,
    StoreCorruptError,
    StoreNotFoundError,
)
from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.store import Scope
from memsearch.store.migrations import SCHEMA_VERSION
from memsearch.store.sqlite import SQLiteStore
from memsearch.store.sqlite_driver import sqlite3
from memsearch.text import LexicalQuery
from tests.conftest import T0

MODEL = EmbeddingModelInfo("test-model", 3)


def vectors(n: int) -> np.ndarray:
    rows = np.random.default_rng(n).normal(size=(n, 3)).astype(np.float32)
    unit: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


@pytest.fixture
def store(db_path: Path) -> SQLiteStore:
    return SQLiteStore.open(db_path, create=True)


def test_new_store_is_private_wal_and_migrated(store: SQLiteStore, db_path: Path) -> None:
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(db_path.parent.stat().st_mode) == 0o700
    assert store.schema_version == SCHEMA_VERSION
    db = sqlite3.connect(db_path)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_missing_store_is_not_created_by_reads(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError, match="no memsearch store"):
        SQLiteStore.open(tmp_path / "nope.db")
    assert not (tmp_path / "nope.db").exists()


def test_garbage_file_and_foreign_database_are_refused(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreCorruptError):
        SQLiteStore.open(garbage)
    assert garbage.read_bytes() == b"this is not sqlite at all" * 100
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)")
    with pytest.raises(StoreCorruptError, match="another program"):
        SQLiteStore.open(foreign)


def test_reopening_keeps_data_and_schema(store: SQLiteStore, db_path: Path) -> None:
    store.insert([NewMemory("kept")], vectors(1), MODEL, T0)
    store.close()
    again = SQLiteStore.open(db_path)
    assert [m.text for m in again.list()] == ["kept"]
    assert again.schema_version == SCHEMA_VERSION


def test_insert_writes_memory_fts_and_vector_together(store: SQLiteStore) -> None:
    (memory_id,) = store.insert([NewMemory("alpha beta", tags=("greek",))], vectors(1), MODEL, T0)
    assert store.lexical_search(LexicalQuery.of('"greek"'), Scope(), 5)[0][0] == memory_id
    assert store.vector_index().ids.tolist() == [memory_id]
    memory = store.get(memory_id)
    assert memory.created_at == T0 and memory.last_accessed_at == T0 and memory.access_count == 0


def test_a_failing_batch_stores_nothing(store: SQLiteStore) -> None:
    store.insert([NewMemory("first", key="k1")], vectors(1), MODEL, T0)
    with pytest.raises(DuplicateKeyError, match="exists already"):
        store.insert([NewMemory("second"), NewMemory("third", key="k1")], vectors(2), MODEL, T0)
    assert [m.text for m in store.list()] == ["first"]
    assert store.lexical_search(LexicalQuery.of('"second"'), Scope(), 5) == []
    assert store.vector_count() == 1


def test_replace_rewrites_in_place(store: SQLiteStore) -> None:
    (first,) = store.insert([NewMemory("old text", key="k")], vectors(1), MODEL, T0)
    (second,) = store.insert([NewMemory("new text", key="k")], vectors(1), MODEL, T0, replace=True)
    assert first == second
    assert store.get_by_key("k").text == "new text"
    assert store.lexical_search(LexicalQuery.of('"old"'), Scope(), 5) == []
    assert store.vector_count() == 1


def test_models_are_never_mixed(store: SQLiteStore) -> None:
    store.insert([NewMemory("one")], vectors(1), MODEL, T0)
    other = EmbeddingModelInfo("other-model", 3)
    with pytest.raises(ModelMismatchError, match="vectors come from test-model"):
        store.insert([NewMemory("two")], vectors(1), other, T0)
    assert store.count() == 1
    store.replace_vectors([1], vectors(1), other)
    assert store.embedding_model() == other
    store.insert([NewMemory("two")], vectors(1), other, T0)


def test_delete_is_all_or_nothing_and_ids_are_not_reused(store: SQLiteStore) -> None:
    ids = store.insert([NewMemory("a"), NewMemory("b")], vectors(2), MODEL, T0)
    with pytest.raises(MemoryNotFoundError):
        store.delete([ids[0], 999])
    assert store.count() == 2
    store.delete([ids[1]])
    assert store.vector_index().ids.tolist() == [ids[0]]
    assert store.lexical_search(LexicalQuery.of('"b"'), Scope(), 5) == []
    (new_id,) = store.insert([NewMemory("c")], vectors(1), MODEL, T0)
    assert new_id > ids[1]


def test_vector_cache_follows_writes(store: SQLiteStore) -> None:
    store.insert([NewMemory("a")], vectors(1), MODEL, T0)
    first = store.vector_index()
    assert store.vector_index() is first  # cached while nothing changes
    store.insert([NewMemory("b")], vectors(1), MODEL, T0)
    assert store.vector_index().ids.size == 2


def test_scope_filters(store: SQLiteStore) -> None:
    store.insert(
        [
            NewMemory("deploy one", project="web", tags=("ops", "prod"), created_at=T0 - timedelta(days=10)),
            NewMemory("deploy two", project="api", namespace="team", tags=("ops",), created_at=T0),
        ],
        vectors(2),
        MODEL,
        T0,
    )

    def texts(scope: Scope) -> list[str]:
        return sorted(m.text for m in store.list(scope))

    assert texts(Scope(project="web")) == ["deploy one"]
    assert texts(Scope(namespace="team")) == ["deploy two"]
    assert texts(Scope(tags=("ops", "prod"))) == ["deploy one"]
    assert texts(Scope(since=T0 - timedelta(days=1))) == ["deploy two"]
    assert texts(Scope(until=T0 - timedelta(days=1))) == ["deploy one"]
    assert [i for i, _ in store.lexical_search(LexicalQuery.of('"deploy"'), Scope(project="api"), 5)] == [2]


def _match_queries(store: SQLiteStore) -> list[str]:
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    return statements


def test_lexical_legs_over_alike_views_run_one_query(store: SQLiteStore) -> None:
    """In a store of notes every lexical view holds the note's own text: the `context` and `prev`
    legs rank alike, so the second leg reuses the first's query."""
    store.insert([NewMemory("deploy the web app"), NewMemory("deploy notes")], vectors(2), MODEL, T0)
    statements = _match_queries(store)
    context = store.lexical_search(LexicalQuery.of("deploy web"), Scope(), 10, "context")
    prev = store.lexical_search(LexicalQuery.of("deploy web"), Scope(), 10, "prev")
    assert context == prev and len(context) == 2
    assert sum("MATCH" in s for s in statements) == 1


def test_lexical_views_that_differ_are_searched_apart(store: SQLiteStore, db_path: Path) -> None:
    store.insert([NewMemory("deploy notes")], vectors(1), MODEL, T0)
    store.insert([NewMemory("other", views={"context": "a deploy in context"})], vectors(1), MODEL, T0)
    assert [i for i, _ in store.lexical_search(LexicalQuery.of("context"), Scope(), 10, "context")] == [2]
    assert store.lexical_search(LexicalQuery.of("context"), Scope(), 10, "prev") == []
    # A store made before memsearch kept track is read once to know.
    sqlite3.connect(db_path).execute("DELETE FROM meta WHERE key = 'lexical_views'").connection.commit()
    reopened = SQLiteStore.open(db_path)
    assert reopened.lexical_search(LexicalQuery.of("context"), Scope(), 10, "prev") == []
    assert reopened._meta("lexical_views") == "differ"


def test_roles_follow_writes_of_another_process(store: SQLiteStore, db_path: Path) -> None:
    store.insert([NewMemory("hi", role="Ana", kind="turn", session="s1")], vectors(1), MODEL, T0)
    assert store.roles(Scope()) == ["Ana"]
    other = SQLiteStore.open(db_path)
    other.insert([NewMemory("hello", role="Ben", kind="turn", session="s1")], vectors(1), MODEL, T0)
    assert store.roles(Scope()) == ["Ana", "Ben"]


def test_the_cache_identity_another_process_made_during_a_search_is_read(store: SQLiteStore, db_path: Path) -> None:
    """A store last written without a cache identity gets one from its first reader; when another
    process records it first (its rows win: INSERT OR IGNORE), the search that began before must
    read the rows that are there, not the state it began with (it raised ValueError: fromhex)."""
    store.insert([NewMemory("first")], vectors(1), MODEL, T0)
    store._db.execute("DELETE FROM meta WHERE key IN ('store_id', 'cache_key')")
    with store.one_search():
        assert store._meta("store_id") is None  # the search's state: no identity yet
        other = sqlite3.connect(db_path)
        other.execute("INSERT INTO meta (key, value) VALUES ('store_id', 'abcd'), ('cache_key', 'ff00')")
        other.commit()
        other.close()
        assert store._cache_identity() == ("abcd", bytes.fromhex("ff00"))


def test_a_search_reads_the_stores_state_once(store: SQLiteStore, db_path: Path) -> None:
    """A search asks for the generation, the model and the pending count many times: inside
    one_search they are read by one statement, then again only after a write by this connection
    (a transaction reads its own); another connection's commit is seen by the next search."""
    store.insert([NewMemory("first")], vectors(1), MODEL, T0)
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)

    def state_reads() -> int:
        count = sum("FROM meta" in statement or "FROM pending_vectors" in statement for statement in statements)
        statements.clear()
        return count

    assert store.pending_count() == 0  # counted once a generation
    statements.clear()
    with store.one_search():
        first = store.generation()
        assert [store.generation() for _ in range(10)] == [first] * 10
        assert store.pending_count() == 0 and store.embedding_model() == MODEL
        assert state_reads() == 1
        store.insert([NewMemory("second")], None, None, T0)  # this connection writes: one waits for its vector
        state_reads()
        assert (store.generation(), store.pending_count()) == (first + 1, 1)
        assert (store.generation(), store.pending_count()) == (first + 1, 1)
        assert state_reads() == 2  # the meta rows, and the count of the new generation
        other = SQLiteStore.open(db_path)  # another connection commits
        other.insert([NewMemory("third")], vectors(1), MODEL, T0)
        other.close()
        assert store.generation() == first + 1  # within this search: as it began
        assert state_reads() == 0
    assert store.generation() == first + 2  # outside a search: read each time
    assert store.generation() == first + 2
    assert state_reads() == 2
    with store.one_search():
        assert store.generation() == first + 2
        with pytest.raises(RuntimeError), store.transaction():  # a write rolled back is never remembered
            store._bump_generation()
            assert store.generation() == first + 3
            raise RuntimeError("rolled back")
        assert store.generation() == first + 2


def test_the_pending_count_is_kept_until_the_next_write(db_path: Path) -> None:
    """Counted once a generation (a search asks each time); every write that changes which memories
    wait for vectors, here or in another store object, is seen by the next count."""
    from memsearch.store.base import FilledVectors

    reader = SQLiteStore.open(db_path, create=True)
    writer = SQLiteStore.open(db_path)
    ids = writer.insert([NewMemory(f"waiting {i}") for i in range(3)], None, None, T0)
    assert reader.pending_count() == 3
    counted: list[str] = []
    reader._db.set_trace_callback(lambda sql: counted.append(sql) if "pending_vectors" in sql else None)
    assert reader.pending_count() == 3 and counted == []  # the same generation: not counted again
    reader._db.set_trace_callback(None)
    writer.fill_vectors(MODEL, [FilledVectors(ids[0], "waiting 0", vectors(1)[0])])
    assert reader.pending_count() == 2
    writer.delete([ids[1]])
    assert reader.pending_count() == 1
    writer.insert([NewMemory("more")], None, None, T0)
    assert reader.pending_count() == 2
    writer.close()
    reader.close()
