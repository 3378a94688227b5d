"""Conversations: ingestion with views, session-first scoring, the time leg, speaker awareness,
dense-query cleaning, timeline, and the upgrade of older stores."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memsearch.api import Memsearch
from memsearch.embedding import Encoder
from memsearch.eval.datasets import Question, load_locomo
from memsearch.ingest.conversations import conversation_memories, with_facets
from memsearch.ingest.readers import Conversation, turn_text
from memsearch.models import Memory, NewMemory, content_hash
from memsearch.retrieval.candidates import Candidate, LegHit
from memsearch.retrieval.legs import dense_query_text
from memsearch.retrieval.query import parse_query
from memsearch.retrieval.request import SearchRequest
from memsearch.retrieval.scoring import QueryFacts
from memsearch.retrieval.sessions import session_support
from memsearch.store import Scope
from memsearch.store.migrations import MIGRATIONS, SCHEMA_VERSION
from memsearch.store.sqlite import SQLiteStore
from memsearch.store.sqlite_driver import sqlite3
from memsearch.text import LexicalQuery
from tests.conftest import T0
from tests.test_cli import run

TINY = Path(__file__).parent / "data" / "locomo_tiny.json"
Locomo = list[tuple[Conversation, list[Question]]]


@pytest.fixture(scope="module")
def tiny() -> Locomo:
    return load_locomo(TINY)


def by_key(memories: list[NewMemory]) -> dict[str | None, NewMemory]:
    return {m.key: m for m in memories}


def test_sessions_and_turns_with_their_views(tiny: Locomo) -> None:
    conversation, _ = tiny[0]
    memories = by_key(conversation_memories(conversation))
    session = memories["conv-a/session_1"]
    assert session.kind == "session" and session.text.count("\n") == 2
    painted = memories["conv-a/D1:2"]
    assert painted.text == "Ben: Look at what I painted last week! [image: a painting of a lake at sunset]"
    assert painted.kind == "turn" and painted.parent_key == "conv-a/session_1" and painted.position == 2
    first, third = memories["conv-a/D1:1"].text, memories["conv-a/D1:3"].text
    assert painted.views["context"] == "\n".join([first, painted.text, third])
    assert painted.views["prev"] == f"{first}\n{painted.text}"
    assert painted.views["next"] == third
    assert "next" not in memories["conv-a/D1:3"].views  # the last turn of its session
    middle = memories["conv-a/D9:9"].views["context"].splitlines()
    assert middle == [memories[f"conv-a/D9:{n}"].text for n in range(7, 12)]  # two turns either side
    assert memories["conv-a/D1:2"].created_at == session.created_at
    assert len(conversation_memories(conversation, sessions=False)) == len(conversation.turns)


def test_turn_text_follows_the_protocol(tiny: Locomo) -> None:
    turn = next(t for s in tiny[0][0].sessions for t in s.turns if t.image_caption)
    assert turn_text(turn).endswith(" [image: a painting of a lake at sunset]")


@pytest.fixture
def imported(isolated_home: Path) -> Path:
    result = run("import", str(TINY), "--format", "locomo")
    assert "imported 29 turns, 5 sessions" in result.stderr
    return isolated_home


def test_import_keys_timeline_and_turn_results(imported: Path) -> None:
    turn = json.loads(run("get", "conv-a/D1:2", "-f", "json").stdout)
    assert (turn["kind"], turn["conversation"], turn["session"], turn["position"], turn["role"]) == (
        "turn",
        "conv-a",
        "session_1",
        2,
        "Ben",
    )
    timeline = json.loads(run("timeline", "conv-a/D9:9", "-B", "2", "-A", "1", "-f", "json").stdout)["memories"]
    assert [m["key"] for m in timeline] == ["conv-a/D9:7", "conv-a/D9:8", "conv-a/D9:9", "conv-a/D9:10"]
    assert [m["current"] for m in timeline] == [False, False, True, False]
    document = json.loads(run("search", "skating on the frozen lake", "-f", "json", "-k", "3").stdout)
    assert document["results"][0]["key"] == "conv-a/D9:17"
    assert {r["kind"] for r in document["results"]} == {"turn"}  # turn granularity never returns sessions
    legs = document["results"][0]["explain"]["legs"]
    assert {"lexical", "lexical_prev", "vector", "vector_context"} <= set(legs)


def test_session_granularity_is_session_first(imported: Path) -> None:
    # (Only session 9 tells of skating; "frozen lake" would also match the lake painted in session 1.)
    document = json.loads(run("search", "skating", "-f", "json", "-g", "session", "-k", "2").stdout)
    best = document["results"][0]
    assert best["kind"] == "session" and best["key"] == "conv-a/session_9"
    detail = best["explain"]["fusion"]["detail"]
    assert detail["supporting_turn_count"] >= 1 and detail["best_turn_routes"]
    assert detail["turn_support"] == pytest.approx(min(0.12, 0.6 * detail["turn_support"] / 0.6))
    assert best["explain"]["fusion"]["score"] == pytest.approx(detail["session_rrf_score"] + detail["turn_support"])
    table = run("search", "skating on the frozen lake", "-g", "session", "-k", "1", "--explain").stdout
    assert "turn support" in table


def test_without_session_chunks_hits_bring_their_neighbours(isolated_home: Path) -> None:
    run("import", str(TINY), "--format", "locomo", "--no-sessions")
    document = json.loads(run("search", "skating on the frozen lake", "-f", "json", "-g", "session", "-k", "1").stdout)
    keys = [(r["key"], r["context_of"]) for r in document["results"]]
    hit = document["results"][0]["id"]
    assert keys[0] == ("conv-a/D9:17", None)
    assert ("conv-a/D9:16", hit) in keys  # its neighbour joins, marked as context


def test_time_leg_finds_the_named_date(imported: Path) -> None:
    document = json.loads(run("search", "What happened on 3 January 2024?", "-f", "json", "-k", "3").stdout)
    best = document["results"][0]
    assert best["key"] == "conv-a/D10:1"
    assert best["explain"]["legs"]["time"]["rank"] == 1  # ranked by cosine within the named day


def test_time_leg_ranks_a_month_named_without_a_year(imported: Path) -> None:
    """ "in January" is the latest January up to --as-of; the leg ranks that month's memories by
    cosine (however many there are) and leaves the others out."""
    document = json.loads(
        run("search", "What happened in January?", "-f", "json", "--raw", "--as-of", "2024-06-01").stdout
    )
    in_time_leg = [c for c in document["candidates"] if "time" in c["explain"]["legs"]]
    assert in_time_leg and all(c["created_at"].startswith("2024-01") for c in in_time_leg)
    ranks = sorted(c["explain"]["legs"]["time"]["rank"] for c in in_time_leg)
    assert ranks == list(range(1, len(ranks) + 1))


def test_time_leg_finds_memories_that_speak_of_the_named_date(store_location: Path | str, encoder: Encoder) -> None:
    """On 3 May: what was written that day first, then what was written later about that day
    ("last night" on 4 May); a later memory about another day, or a plan, is not in the leg. Both
    stores answer alike. "Two days before 5 May" names 3 May too."""

    def at(day: int, month: int = 5) -> datetime:
        return datetime(2023, month, day, 20, 0, tzinfo=UTC)

    notes = {
        "same-day": NewMemory("Bought paint at the hardware store.", key="same-day", created_at=at(3)),
        "next-day": NewMemory("My mom and I made dinner together last night!", key="next-day", created_at=at(4)),
        "other-day": NewMemory("We had dinner at the harbour yesterday.", key="other-day", created_at=at(20)),
        "plan": NewMemory("Dinner with mom next week, I hope.", key="plan", created_at=at(1)),
        "much-later": NewMemory("Dinner with my mom on 3 May 2023 was lovely.", key="much-later", created_at=at(2, 9)),
    }
    with Memsearch(store_location, encoder=encoder) as ms:
        ms.add_many(list(notes.values()))
        for query in ("Who did I have dinner with on 3 May 2023?", "What did I do two days before 5 May 2023?"):
            outcome = ms.search(SearchRequest(query, k=10, mode="hybrid", as_of=at(1, 10), touch=False))
            in_leg = {c.memory.key: c.legs["time"].rank for c in outcome.candidates if "time" in c.legs}
            assert in_leg.keys() == {"same-day", "next-day", "much-later"}, in_leg
            assert in_leg["same-day"] == 1  # the others by their cosine with the query


def test_speaker_named_in_the_query_is_preferred(imported: Path) -> None:
    document = json.loads(run("search", "What did Ana say about the kayak?", "-f", "json", "-k", "5").stdout)
    factors = {r["role"]: r["explain"]["factors"][0] for r in document["results"]}
    assert factors["Ana"] == {"name": "speaker", "op": "mul", "value": 1.1, "detail": {"named": "Ana", "role": "Ana"}}
    assert parse_query("did ana and ben meet?").names(["Ana", "Ben"]) == ("Ana", "Ben")
    assert QueryFacts(named=("Ana", "Ben")).speaker is None  # several named: no preference
    assert parse_query("what did Anastasia say").names(["Ana"]) == ()  # whole words only


def test_dense_query_drops_words_common_to_the_store(ms: Memsearch, tiny: Locomo) -> None:
    ms.add_many(conversation_memories(tiny[0][0], sessions=False))
    store, everything = ms.store(), Scope(conversation="conv-a")
    assert (
        dense_query_text(store, parse_query("What did Ana's friend Ben paint?"), everything, 0.2)
        == "What did friend paint?"
    )
    assert dense_query_text(store, parse_query("Ana Ben"), everything, 0.2) == "Ana Ben"  # nothing would remain
    assert dense_query_text(
        store, parse_query("What did Ana paint?"), Scope(conversation="conv-a", roles=("Zed",)), 0.2
    ) == ("What did Ana paint?")  # no speaker in that scope
    assert dense_query_text(store, parse_query("Ana Ben"), everything, None) == "Ana Ben"


def memory(memory_id: int, parent: int | None = None) -> Memory:
    return Memory(
        id=memory_id, key=None, text=str(memory_id), created_at=T0, last_accessed_at=T0, access_count=0,
        importance=0.5, priority=1.0, pinned=False, project=None, namespace=None, session=None, role=None, tags=(),
        metadata={}, content_hash=content_hash(str(memory_id)), kind="turn" if parent else "session", parent_id=parent,
    )  # fmt: skip


def test_session_support_arithmetic() -> None:
    sessions = [Candidate(memory(1), {"lexical": LegHit(1, 1.0)}, fusion=0.10), Candidate(memory(2), {}, fusion=0.0)]
    turns = [
        Candidate(memory(11, parent=1), {"vector": LegHit(1, 0.9)}, fusion=0.05),
        Candidate(memory(12, parent=1), {"lexical": LegHit(2, 1.0), "vector": LegHit(3, 0.5)}, fusion=0.30),
        Candidate(memory(21, parent=2), {"vector": LegHit(2, 0.8)}, fusion=0.10),
    ]
    first, second = session_support(sessions, turns, cap=0.12, share=0.6)
    assert first.fusion == pytest.approx(0.10 + 0.12)  # min(0.12, 0.6 · 0.30): capped
    assert first.fusion_detail["supporting_turn_count"] == 2
    assert first.fusion_detail["best_turn_routes"] == ["lexical", "vector"]
    assert second.fusion == pytest.approx(0.6 * 0.10)  # found only through its turn
    assert second.fusion_detail["session_rrf_score"] == 0.0


def test_facets_by_similarity_to_their_descriptions(encoder: Encoder, tiny: Locomo) -> None:
    probe = NewMemory(text="Ana: I love hiking and my favourite food is sushi. My sister lives in Lisbon.", kind="turn")
    (faceted,) = with_facets([probe], encoder)
    assert "hiking" in faceted.views["facet_preferences"]
    assert "Lisbon" in faceted.views["facet_personal_info"]


def test_a_version_2_store_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    for number, script in enumerate(MIGRATIONS[:2], start=1):
        db.executescript(script)
        db.execute(f"PRAGMA user_version = {number}")
    db.execute("PRAGMA application_id = 1297306179")
    db.execute(
        "INSERT INTO memories (text, content_hash, created_at, last_accessed_at, tags) VALUES (?, ?, ?, ?, ?)",
        (
            "the old deploy note",
            "h",
            "2024-01-01T00:00:00.000000+00:00",
            "2024-01-01T00:00:00.000000+00:00",
            '["ops", "prod"]',
        ),
    )
    db.execute("INSERT INTO memories_fts (rowid, text, tags) VALUES (1, 'the old deploy note', 'ops prod')")
    db.commit()
    db.close()
    store = SQLiteStore.open(path)
    assert store.schema_version == SCHEMA_VERSION
    assert [i for i, _ in store.lexical_search(LexicalQuery.of("deploy"), Scope(), 5)] == [1]
    assert [i for i, _ in store.lexical_search(LexicalQuery.of("prod"), Scope(), 5)] == [1]  # tags carried over
    assert [i for i, _ in store.lexical_search(LexicalQuery.of("deploy"), Scope(), 5, view="context")] == [1]
    assert [i for i, _ in store.lexical_search(LexicalQuery.of("deploy"), Scope(), 5, view="prev")] == [
        1
    ]  # a note's own text
    assert store.get(1).kind == "note"


def _context_vectors(ms: Memsearch) -> np.ndarray:
    store = ms.store()
    assert isinstance(store, SQLiteStore)  # the vector index is the SQLite store's own
    return store.vector_index("context").matrix


def test_reindex_re_embeds_views_too(ms: Memsearch, tiny: Locomo) -> None:
    ms.add_many(conversation_memories(tiny[0][0]))
    before = _context_vectors(ms).copy()
    assert ms.reindex() == len(conversation_memories(tiny[0][0]))
    after = _context_vectors(ms)
    assert after.shape == before.shape and float((after * before).sum(axis=1).min()) > 0.9999
    outcome = ms.search(SearchRequest("skating on the frozen lake", k=1))
    assert outcome.results[0].memory.key == "conv-a/D9:17"


def test_dense_query_keeps_content_words_of_small_stores_and_non_speakers(ms: Memsearch) -> None:
    # The README's first example: one memory holds every word of the query, yet none is a speaker
    # name and one memory tells nothing about how common a word is.
    ms.add(NewMemory("The deploy key is in the team vault", tags=("ops",)))
    assert (
        dense_query_text(ms.store(), parse_query("where is the deploy key?"), Scope(), 0.2)
        == "where is the deploy key?"
    )
    ms.add_many([NewMemory(f"deploy note {n}: the deploy runs nightly on host {n}") for n in range(30)])
    # 'deploy' is in every memory now, but it is content, not a speaker's name: kept.
    assert (
        dense_query_text(ms.store(), parse_query("where is the deploy key?"), Scope(), 0.2)
        == "where is the deploy key?"
    )
    outcome = ms.search(SearchRequest("where is the deploy key?", k=1, mode="vector"))
    assert outcome.embedded_query == "where is the deploy key?"
    assert outcome.to_dict()["embedded_query"] == "where is the deploy key?"
    assert outcome.results[0].cosine is not None and outcome.results[0].cosine > 0.5


def test_notes_and_turns_collect_the_same_legs(ms: Memsearch, tiny: Locomo) -> None:
    # A note must not lose to turns because only turns have context and previous-turn views: a
    # note's views are its own text, so it is found by every leg a turn is found by.
    ms.add_many(conversation_memories(tiny[0][0]))
    note = ms.add(NewMemory("The skating rink on the frozen lake opens in December")).id
    outcome = ms.search(SearchRequest("skating rink frozen lake", k=5, mode="hybrid", touch=False))
    legs = next(c.legs for c in outcome.candidates if c.id == note)
    assert {"lexical", "lexical_prev", "vector", "vector_context"} <= set(legs)
    assert outcome.results[0].id == note
