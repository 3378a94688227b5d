"""The PostgreSQL store's BM25 engine on its own: a `Bm25` over any connection to a store's
database scores as FTS5 does (the SQLite store is the reference), counts phrases and documents,
and reads the scope it is given."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memsearch.models import NewMemory
from memsearch.store import EVERYTHING, Scope, open_store
from memsearch.text import LexicalQuery
from tests.conftest import T0

pytest.importorskip("psycopg")

NOTES = [
    NewMemory("the red apple and the green apple", project="fruit", tags=("orchard",)),
    NewMemory("a red car parked by the red door", project="city"),
    NewMemory("apple pie recipe: apples, butter, flour", project="fruit", tags=("kitchen",)),
    NewMemory("red apple red apple red apple", project="fruit"),
    NewMemory("部署密钥在保险库里", project="city"),
    NewMemory("nothing to see here", project="city", tags=("red",)),
]


@pytest.fixture
def databases(tmp_path: Path, pg_url: str) -> Iterator[tuple[object, object]]:
    """The same notes in a SQLite store (the reference) and a PostgreSQL store."""
    sqlite, postgres = open_store(tmp_path / "ref.db", create=True), open_store(pg_url, create=True)
    for store in (sqlite, postgres):
        store.insert(NOTES, None, None, T0)
    yield sqlite, postgres
    sqlite.close()
    postgres.close()


@pytest.fixture
def connection(databases: tuple[object, object], pg_url: str) -> Iterator[object]:
    """A connection of its own to the PostgreSQL store's database (not the store's)."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as connection:
        yield connection


@pytest.mark.parametrize("query", ["red apple", "apple", '"red apple"', "red door car", "密钥", "flour OR butter"])
@pytest.mark.parametrize("scope", [EVERYTHING, Scope(project="fruit"), Scope(tags=("red",))])
def test_bm25_over_a_connection_scores_as_fts5(
    databases: tuple[object, object], connection: object, query: str, scope: Scope
) -> None:
    from memsearch.store.postgres.bm25 import Bm25, query_phrases

    sqlite, _ = databases
    for limit in (1, 3, 10):
        expected = sqlite.lexical_search(LexicalQuery.of(query), scope, limit)  # type: ignore[attr-defined]
        found = Bm25(connection).search(query_phrases(LexicalQuery.of(query), None), scope, limit)  # type: ignore[arg-type]
        assert [i for i, _ in found] == [i for i, _ in expected], (query, scope, limit)
        assert np.allclose([s for _, s in found], [s for _, s in expected], rtol=0, atol=1e-9)
        assert found.engine == "exact"


def test_phrase_hits_count_each_occurrence_with_the_memorys_length(connection: object) -> None:
    from memsearch.store.fts import FTS_TOKENIZER
    from memsearch.store.postgres.bm25 import Bm25, columns_of

    hits = Bm25(connection).phrase_hits(FTS_TOKENIZER.phrase("red apple"), columns_of(None))  # type: ignore[arg-type]
    assert {memory_id: count for memory_id, (count, _) in hits.items()} == {1: 1, 4: 3}
    assert hits[4][1] == 18  # FTS5's D: six tokens in each of text, context and prev (a note is its own views)


def test_document_frequency_counts_in_scope_up_to_the_limit(connection: object) -> None:
    from memsearch.store.postgres.bm25 import Bm25

    bm25 = Bm25(connection)  # type: ignore[arg-type]
    assert bm25.document_frequency("red", EVERYTHING, 100) == 4  # three texts and one tag
    assert bm25.document_frequency("red", EVERYTHING, 2) == 2
    assert bm25.document_frequency("red", Scope(project="city"), 100) == 2
    assert bm25.document_frequency("red apple", EVERYTHING, 100) == 2
    assert bm25.document_frequency("", EVERYTHING, 100) == 0


def test_query_phrases_name_their_columns_and_refuse_an_unknown_view() -> None:
    from memsearch.store.fts import FTS_COLUMNS, GRAM_COLUMNS
    from memsearch.store.postgres.bm25 import query_phrases

    words = query_phrases(LexicalQuery.of('red "green apple"'), None)
    assert {("red",), ("green", "appl")} <= {tokens for tokens, _ in words}  # stemmed, as FTS5's porter
    assert all(columns == [FTS_COLUMNS.index("text"), FTS_COLUMNS.index("tags")] for _, columns in words)
    columns = [
        columns for _, columns in query_phrases(LexicalQuery.of("密钥"), "context")
    ]  # the view's words, and its grams
    assert columns == [[FTS_COLUMNS.index("context")], [FTS_COLUMNS.index(GRAM_COLUMNS["context"])]]
    with pytest.raises(ValueError, match="no full-text view"):
        query_phrases(LexicalQuery.of("red"), "nowhere")
