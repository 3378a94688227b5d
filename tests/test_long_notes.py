"""Long notes (issue 8, item 5): a note longer than the model's window is embedded in chunks and
scores by its best one, in both stores; one memory's size is capped with a clear error."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsearch.api import Memsearch
from memsearch.embedding import Encoder
from memsearch.errors import ImportLineError, TextTooLongError
from memsearch.models import NewMemory
from memsearch.operations import MAX_TEXT_CHARS
from memsearch.retrieval.request import SearchRequest
from memsearch.text import CHUNK_PIECES, chunk_spans, embedding_chunks, unit_pattern, word_pieces

TOPICS = ("marketing budget", "slide deck", "hiring plan", "office chairs", "quarterly review", "travel policy")
FACT = "The spare generator fuel is kept in shed number nine, behind the greenhouse."


def long_note() -> str:
    """About 1,500 words of meeting minutes with one fact three quarters in."""
    sentences = [
        f"In meeting {i} the team went over the {TOPICS[i % len(TOPICS)]} and agreed to revisit item {i} next week."
        for i in range(80)
    ]
    sentences.insert(60, FACT)
    return " ".join(sentences)


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_a_fact_late_in_a_long_note_is_found_by_vector_search(
    store_kind: str, db_path: Path, encoder: Encoder, request: pytest.FixtureRequest
) -> None:
    location = db_path if store_kind == "sqlite" else request.getfixturevalue("pg_url")
    text = long_note()
    assert text.index(FACT) > len(text) // 2
    with Memsearch(location, encoder=encoder) as ms:
        ms.store(create=True)
        ms.add_many(
            [
                NewMemory(text, key="minutes"),
                NewMemory("The lawn mower needs new blades before spring", key="mower"),
                NewMemory("Greenhouse tomatoes are watered every morning", key="tomatoes"),
                NewMemory("Diesel prices went up again this month", key="diesel"),
            ]
        )
        minutes = ms.get("minutes").id
        for mode in ("vector", "hybrid", "auto"):
            outcome = ms.search(SearchRequest("where is the spare generator fuel kept?", k=3, mode=mode, touch=False))
            assert outcome.results[0].id == minutes, (mode, [c.memory.key for c in outcome.results])
        # Explain is honest: the candidate's cosine is the score its vector leg ranked it by.
        outcome = ms.search(SearchRequest("where is the spare generator fuel kept?", k=3, mode="vector", touch=False))
        top = outcome.results[0]
        assert top.cosine is not None
        assert top.cosine == pytest.approx(top.legs["vector"].score, abs=1e-6)
        query = encoder.encode(["where is the spare generator fuel kept?"])[0]
        assert top.cosine > float(ms.store().vectors([minutes])[minutes] @ query) + 0.1, "the best chunk, not the first"
        chunk_views = [view for memory_id, view, _ in ms.store().views_with_vectors() if memory_id == minutes]
        assert len(chunk_views) == len(embedding_chunks(text)) - 1 >= 3


def test_one_memory_is_capped_with_a_clear_error(ms: Memsearch) -> None:
    with pytest.raises(TextTooLongError, match=r"100,001 characters, over the limit of 100,000"):
        NewMemory("x" * (MAX_TEXT_CHARS + 1))
    ms.add(NewMemory("kept"))
    with pytest.raises(ImportLineError, match="line 2: memory text is 100,005 characters"):
        ms.import_text('{"text": "fine"}\n{"text": "' + "y" * (MAX_TEXT_CHARS + 5) + '"}', source="big.jsonl")
    assert [m.text for m in ms.list()] == ["kept"]


@given(st.lists(st.sampled_from(["word", "longerword", "密", "!", " ", "\n", "x1", "🚀", "ab密"]), max_size=600))
def test_chunks_cover_the_text_within_the_budget(parts: list[str]) -> None:
    text = "".join(parts)
    spans = chunk_spans(text, pieces=40, overlap=8)
    if len(spans) == 1:
        return
    units = [(m.start(), m.end(), word_pieces(m.group())) for m in unit_pattern().finditer(text)]
    assert spans[0][0] == units[0][0] and spans[-1][1] == units[-1][1]
    for (start, end), (next_start, _) in itertools.pairwise(spans):
        assert start < next_start <= end, "chunks overlap and move on"
    for start, end in spans:
        inside = [cost for a, b, cost in units if start <= a and b <= end]
        assert sum(inside) <= 40 or len(inside) == 1
    assert CHUNK_PIECES + 2 <= 256  # with [CLS] and [SEP], within the model's window
