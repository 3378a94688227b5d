"""The store as parts (issue 31): the `Store` protocol is its capabilities, each method in exactly
one of them; both backends implement each; a new backend is one row of `BACKENDS`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.store import BACKENDS, Backend, Store, open_store
from memsearch.store.base import (
    CAPABILITIES,
    IndexState,
    LexicalIndex,
    MemoryRows,
    ModelVectors,
    OwnVectors,
    SearchBackend,
    WholeStore,
)
from tests.conftest import T0

MODEL = EmbeddingModelInfo("test-model", 3)


def members(protocol: type) -> set[str]:
    """The methods and attributes a protocol and the protocols it extends declare."""
    found: set[str] = set()
    for cls in protocol.__mro__:
        if cls is object or not getattr(cls, "_is_protocol", False) or cls.__module__ == "typing":
            continue
        found |= {name for name in vars(cls) if not name.startswith("_")} | set(vars(cls).get("__annotations__", {}))
    return found


def test_every_method_of_the_store_is_in_exactly_one_capability() -> None:
    assert (MemoryRows, LexicalIndex, OwnVectors, ModelVectors, IndexState, WholeStore) == CAPABILITIES
    seen: dict[str, str] = {}
    for capability in CAPABILITIES:
        for name in members(capability):
            assert name not in seen, f"{name} is in {seen[name]} and {capability.__name__}"
            seen[name] = capability.__name__
    search_only = members(SearchBackend) - set(seen)
    assert search_only == {"parallel_reads", "one_search"}  # of a search as a whole
    assert set(seen) | search_only == members(Store)


def test_the_search_reads_are_parts_of_the_capabilities() -> None:
    reads = members(SearchBackend) - {"parallel_reads", "one_search"}
    assert members(LexicalIndex) <= reads
    assert {"count", "get_many", "around"} <= reads & members(MemoryRows)
    assert {"vector_search", "cosines"} <= reads & members(OwnVectors)
    assert "extra_models" in reads & members(ModelVectors)
    assert not reads & (members(IndexState) | members(WholeStore))


def test_each_backend_implements_each_capability(store_location: Path | str) -> None:
    store = open_store(store_location, create=True)
    try:
        for capability in (*CAPABILITIES, SearchBackend, Store):
            missing = sorted(name for name in members(capability) if not hasattr(store, name))
            assert not missing, f"{type(store).__name__} lacks {capability.__name__}: {missing}"
            assert isinstance(store, capability)
    finally:
        store.close()


def test_each_store_holds_its_lexical_index_and_other_models_as_parts(store_location: Path | str) -> None:
    """The full-text index (`store.lexical`) and the other models' vectors (`store.models`) are
    objects the store holds, not base classes it inherits from; the store's methods are the parts'."""
    store = open_store(store_location, create=True)
    try:
        lexical = getattr(store, "lexical", None)
        assert isinstance(lexical, LexicalIndex)
        assert type(lexical) not in type(store).__mro__
        assert store.lexical_search == lexical.lexical_search
        assert store.word_documents == lexical.word_documents
        models = getattr(store, "models", None)
        assert isinstance(models, ModelVectors) and type(models) not in type(store).__mro__
        assert store.add_model_vectors == models.add_model_vectors
    finally:
        store.close()


def test_a_backend_is_one_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A location the row accepts opens through it; every other one as before."""
    opened: list[tuple[Path | str, bool]] = []
    sqlite = BACKENDS[-1]

    def open_memory(location: Path | str, create: bool) -> Store:
        opened.append((location, create))
        return sqlite.open(tmp_path / "memory.db", create)

    accepts = lambda location: str(location).startswith("memory://")  # noqa: E731
    monkeypatch.setattr("memsearch.store.BACKENDS", [Backend("memory", accepts, open_memory), *BACKENDS])
    open_store("memory://notes", create=True).close()
    assert opened == [("memory://notes", True)]
    open_store(tmp_path / "other.db", create=True).close()
    assert opened == [("memory://notes", True)] and (tmp_path / "other.db").exists()


def test_the_postgres_store_holds_its_vector_reads_as_a_part(pg_url: str) -> None:
    from memsearch.store.postgres import PostgresStore
    from memsearch.store.postgres.vectors import PgVectorSearch

    assert PgVectorSearch not in PostgresStore.__mro__
    store = PostgresStore.open(pg_url, create=True)
    try:
        assert isinstance(store.own_vectors, PgVectorSearch)
        assert store.vector_search == store.own_vectors.vector_search
        assert store.nearest == store.own_vectors.nearest
    finally:
        store.close()


def test_only_a_missing_postgres_extra_is_said_as_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing psycopg is the postgres extra to install; any other ImportError on the way is
    memsearch's own and is not disguised as one."""
    import sys

    from memsearch.errors import StoreNotFoundError

    psycopg = pytest.importorskip("psycopg")
    for name in [name for name in sys.modules if name.startswith("memsearch.store.postgres")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreNotFoundError, match="postgres extra"):
        open_store("postgresql://localhost/none")
    monkeypatch.setitem(sys.modules, "psycopg", psycopg)
    monkeypatch.setitem(sys.modules, "memsearch.store.postgres.lexical", None)
    with pytest.raises(ImportError) as raised:
        open_store("postgresql://localhost/none")
    assert not isinstance(raised.value, StoreNotFoundError) and raised.value.name == "memsearch.store.postgres.lexical"


def test_a_search_reads_the_stores_own_state_in_one_statement(
    store_location: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both stores: inside one_search the meta values (the model, the other models) and the
    pending count are one statement, read again after a write of this store's; outside, as asked."""
    store = open_store(store_location, create=True)
    try:
        store.insert([NewMemory("first")], np.ones((1, 3), np.float32) / np.sqrt(3), MODEL, T0)
        statements: list[str] = []
        connection = type(store)._db  # type: ignore[attr-defined]  # both stores have one

        class Counting:
            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def execute(self, sql: Any, *args: Any, **kwargs: Any) -> Any:
                statements.append(str(sql))
                return self.inner.execute(sql, *args, **kwargs)

            def __getattr__(self, name: str) -> Any:
                return getattr(self.inner, name)

        monkeypatch.setattr(type(store), "_db", property(lambda self: Counting(connection.fget(self))))

        def state_reads() -> tuple[int, int]:
            """Statements that read the meta rows, and those that count the waiting memories
            (PostgreSQL's one statement does both; SQLite keeps the count a generation)."""
            found = (sum("meta" in sql for sql in statements), sum("pending_vectors" in sql for sql in statements))
            statements.clear()
            return found

        with store.one_search():
            for _ in range(5):
                assert store.embedding_model() == MODEL
                assert store.pending_count() == 0
                assert store.extra_models() == []
            meta, counts = state_reads()
            assert meta == 1 and counts <= 1
            store.insert([NewMemory("second")], None, None, T0)  # waits for its vector
            state_reads()
            assert [store.pending_count() for _ in range(3)] == [1, 1, 1]
            assert store.embedding_model() == MODEL
            meta, counts = state_reads()
            assert meta == 1 and counts <= 1
        assert [store.embedding_model() for _ in range(2)] == [MODEL, MODEL]
        assert state_reads()[0] == 2
    finally:
        store.close()
