"""CJK and emoji (issue 8, item 6): a word inside a CJK run is found lexically, a symbol-only
query goes to both legs and finds the note with the symbol, on both stores, and stores of the
schema before the `grams` column migrate."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.embedding import Encoder
from memsearch.models import NewMemory
from memsearch.retrieval.request import SearchRequest
from memsearch.retrieval.routing import route_features, route_query
from memsearch.store import EVERYTHING, open_store
from memsearch.store.fts import FTS_COLUMNS, GRAM_COLUMNS
from memsearch.store.sqlite_driver import sqlite3
from memsearch.text import LexicalQuery, gram_terms
from tests.conftest import T0

NOTES = [
    NewMemory("部署密钥在团队保险库中，由运维组负责轮换。", key="zh"),
    NewMemory("デプロイキーはチームの金庫にあります。", key="ja"),
    NewMemory("🚀 launch checklist: freeze, tag, announce", key="rocket"),
    NewMemory("The deploy key lives in the team vault under ops/deploy", key="en"),
    NewMemory("Lunch on Friday at the noodle place", key="lunch", tags=("🍜",)),
]
QUERIES = ["密钥", "保险库", "金庫", "🚀", "🍜", "deploy key", "密钥 deploy", "🚀 launch"]


def test_gram_terms_are_cjk_bigrams_and_symbols_and_nothing_for_english() -> None:
    assert gram_terms("部署密钥") == ["部署", "署密", "密钥"]
    assert gram_terms("键 ok") == ["键"]
    assert gram_terms("ship it 🚀✓") == ["u1f680", "u2713"]
    assert gram_terms("The deploy key, v2.3 -- done! (100%) [x] ${arr[@]}") == []


def test_routing_sends_a_symbol_only_query_to_both_legs() -> None:
    route = route_query(route_features("🚀"))
    assert route.strategy == "hybrid" and "🚀" in route.reason
    assert route_query(route_features("the")).strategy == "vector"


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_cjk_substrings_and_emoji_are_found(
    store_kind: str, db_path: Path, encoder: Encoder, request: pytest.FixtureRequest
) -> None:
    location = db_path if store_kind == "sqlite" else request.getfixturevalue("pg_url")
    with Memsearch(location, encoder=encoder) as ms:
        ms.add_many(NOTES)
        keys = {m.id: m.key for m in ms.list()}

        def top(query: str, mode: str) -> str | None:
            results = ms.search(SearchRequest(query, k=3, mode=mode, touch=False)).results
            return keys[results[0].id] if results else None

        assert top("密钥", "lexical") == "zh"
        assert top("保险库", "lexical") == "zh"
        assert top("金庫", "lexical") == "ja"
        assert top("🚀", "lexical") == "rocket"
        assert (
            ms.store().lexical_search(LexicalQuery.of("🍜"), EVERYTHING, 3)[0][0] == ms.get("lunch").id
        )  # a tag's symbol
        for mode in ("auto", "hybrid"):
            assert top("🚀", mode) == "rocket", mode
            assert top("密钥", mode) == "zh", mode
        outcome = ms.search(SearchRequest("🚀", touch=False))
        assert outcome.route.strategy == "hybrid"
        assert top("deploy key", "lexical") == "en"


def test_cjk_and_emoji_rank_alike_in_both_stores(tmp_path: Path, pg_url: str) -> None:
    stores = [open_store(tmp_path / "twin.db", create=True), open_store(pg_url, create=True)]
    for store in stores:
        store.insert(NOTES, None, None, T0)
    sqlite, postgres = stores
    for query in QUERIES:
        expected = sqlite.lexical_search(LexicalQuery.of(query), EVERYTHING, 10)
        found = postgres.lexical_search(LexicalQuery.of(query), EVERYTHING, 10)
        assert expected, query
        assert [i for i, _ in found] == [i for i, _ in expected], query
        assert [s for _, s in found] == pytest.approx([s for _, s in expected], abs=1e-9), query
    for store in stores:
        store.close()


def test_an_sqlite_store_before_the_grams_column_migrates(db_path: Path) -> None:
    store = open_store(db_path, create=True)
    store.insert(NOTES, None, None, T0)
    expected = {q: store.lexical_search(LexicalQuery.of(q), EVERYTHING, 10) for q in QUERIES}
    store.close()
    old = sqlite3.connect(db_path, isolation_level=None)  # the full-text table of schema 4
    old.executescript(
        "BEGIN;"
        "CREATE VIRTUAL TABLE old_fts USING fts5 (text, tags, context, prev, "
        "tokenize = 'porter unicode61 remove_diacritics 2');"
        "INSERT INTO old_fts (rowid, text, tags, context, prev) SELECT rowid, text, tags, context, prev "
        "FROM memories_fts;"
        "DROP TABLE memories_fts; ALTER TABLE old_fts RENAME TO memories_fts; PRAGMA user_version = 4; COMMIT;"
    )
    assert old.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH '\"密钥\"'").fetchone() == (0,)
    old.close()
    store = open_store(db_path)
    assert store.schema_version >= 5  # type: ignore[attr-defined]
    assert {q: store.lexical_search(LexicalQuery.of(q), EVERYTHING, 10) for q in QUERIES} == expected
    store.close()


def test_a_postgres_store_before_the_grams_column_migrates(pg_url: str) -> None:
    import psycopg

    store = open_store(pg_url, create=True)
    store.insert(NOTES, None, None, T0)
    expected = {q: store.lexical_search(LexicalQuery.of(q), EVERYTHING, 10) for q in QUERIES}
    store.close()
    grams = [FTS_COLUMNS.index(name) for name in GRAM_COLUMNS.values()]
    with psycopg.connect(pg_url, autocommit=True) as old:  # what schema 1 held: no postings of the grams column
        old.execute(
            "UPDATE memories m SET fts_length = fts_length - coalesce((SELECT sum(cardinality(positions)) "
            "FROM postings p WHERE p.memory_id = m.id AND p.col = ANY(%s)), 0)",
            (grams,),
        )
        old.execute(
            "UPDATE fts_totals SET tokens = CASE WHEN shard = 0 THEN (SELECT sum(fts_length) FROM memories) ELSE 0 END"
        )
        old.execute("DELETE FROM postings WHERE col = ANY(%s)", (grams,))
        old.execute("DELETE FROM memsearch_schema WHERE version > 1")
    store = open_store(pg_url)
    found = {q: store.lexical_search(LexicalQuery.of(q), EVERYTHING, 10) for q in QUERIES}
    assert {q: [i for i, _ in hits] for q, hits in found.items()} == {q: [i for i, _ in h] for q, h in expected.items()}
    for query, hits in found.items():
        assert [s for _, s in hits] == pytest.approx([s for _, s in expected[query]], abs=1e-9)
    store.close()
