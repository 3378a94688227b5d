"""Searches through the library with the real bundled model."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.embedding import Encoder
from memsearch.errors import InvalidInputError, ModelMismatchError
from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.retrieval.request import SearchRequest
from memsearch.store import Scope
from tests.conftest import T0

NOTES = [
    NewMemory("Fixed null-deref when JWT was malformed in the auth middleware", tags=("auth", "bug")),
    NewMemory("parseConfig crashes on an empty YAML file; added a guard", tags=("config",), project="cli"),
    NewMemory("We deploy the web app on Tuesdays, never on Fridays", project="web"),
    NewMemory("Alice prefers dark roast coffee and oat milk", tags=("people",)),
    NewMemory("The staging database password rotates every 30 days", project="web"),
    NewMemory("Upgraded Python from 3.10 to 3.11 on the build machines", created_at=T0 - timedelta(days=1)),
]


@pytest.fixture
def ms(store_location: Path | str, encoder: Encoder) -> Iterator[Memsearch]:
    """Each search contract runs on a SQLite file and on PostgreSQL."""
    with Memsearch(store_location, encoder=encoder) as instance:
        yield instance


@pytest.fixture
def notes(ms: Memsearch) -> Memsearch:
    ms.add_many(NOTES)
    return ms


def top(ms: Memsearch, query: str, **kwargs: object) -> list[str]:
    return [c.memory.text for c in ms.search(SearchRequest(query, **kwargs)).results]  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["vector", "hybrid", "auto"])
def test_meaning_is_found_without_shared_words(notes: Memsearch, mode: str) -> None:
    assert top(notes, "didn't we fix something around broken login tokens", k=3, mode=mode)[0] == NOTES[0].text


def test_exact_identifier_routes_hybrid_and_wins(notes: Memsearch) -> None:
    outcome = notes.search(SearchRequest("parseConfig", k=3))
    assert outcome.route.strategy == "hybrid"
    assert "parseConfig" in outcome.route.reason
    assert outcome.results[0].memory.text == NOTES[1].text
    assert set(outcome.results[0].legs) == {"lexical", "lexical_prev", "vector", "vector_context"}  # a note: own text


def test_lexical_mode_uses_no_vector_leg(notes: Memsearch) -> None:
    outcome = notes.search(SearchRequest("coffee", mode="lexical"))
    assert [c.memory.text for c in outcome.results] == [NOTES[3].text]
    assert set(outcome.results[0].legs) == {"lexical", "lexical_prev"}


def test_scope_applies_to_both_legs(notes: Memsearch) -> None:
    results = notes.search(SearchRequest("deploy database", k=10, mode="hybrid", scope=Scope(project="web"))).results
    assert {c.memory.project for c in results} == {"web"}
    assert len(results) == 2


def test_deleted_memories_are_never_returned(notes: Memsearch) -> None:
    victim = notes.search(SearchRequest("oat milk coffee", k=1)).results[0].id
    notes.delete([victim])
    for mode in ("vector", "hybrid", "lexical"):
        outcome = notes.search(SearchRequest("oat milk coffee", k=10, mode=mode))
        assert victim not in {c.id for c in outcome.candidates}


def test_new_memories_are_found_right_after_adding(notes: Memsearch) -> None:
    notes.search(SearchRequest("kubernetes", k=3, mode="vector"))  # fills the vector cache
    notes.add(NewMemory("Kubernetes pods restart when the liveness probe fails"))
    assert top(notes, "kubernetes liveness", k=1, mode="vector") == [
        "Kubernetes pods restart when the liveness probe fails"
    ]


def test_decay_is_computed_from_as_of(notes: Memsearch) -> None:
    outcome = notes.search(SearchRequest("python upgrade", k=1, as_of=T0, profile="siftcoder", tau_days=7))
    best = outcome.results[0]
    assert best.memory.text == NOTES[5].text
    (decay,) = best.factors
    assert decay.name == "decay" and decay.value == pytest.approx(math.exp(-1 / 7))
    assert best.final == pytest.approx(best.fusion * math.exp(-1 / 7))
    assert outcome.now == T0


def test_every_candidate_is_kept_with_a_reason(notes: Memsearch) -> None:
    outcome = notes.search(SearchRequest("memory", k=2, mode="hybrid"))
    assert len(outcome.results) == 2
    assert len(outcome.candidates) == len(NOTES)
    assert {c.dropped for c in outcome.candidates[2:]} == {"limit"}


def test_identical_texts_are_shown_once(ms: Memsearch) -> None:
    first, second = (
        o.id for o in ms.add_many([NewMemory("rotate the API keys monthly"), NewMemory("rotate the API keys  monthly")])
    )
    outcome = ms.search(SearchRequest("rotate keys", k=5))
    assert [c.id for c in outcome.results] == [first]
    assert [c.dropped for c in outcome.candidates if c.id == second] == [f"duplicate of id {first}"]


def test_json_document_follows_the_contract(notes: Memsearch) -> None:
    document = notes.search(SearchRequest("auth bug", k=3, as_of=T0)).to_dict(raw=True)
    assert document["schema_version"] == 1
    assert {"query", "mode", "strategy", "profile", "as_of", "results", "candidates"} <= set(document)
    for rank, result in enumerate(document["results"], start=1):
        assert result["rank"] == rank
        assert {"id", "key", "text", "score", "created_at", "tags", "metadata", "explain"} <= set(result)
        explain = result["explain"]
        assert explain["final"] == result["score"]
        assert explain["fusion"]["score"] == pytest.approx(sum(explain["fusion"]["terms"].values()))
        score = explain["fusion"]["score"]
        for factor in explain["factors"]:
            score = score * factor["value"] if factor["op"] == "mul" else score + factor["value"]
        assert score == pytest.approx(result["score"])
    assert all("dropped" in c for c in document["candidates"])


def test_the_store_refuses_another_models_queries(notes: Memsearch) -> None:
    store = notes.store()
    ids = [m.id for m in store.list()]
    other = EmbeddingModelInfo("someone-elses-model", 384)
    store.replace_vectors(ids, store.all_vectors()[1].copy(), other)
    with pytest.raises(ModelMismatchError, match="vectors come from someone-elses-model"):
        notes.search(SearchRequest("coffee", mode="hybrid"))
    assert top(notes, "coffee", mode="lexical") == [NOTES[3].text]
    assert notes.reindex() == len(NOTES)
    assert top(notes, "coffee", k=1, mode="vector") == [NOTES[3].text]


@pytest.mark.parametrize(("kwargs", "message"), [({"query": "  "}, "empty"), ({"query": "x", "mode": "fuzzy"}, "mode")])
def test_bad_requests_are_refused(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        SearchRequest(**kwargs)  # type: ignore[arg-type]


def test_memsense_lexical_mode_selects_with_stored_vectors(notes: Memsearch) -> None:
    # MMR compares memories with each other: a lexical search never embedded the query, yet the
    # memories' own vectors are stored and MMR uses them (this raised KeyError before).
    outcome = notes.search(SearchRequest("deploy database web", mode="lexical", k=5, profile="memsense"))
    assert len(outcome.results) >= 2
    assert all("mmr_score" in c.selection for c in outcome.results)


def test_a_search_reads_each_leg_spec_once(notes: Memsearch, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search asks its legs' kinds many times; each spec text is parsed once, then remembered."""
    import memsearch.profiles.schema as schema

    notes.search(SearchRequest("parseConfig", k=3))
    parsed: list[str] = []
    real = schema._parse

    def counted(spec: str) -> schema.LegSpec:
        parsed.append(spec)
        return real(spec)

    monkeypatch.setattr(schema, "_parse", counted)
    schema._parsed.cache_clear()
    notes.search(SearchRequest("parseConfig", k=3))
    notes.search(SearchRequest("login tokens", k=3))
    assert sorted(parsed) == sorted(set(parsed))
    assert set(parsed) <= set(notes.search(SearchRequest("x", k=1)).profile.legs.values())
