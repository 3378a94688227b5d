"""Ranking on columns (memsearch.retrieval.ranking) answers exactly what the reference stages
(build_candidates → fuse → select over whole candidates) answer, and reads whole rows only of
what it shows; the stores' `fields_of` reads some fields of memories by id."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memsearch.api import Memsearch
from memsearch.choices import MODES
from memsearch.embedding import Encoder
from memsearch.eval.datasets import load_locomo
from memsearch.ingest.conversations import conversation_memories
from memsearch.models import Memory, NewMemory
from memsearch.profiles import available, load_profile
from memsearch.retrieval import ranking
from memsearch.retrieval.request import Boost, SearchRequest
from tests.conftest import T0
from tests.test_golden import NOTES, QUERIES, TINY

# Beside the golden notes: a duplicate text, a superseded memory and one that is pinned too, a
# speaker and dates, so every filter and factor has something to do.
MORE = [
    NewMemory("We deploy the web app on Tuesdays, never on Fridays", created_at=T0 - timedelta(days=2)),
    NewMemory("Bob said the deploy key moved to the new vault last week", role="Bob",
              created_at=T0 - timedelta(days=8), tags=("ops",), project="web"),
    NewMemory("Bob: the JWT bug came back on 3 May in Paris", role="Bob", created_at=T0 - timedelta(days=20)),
]  # fmt: skip
QUESTIONS = [*QUERIES["notes"], "when did Bob move the deploy key?", "who fixed the JWT bug in Paris?"]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Iterator[dict[str, Memsearch]]:
    root = tmp_path_factory.mktemp("ranking")
    notes = Memsearch(root / "notes.db", encoder=encoder)
    ids = [added.id for added in notes.add_many([*NOTES, *MORE])]
    assert len(set(ids)) == len(NOTES) + len(MORE)  # the copy too
    # Bob's deploy-key note superseded by the vault note; the pinned deploy note (pinned: it stays) by its copy.
    notes.store().set_consolidation({ids[9]: ids[6], ids[2]: ids[8]}, {})
    locomo = Memsearch(root / "locomo.db", encoder=encoder)
    for conversation, _ in load_locomo(TINY):
        locomo.add_many(conversation_memories(conversation))
    yield {"notes": notes, "locomo": locomo}
    notes.close()
    locomo.close()


def requests() -> Iterator[tuple[str, SearchRequest]]:
    for profile in sorted(available()):
        for mode in MODES:
            for store_name, queries in (("notes", QUESTIONS), ("locomo", QUERIES["locomo"])):
                for query in queries:
                    request = SearchRequest(query, k=3, mode=mode, as_of=T0, profile=profile, touch=False)
                    yield store_name, request
                    if store_name == "notes" and mode == "hybrid":  # budgets, boosts and the request's floor
                        yield store_name, replace(request, max_tokens=40)
                        yield (
                            store_name,
                            replace(request, boosts=(Boost("tag", "ops", 2.0), Boost("project", "web", 0.5))),
                        )
                        yield store_name, replace(request, min_score=0.05)


def documents(ms: Memsearch, request: SearchRequest) -> dict[str, Any]:
    try:
        return ms.search(request).to_dict(raw=True)
    except Exception as error:  # an error is part of the behaviour too
        return {"error": type(error).__name__}


def test_ranking_on_columns_answers_as_the_stages_do(
    stores: dict[str, Memsearch], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every shipped profile, mode and request variant: the same document, every candidate's
    record and score equal to the last bit (--raw, --explain), the rankings on columns or not."""
    cases = list(requests())
    on_columns = [documents(stores[name], request) for name, request in cases]
    monkeypatch.setattr(ranking, "fits", lambda profile, rerank: False)
    reference = [documents(stores[name], request) for name, request in cases]
    ranked = 0
    for (name, request), fast, slow in zip(cases, on_columns, reference, strict=True):
        assert fast == slow, f"{name}: {request}"
        ranked += "candidates" in fast and len(fast["candidates"]) > len(fast["results"])
    assert ranked > 50  # the cases drop candidates: the comparison covers the drop reasons


def test_a_search_reads_whole_rows_only_of_its_results(ms: Memsearch, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranking reads the fields it ranks by; whole rows are read for the results, and for the
    dropped candidates only when they are asked for."""
    ms.add_many(NOTES)
    store = ms.store()
    read: list[int] = []
    get_many = store.get_many

    def counted(ids: Sequence[int]) -> dict[int, Memory]:
        read.extend(ids)
        return get_many(ids)

    monkeypatch.setattr(store, "get_many", counted)
    outcome = ms.search(SearchRequest("deploy key", k=2, mode="hybrid", as_of=T0, profile="default"))
    results = [c.id for c in outcome.results]
    assert len(results) == 2 and sorted(read) == sorted(results)
    assert len(outcome.candidates) > len(results)
    document = outcome.to_dict(raw=True)  # the dropped ones, now
    assert sorted(read) == sorted(c["id"] for c in document["candidates"])
    assert [r["id"] for r in document["results"]] == results


def test_ranking_reads_only_the_fields_the_profile_ranks_by() -> None:
    default = load_profile("default")
    assert ranking.needed_fields(default, (), None) == (
        "role", "conversation", "superseded_by", "pinned", "content_hash", "text", "created_at",
    )  # fmt: skip
    plain = replace(default, adjust=(), drop_superseded=False, select=replace(default.select, drop_identical=False))
    assert ranking.needed_fields(plain, (), None) == ("role", "conversation")
    assert ranking.needed_fields(plain, (Boost("tag", "ops", 2.0),), 100) == (
        "role", "conversation", "tags", "project", "text",
    )  # fmt: skip


def test_fields_of_reads_fields_by_id(store_location: Path | str, encoder: Encoder) -> None:
    with Memsearch(store_location, encoder=encoder) as ms:
        first, second = (added.id for added in ms.add_many(NOTES[:2]))
        store = ms.store()
        found = store.fields_of([second, first, 10**6, first], ["created_at", "tags", "pinned", "project"])
        memories = store.get_many([first, second])
    assert set(found) == {first, second}
    for memory_id, values in found.items():
        memory = memories[memory_id]
        assert values == (memory.created_at, memory.tags, memory.pinned, memory.project)
    with pytest.raises(KeyError):
        store.fields_of([first], ["not_a_field"])
