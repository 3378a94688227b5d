"""The store as parts (issue 31): the `Store` protocol is its capabilities, each method in exactly
one of them; both backends implement each; a new backend is one row of `BACKENDS`."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    assert search_only == {"parallel_reads"}
    assert set(seen) | search_only == members(Store)


def test_the_search_reads_are_parts_of_the_capabilities() -> None:
    reads = members(SearchBackend) - {"parallel_reads"}
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
