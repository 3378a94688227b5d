"""Curation in the library, alike on SQLite and PostgreSQL (issue 22): tags with their counts,
deleting every memory a scope matches, and a new text for a memory that search then finds by
its new words, never by its old ones (nor through its session's views or chunk)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.choices import GRANULARITIES, MODES
from memsearch.embedding import Encoder
from memsearch.errors import (
    InvalidInputError,
    MemoryNotFoundError,
    MixedDeleteTargetsError,
    NoDeleteTargetError,
    TextTooLongError,
)
from memsearch.models import NewMemory
from memsearch.operations import MAX_TEXT_CHARS
from memsearch.retrieval.request import SearchRequest
from memsearch.store import Scope
from tests.serving import Served
from tests.test_delete import SECRET, chat_jsonl


def notes(ms: Memsearch) -> dict[str, int]:
    ids = [
        outcome.id
        for outcome in ms.add_many(
            [
                NewMemory("the deploy key lives in the vault", key="vault", tags=("ops", "secret")),
                NewMemory("rotate the deploy key every quarter", tags=("ops",), project="work"),
                NewMemory("lunch with Ana on friday", tags=("food", "people")),
                NewMemory("Ana likes oat milk", tags=("people",), project="work"),
                NewMemory("an untagged thought"),
            ]
        )
    ]
    return dict(zip(("vault", "rotate", "lunch", "milk", "untagged"), ids, strict=True))


def test_tags_count_the_memories_in_scope(store_location: Path | str, encoder: Encoder) -> None:
    with Memsearch(store_location, encoder=encoder) as ms:
        notes(ms)
        # most used first, ties by name (in code-point order on both stores)
        assert list(ms.tags().items()) == [("ops", 2), ("people", 2), ("food", 1), ("secret", 1)]
        assert ms.tags(Scope(project="work")) == {"ops": 1, "people": 1}
        assert ms.tags(Scope(tags=("people",))) == {"people": 2, "food": 1}
        assert ms.tags(Scope(kinds=("turn",))) == {}


def test_delete_matching_deletes_what_list_shows(store_location: Path | str, encoder: Encoder) -> None:
    with Memsearch(store_location, encoder=encoder) as ms:
        ids = notes(ms)
        scope = Scope(tags=("ops",))
        listed = ms.list(scope)
        assert ms.delete_matching(scope=scope, dry_run=True) == listed
        assert ms.count() == 5  # a dry run deletes nothing
        assert ms.delete_matching(scope=scope) == listed
        assert {m.id for m in ms.list()} == {ids["lunch"], ids["milk"], ids["untagged"]}
        assert ms.tags() == {"people": 2, "food": 1}
        assert ms.delete_matching(scope=scope) == []  # nothing matches any more: nothing to do
        for unfiltered in (None, Scope()):  # no filter is every memory: only when said
            with pytest.raises(NoDeleteTargetError):
                ms.delete_matching(scope=unfiltered)
        with pytest.raises(MixedDeleteTargetsError):
            ms.delete_matching([ids["lunch"]], Scope(tags=("food",)))
        with pytest.raises(MixedDeleteTargetsError):
            ms.delete_matching([ids["lunch"]], everything=True)
        assert ms.count() == 3
        assert len(ms.delete_matching(everything=True)) == 3
        assert ms.count() == 0


def test_delete_matching_by_refs_is_all_or_none_and_names_each_memory_once(
    store_location: Path | str, encoder: Encoder
) -> None:
    with Memsearch(store_location, encoder=encoder) as ms:
        ids = notes(ms)
        lunch = ms.get(ids["lunch"])
        assert ms.delete_matching([ids["lunch"]], dry_run=True) == [lunch]
        assert ms.count() == 5
        with pytest.raises(MemoryNotFoundError):
            ms.delete_matching([ids["lunch"], 999_999])
        assert ms.count() == 5  # one not found: none deleted
        assert ms.delete_matching([ids["lunch"], ids["lunch"]]) == [lunch]
        assert ms.count() == 4


def test_delete_matching_rebuilds_the_sessions_of_deleted_turns(store_location: Path | str, encoder: Encoder) -> None:
    with Memsearch(store_location, encoder=encoder) as ms:
        ms.store(create=True)
        ms.import_text(chat_jsonl(), source="offsite.jsonl", fmt="chat")
        gone = ms.delete_matching(scope=Scope(sessions=("s2",), kinds=("turn",)))
        assert [m.session for m in gone] == ["s2"]
        assert not [m for m in ms.list() if m.session == "s2"], "the emptied session's chunk went too"
        assert ms.count(Scope(sessions=("s1",))) == 6  # s1's chunk and five turns are untouched


def _traces(ms: Memsearch, word: str) -> list[tuple[str, str, int]]:
    """(mode, granularity, id) of every candidate, kept or dropped, whose text holds `word`."""
    found = []
    for mode in MODES:
        for granularity in GRANULARITIES:
            outcome = ms.search(SearchRequest(word, k=20, mode=mode, granularity=granularity, touch=False))
            found += [(mode, granularity, c.id) for c in outcome.candidates if word in c.memory.text]
    return found


def test_a_new_text_is_found_by_its_words_and_the_old_is_not(store_location: Path | str, encoder: Encoder) -> None:
    with Memsearch(store_location, encoder=encoder) as ms:
        ids = notes(ms)
        old = ms.get(ids["lunch"])
        new_text = "dinner with Bruno at the zanzibar bistro"
        edited = ms.update(ids["lunch"], text=new_text, importance=0.9)
        assert (edited.text, edited.importance, edited.tags, edited.created_at) == (
            new_text, 0.9, old.tags, old.created_at
        )  # fmt: skip
        assert edited.content_hash != old.content_hash
        for mode in ("vector", "lexical", "hybrid"):
            top = ms.search(SearchRequest("zanzibar bistro dinner", k=1, mode=mode, touch=False)).results
            assert [c.id for c in top] == [edited.id], mode
        assert ms.search(SearchRequest("lunch friday", k=5, mode="lexical", touch=False)).results == []
        store = ms.store()
        old_vector, new_vector = encoder.encode([old.text, new_text])
        assert store.cosines(new_vector, [edited.id])[edited.id] == pytest.approx(1.0, abs=1e-4)
        assert store.cosines(old_vector, [edited.id])[edited.id] < 0.9


def test_a_turn_given_a_new_text_leaves_no_trace_of_the_old(store_location: Path | str, encoder: Encoder) -> None:
    with Memsearch(store_location, encoder=encoder) as ms:
        ms.store(create=True)
        ms.import_text(chat_jsonl(), source="offsite.jsonl", fmt="chat")
        turn = next(m for m in ms.list() if m.kind == "turn" and m.session == "s1" and SECRET in m.text)
        assert _traces(ms, SECRET)
        ms.update(turn.id, text="The venue password is in the shared vault now.")
        # s2's turn still holds the word: only it (and its own session chunk) may be found
        s2 = {m.id for m in ms.list(Scope(sessions=("s2",)))}
        assert {found_id for _, _, found_id in _traces(ms, SECRET)} <= s2
        store = ms.store()
        s1 = {m.id for m in ms.list(Scope(sessions=("s1",)))}
        assert all(SECRET not in text for memory_id, _, text in store.views_with_vectors() if memory_id in s1)
        chunk = next(m for m in ms.list(Scope(sessions=("s1",), kinds=("session",))))
        assert "in the shared vault now" in chunk.text and SECRET not in chunk.text
        # the turn after it is found through its rebuilt `prev` view by the new words
        hits = ms.search(SearchRequest("shared vault book the flights", k=3, mode="lexical", touch=False)).results
        assert any("book the flights" in c.memory.text for c in hits)


def test_a_long_note_given_a_new_text_keeps_only_its_new_chunks(db_path: Path, encoder: Encoder) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        long_text = " ".join(f"paragraph {n} about the quokka census" for n in range(400))
        memory_id = ms.add(NewMemory(long_text)).id
        assert any(view.startswith("chunk_") for i, view, _ in ms.store().views_with_vectors() if i == memory_id)
        ms.update(memory_id, text="a short note now")
        assert [view for i, view, _ in ms.store().views_with_vectors() if i == memory_id] == []
        assert ms.search(SearchRequest("quokka census", k=3, mode="lexical", touch=False)).results == []


def test_a_text_that_cannot_be_stored_changes_nothing(ms: Memsearch) -> None:
    ms.import_text(
        json.dumps({"session": "s", "role": "user", "text": "hello", "created_at": "2024-05-01T10:00:00Z"}),
        source="chat.jsonl",
        fmt="chat",
    )
    chunk = next(m for m in ms.list() if m.kind == "session")
    turn = next(m for m in ms.list() if m.kind == "turn")
    before = {m.id: (m.text, m.importance, m.content_hash) for m in ms.list()}
    for ref, text, error in (
        (turn.id, "   ", InvalidInputError),
        (turn.id, "x" * (MAX_TEXT_CHARS + 1), TextTooLongError),
        (turn.id, 3, InvalidInputError),
        (chunk.id, "a session edited by hand", InvalidInputError),
    ):
        with pytest.raises(error):
            ms.update(ref, text=text, importance=0.9)
    assert {m.id: (m.text, m.importance, m.content_hash) for m in ms.list()} == before


def test_an_edited_memorys_old_text_is_in_no_file_of_the_store(db_path: Path, encoder: Encoder) -> None:
    from tests.test_secrets_at_rest import SECRET as PASSWORD
    from tests.test_secrets_at_rest import files_holding

    with Memsearch(db_path, encoder=encoder) as ms:
        memory_id = ms.add(NewMemory(f"the vault password is {PASSWORD}", key="vault")).id
        assert files_holding(db_path.parent, PASSWORD)
        ms.update(memory_id, text="the vault password was rotated")
        assert not files_holding(db_path.parent, PASSWORD), "the old text left in the open store's files"
    assert not files_holding(db_path.parent, PASSWORD)


def test_the_mcp_delete_tool_takes_the_filters(ms: Memsearch) -> None:
    from memsearch.server.mcp import TOOL_BY_NAME, tool_message

    ids = notes(ms)
    tool = TOOL_BY_NAME["mem_delete"]
    assert tool.run(ms, {"tags": ["ops"], "dry_run": True}) == {"would_delete": [ids["rotate"], ids["vault"]]}
    assert tool.run(ms, {"refs": ["vault"], "dry_run": True}) == {"would_delete": [ids["vault"]]}
    assert ms.count() == 5
    for arguments, words in (
        ({}, "argument 'refs' are missing"),
        ({"refs": [1], "tags": ["ops"]}, "argument 'refs' and filters"),
        ({"tags": "ops", "everything": "yes"}, "argument 'everything' must be true or false"),
    ):
        with pytest.raises(InvalidInputError) as refused:
            tool.run(ms, arguments)
        assert tool_message(refused.value).startswith(words)
    assert tool.run(ms, {"tags": ["ops"], "project": "work"}) == {"deleted": [ids["rotate"]]}
    assert tool.run(ms, {"refs": ["vault"]}) == {"deleted": [ids["vault"]]}
    assert tool.run(ms, {"everything": True}) == {"deleted": [ids["untagged"], ids["milk"], ids["lunch"]]}
    assert ms.count() == 0


def test_http_deletes_by_filter(served: Served) -> None:
    for text, tags in (("deploy key in the vault", ["ops"]), ("lunch on friday", ["food"]), ("rotate keys", ["ops"])):
        assert served.request("POST", "/add", {"text": text, "tags": tags}).status == 200
    assert served.request("DELETE", "/memories?tag=ops&dry_run=true").json() == {"would_delete": [3, 1]}
    refused = served.request("DELETE", "/memories")
    assert refused.status == 400 and "refs are missing" in refused.json()["error"]
    assert served.request("DELETE", "/memories/2?tag=ops").status == 400
    assert served.request("DELETE", "/memories?tag=ops").json() == {"deleted": [3, 1]}
    assert served.request("GET", "/stats").json()["memories"] == 1
    assert served.request("DELETE", "/memories/2").json() == {"deleted": [2]}


def test_an_edited_turn_with_facets_gets_the_facets_of_its_new_text(
    store_location: Path | str, encoder: Encoder
) -> None:
    turns = [("user", "I love hiking in the mountains."), ("assistant", "That sounds wonderful.")]
    chat = "\n".join(
        json.dumps({"session": "s1", "role": role, "text": text, "created_at": f"2024-05-01T10:0{n}:00Z"})
        for n, (role, text) in enumerate(turns)
    )
    with Memsearch(store_location, encoder=encoder) as ms:
        ms.store(create=True)
        ms.import_text(chat, source="chat.jsonl", fmt="chat", facets=True)
        turn = next(m for m in ms.list(Scope(kinds=("turn",), roles=("user",))))

        def facets() -> dict[str, str]:
            views = ms.store().views_with_vectors()
            return {view: text for i, view, text in views if i == turn.id and view.startswith("facet_")}

        assert facets() == {"facet_preferences": "user: I love hiking in the mountains."}
        ms.update(turn.id, text="user: I ran a marathon yesterday.")
        assert facets() == {"facet_events": "user: I ran a marathon yesterday."}
        assert ms.store().view_names(turn.id) == ["context", "facet_events", "next"]
