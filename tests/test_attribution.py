"""The `attribution` adjustment: who in the window says it (memsearch.retrieval.attribution)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memsearch.models import Memory, content_hash
from memsearch.profiles import Adjustment, load_profile
from memsearch.retrieval.attribution import Attribution, attribute, attribute_windows, share, window_legs
from memsearch.retrieval.candidates import Candidate
from memsearch.retrieval.scoring import QueryFacts
from tests.conftest import T0


def turn(memory_id: int, position: int, session: str = "s1") -> Memory:
    return Memory(
        id=memory_id, key=None, text=f"turn {memory_id}", created_at=T0, last_accessed_at=T0, access_count=0,
        importance=0.5, priority=1.0, pinned=False, project=None, namespace=None, session=session, role="A",
        tags=(), metadata={}, content_hash=content_hash(f"turn {memory_id}"), kind="turn", conversation="c",
        position=position,
    )  # fmt: skip


def candidate(memory: Memory, cosine: float, terms: dict[str, float]) -> Candidate:
    return Candidate(memory, {}, cosine=cosine, fusion=sum(terms.values()), fusion_terms=terms)


REACH = {"lexical": (2, 2), "lexical_prev": (1, 0)}


def test_window_legs_are_the_legs_over_context_and_prev() -> None:
    legs = load_profile("default").legs
    assert window_legs(legs) == {"lexical": (2, 2), "lexical_prev": (1, 0), "vector_context": (2, 2)}


def test_share_is_own_over_best_or_an_exponential_of_the_gap() -> None:
    assert share(0.6, 0.6, None) == 1.0
    assert share(0.45, 0.6, None) == pytest.approx(0.75)
    assert share(0.5, 0.6, 0.05) == pytest.approx(0.1353352832)  # exp(-2)
    assert share(-0.1, 0.6, None) == 0.0


def test_the_neighbour_keeps_the_share_of_its_window_terms_that_is_its_own() -> None:
    teller = candidate(turn(1, 5), 0.6, {"lexical": 0.1, "vector": 0.05})
    neighbour = candidate(turn(2, 6), 0.45, {"lexical": 0.1, "vector": 0.05})
    out = attribute([teller, neighbour], REACH, Attribution(strength=1.0))
    assert out[0].final == pytest.approx(0.15)  # the best of its window: untouched
    # the neighbour's lexical term keeps 0.45 / 0.6 = 0.75 of itself: 0.075 + 0.05
    assert out[1].final == pytest.approx(0.125)
    assert out[1].factors[0].name == "attribution"
    assert out[1].factors[0].detail == {"shares": {"lexical": pytest.approx(0.75)}}


def test_half_strength_takes_half_of_what_is_not_its_own() -> None:
    teller = candidate(turn(1, 5), 0.6, {"lexical": 0.1})
    neighbour = candidate(turn(2, 6), 0.45, {"lexical": 0.1})
    out = attribute([teller, neighbour], REACH, Attribution(strength=0.5))
    assert out[1].final == pytest.approx(0.1 * (1 - 0.5 * 0.25))


def test_each_leg_looks_at_its_own_window() -> None:
    # Position 6's prev window is 5–6; position 8 is outside it but inside its context window.
    weak = candidate(turn(1, 6), 0.4, {"lexical": 0.1, "lexical_prev": 0.1})
    before = candidate(turn(2, 5), 0.2, {})
    after = candidate(turn(3, 8), 0.8, {})
    out = attribute([weak, before, after], REACH, Attribution(strength=1.0))
    assert out[0].final == pytest.approx(0.1 * 0.5 + 0.1)


def test_other_sessions_and_notes_are_not_neighbours() -> None:
    lone = candidate(turn(1, 5), 0.3, {"lexical": 0.1})
    elsewhere = candidate(turn(2, 6, session="s2"), 0.9, {"lexical": 0.1})
    note = Candidate(replace(turn(3, 1), position=None, kind="note"), {}, 0.9, 0.1, {"lexical": 0.1})
    out = attribute([lone, elsewhere, note], REACH, Attribution(strength=1.0))
    assert [c.final for c in out] == pytest.approx([0.1, 0.1, 0.1])
    assert out[2].factors == ()


def test_the_profile_adjustment_runs_for_a_question_that_asks_when_only() -> None:
    profile = load_profile("default")
    profile = replace(profile, adjust=(*profile.adjust, Adjustment("attribution", factor=1.0)))
    teller = candidate(turn(1, 5), 0.6, {"lexical": 0.1})
    neighbour = candidate(turn(2, 6), 0.3, {"lexical": 0.1})
    assert attribute_windows([teller, neighbour], profile, QueryFacts())[1].final == pytest.approx(0.1)
    asked = attribute_windows([teller, neighbour], profile, QueryFacts(asks_when=True))
    assert asked[1].final == pytest.approx(0.05)
