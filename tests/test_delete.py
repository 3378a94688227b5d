"""`delete` forgets (issue 8, item 3): a deleted turn's words are not findable through its
neighbours' views or its session chunk, in any mode and granularity, on either store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.choices import GRANULARITIES, MODES
from memsearch.embedding import Encoder
from memsearch.errors import MemoryNotFoundError
from memsearch.retrieval.request import SearchRequest

SECRET = "zorblaxquint"
CHAT = [
    ("s1", "alice", "Shall we plan the offsite for next month?"),
    ("s1", "bob", "Yes, Lisbon would be lovely in spring."),
    ("s1", "alice", f"The venue password is {SECRET}, keep it safe."),
    ("s1", "bob", "Noted, I will book the flights tomorrow."),
    ("s1", "alice", "Great, and I will ask about vegetarian catering."),
    ("s2", "bob", f"Reminder: {SECRET} again for the venue portal."),
    ("s3", "alice", "The budget for the offsite is four thousand euros."),
]


def chat_jsonl() -> str:
    return "\n".join(
        json.dumps({"session": s, "speaker": who, "text": text, "created_at": f"2024-05-0{n + 1}T10:00:00Z"})
        for n, (s, who, text) in enumerate(CHAT)
    )


def traces(ms: Memsearch) -> list[tuple[str, str, int]]:
    """(mode, granularity, id) of every candidate, kept or dropped, whose text holds SECRET."""
    found = []
    for mode in MODES:
        for granularity in GRANULARITIES:
            outcome = ms.search(SearchRequest(SECRET, k=20, mode=mode, granularity=granularity, touch=False))
            found += [(mode, granularity, c.id) for c in outcome.candidates if SECRET in c.memory.text]
    return found


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_a_deleted_turn_leaves_no_trace(
    store_kind: str, db_path: Path, encoder: Encoder, request: pytest.FixtureRequest
) -> None:
    location = db_path if store_kind == "sqlite" else request.getfixturevalue("pg_url")
    with Memsearch(location, encoder=encoder) as ms:
        ms.store(create=True)  # (an import into a new PostgreSQL database does not create it: a separate bug)
        ms.import_text(chat_jsonl(), source="offsite.jsonl", fmt="chat")
        secret_turns = [m for m in ms.list() if m.kind == "turn" and SECRET in m.text]
        assert len(secret_turns) == 2
        assert traces(ms), "before the delete the token is found"
        # s1's turn sits among neighbours; s2's turn is its session's only one (its chunk goes too).
        ms.delete([m.id for m in secret_turns])
        for mode in MODES:
            for granularity in GRANULARITIES:
                outcome = ms.search(SearchRequest(SECRET, k=20, mode=mode, granularity=granularity, touch=False))
                document = outcome.to_dict(raw=True)
                for candidate in document["candidates"]:
                    assert SECRET not in candidate["text"], (mode, granularity, candidate)
                if mode == "lexical":  # the token is in no full-text column any more
                    assert document["candidates"] == [], (mode, granularity)
        store = ms.store()
        assert all(SECRET not in text for _, _, text in store.views_with_vectors())
        remaining = ms.list()
        assert all(SECRET not in m.text for m in remaining)
        assert not [m for m in remaining if m.session == "s2"], "the emptied session's chunk is gone"
        chunk = next(m for m in remaining if m.kind == "session" and m.session == "s1")
        assert chunk.metadata["turns"] == 4 and chunk.text.count("\n") == 3
        # The turns that stay are found by their own words, through their rebuilt views too.
        for words, expected in (("vegetarian catering", "vegetarian"), ("book the flights", "flights")):
            for mode in MODES:
                top = ms.search(SearchRequest(words, k=3, mode=mode, touch=False)).results
                assert any(expected in c.memory.text for c in top), (words, mode)
        top_session = ms.search(SearchRequest("Lisbon in spring", k=1, granularity="session", touch=False))
        assert top_session.results[0].id == chunk.id
        # The neighbour's views and their vectors are what an import of the remaining chat makes.
        with Memsearch(Path(str(db_path) + ".fresh"), encoder=encoder) as fresh:
            rest = "\n".join(line for line in chat_jsonl().splitlines() if SECRET not in line)
            fresh.import_text(rest, source="offsite.jsonl", fmt="chat")
            expected_views = {(fresh.get(i).text, v, t) for i, v, t in fresh.store().views_with_vectors()}
        assert {(ms.get(i).text, v, t) for i, v, t in store.views_with_vectors()} == expected_views


def test_delete_of_an_unknown_id_changes_nothing(ms: Memsearch) -> None:
    ms.import_text(chat_jsonl(), source="offsite.jsonl", fmt="chat")
    before = [(m.id, m.text) for m in ms.list()]
    turn = next(m for m in ms.list() if m.kind == "turn" and SECRET in m.text)
    with pytest.raises(MemoryNotFoundError):
        ms.delete([turn.id, 99999])
    assert [(m.id, m.text) for m in ms.list()] == before
