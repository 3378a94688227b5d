"""The pure retrieval stages, checked with the numbers the seed documents print."""

from __future__ import annotations

import math
from datetime import date, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsearch.models import Memory, content_hash
from memsearch.profiles import Adjustment
from memsearch.retrieval.answers import asks_name, names_something
from memsearch.retrieval.candidates import Candidate, Factor, LegHit, rank_hits
from memsearch.retrieval.dates import asks_when, date_ranges, mentioned_ranges, says_when
from memsearch.retrieval.fusion import rrf
from memsearch.retrieval.scoring import QueryFacts, apply_adjustments, exponential_decay
from memsearch.retrieval.select import drop_exact_duplicates, rank_by_final, take_top
from memsearch.store.vectors import VectorIndex, vector_top
from memsearch.timeutil import SECONDS_PER_DAY
from tests.conftest import T0


def memory(
    memory_id: int, text: str = "x", days_old: float = 0.0, role: str | None = None, conversation: str | None = None
) -> Memory:
    created = T0 - timedelta(days=days_old)
    return Memory(
        id=memory_id, key=None, text=text, created_at=created, last_accessed_at=created, access_count=0,
        importance=0.5, priority=1.0, pinned=False, project=None, namespace=None, session=None, role=role,
        tags=(), metadata={}, content_hash=content_hash(text), conversation=conversation,
    )  # fmt: skip


def test_siftcoder_worked_example() -> None:
    # BM25 rank 1 + vector rank 4 beats BM25 rank 12 + vector rank 1 (siftcoder, "Worked example").
    legs = {"lexical": {1: LegHit(1, 9.0), 2: LegHit(12, 2.0)}, "vector": {1: LegHit(4, 0.7), 2: LegHit(1, 0.9)}}
    fused = rrf(legs, 60, {"lexical": 1.0, "vector": 1.0})
    assert fused[1][0] == pytest.approx(1 / 61 + 1 / 64)
    assert round(fused[1][0], 4) == 0.0320
    assert round(fused[2][0], 4) == 0.0303
    assert fused[1][0] > fused[2][0]
    assert fused[1][1] == {"lexical": 1 / 61, "vector": 1 / 64}


def test_rrf_weights_scale_each_leg() -> None:
    fused = rrf({"lexical": {7: LegHit(1, 1.0)}, "vector": {7: LegHit(2, 0.5)}}, 60, {"lexical": 2.0, "vector": 0.5})
    assert fused[7][0] == pytest.approx(2 / 61 + 0.5 / 62)


def test_a_hit_found_by_one_leg_gets_that_term_only() -> None:
    fused = rrf({"lexical": {3: LegHit(1, 1.0)}, "vector": {}}, 60, {})
    assert fused == {3: (1 / 61, {"lexical": 1 / 61})}


@given(st.permutations(["lexical", "vector", "facet", "extra"]), st.integers(1, 100))
def test_rrf_does_not_depend_on_the_order_of_its_lists(order: list[str], k: int) -> None:
    legs = {name: {i: LegHit(((i * (n + 3)) % 17) + 1, 0.0) for i in range(1, 9)} for n, name in enumerate(order)}
    reordered = {name: legs[name] for name in order}
    forward = rrf(legs, k, {})
    backward = rrf(dict(reversed(list(reordered.items()))), k, {})
    assert {key: value[0] for key, value in forward.items()} == pytest.approx(
        {key: value[0] for key, value in backward.items()}
    )


def test_siftcoder_decay_numbers() -> None:
    tau = 7 * SECONDS_PER_DAY
    assert exponential_decay(1 * SECONDS_PER_DAY, tau) == pytest.approx(0.87, abs=0.005)  # "yesterday gets 0.87"
    assert exponential_decay(30 * SECONDS_PER_DAY, tau) == pytest.approx(0.013, abs=0.001)  # "a month ago 0.013"
    assert exponential_decay(tau, tau) == pytest.approx(1 / math.e)
    assert exponential_decay(0, tau) == 1.0


def test_decay_uses_created_at_against_now() -> None:
    candidates = [
        Candidate(memory(1, days_old=1), {}, fusion=0.032),
        Candidate(memory(2, days_old=30), {}, fusion=0.032),
    ]
    decayed = apply_adjustments(candidates, [Adjustment("decay", tau_days=7)], T0)
    assert decayed[0].final == pytest.approx(0.032 * math.exp(-1 / 7))
    assert decayed[1].final == pytest.approx(0.032 * math.exp(-30 / 7))
    assert decayed[0].factors[0].detail == {"clock": "created_at", "age_days": pytest.approx(1.0), "tau_days": 7}


def test_memory_from_the_future_is_not_boosted() -> None:
    (decayed,) = apply_adjustments([Candidate(memory(1, days_old=-3), {}, fusion=1.0)], [Adjustment("decay")], T0)
    assert decayed.final == 1.0


@given(
    st.floats(0, 1, allow_nan=False),
    st.lists(st.tuples(st.sampled_from(["mul", "add"]), st.floats(0, 3, allow_nan=False)), max_size=6),
)
def test_explained_factors_compose_to_the_final_score(fusion: float, factors: list[tuple[str, float]]) -> None:
    candidate = Candidate(memory(1), {}, fusion=fusion)
    expected = fusion
    for index, (op, value) in enumerate(factors):
        candidate = candidate.with_factor(Factor(f"f{index}", op, value))  # type: ignore[arg-type]
        expected = expected * value if op == "mul" else expected + value
    assert candidate.final == pytest.approx(expected)


def test_duplicates_and_limit_are_marked_not_removed() -> None:
    ranked = rank_by_final(
        [
            Candidate(memory(1, "same words"), {}, fusion=0.5),
            Candidate(memory(2, "same  words"), {}, fusion=0.4),
            Candidate(memory(3, "other"), {}, fusion=0.3),
            Candidate(memory(4, "fourth"), {}, fusion=0.2),
        ]
    )
    selected = take_top(drop_exact_duplicates(ranked), 2)
    assert [(c.id, c.dropped) for c in selected] == [
        (1, None),
        (2, "duplicate of id 1"),
        (3, None),
        (4, "limit"),
    ]


def test_ties_are_broken_deterministically() -> None:
    ranked = rank_by_final([Candidate(memory(5), {}, fusion=0.1), Candidate(memory(2), {}, fusion=0.1)])
    assert [c.id for c in ranked] == [2, 5]


def test_vector_top_ranks_by_cosine_and_respects_the_mask() -> None:
    matrix = np.eye(4, dtype=np.float32)
    index = VectorIndex(ids=np.array([10, 11, 12, 13]), matrix=matrix)
    query = np.array([0.1, 0.9, 0.3, 0.0], dtype=np.float32)
    assert [i for i, _ in vector_top(index, query, 3)] == [11, 12, 10]
    mask = np.array([True, False, True, True])
    assert [i for i, _ in vector_top(index, query, 2, mask)] == [12, 10]
    assert vector_top(index, query, 5, np.zeros(4, bool)) == []
    assert rank_hits([(11, 0.9), (12, 0.3)]) == {11: LegHit(1, 0.9), 12: LegHit(2, 0.3)}


# -- dates: the time leg's ranges and the "when" adjustment ------------------------------------------


def test_date_ranges_resolve_a_month_without_a_year_against_today() -> None:
    today = date(2023, 10, 20)
    assert date_ranges("camping in June?", today) == [(date(2023, 6, 1), date(2023, 6, 30))]
    assert date_ranges("in December", today) == [(date(2022, 12, 1), date(2022, 12, 31))]  # the latest up to today
    assert date_ranges("camping in June?") == []  # without today only absolute dates count
    assert date_ranges("in May 2021", today) == [(date(2021, 5, 1), date(2021, 5, 31))]  # not twice
    assert date_ranges("may I ask when?", today) == []  # "may" the verb


@pytest.mark.parametrize(
    ("query", "span"),
    [
        ("Where was John between August 11 and August 15 2023?", (date(2023, 8, 11), date(2023, 8, 15))),
        ("between August 11 and 15, 2023", (date(2023, 8, 11), date(2023, 8, 15))),
        ("between 11 May and 2 June 2023", (date(2023, 5, 11), date(2023, 6, 2))),
        ("between the 3rd and 9th of July 2023", (date(2023, 7, 3), date(2023, 7, 9))),
        ("between December 28 and January 3, 2024", (date(2023, 12, 28), date(2024, 1, 3))),  # across the year
    ],
)
def test_date_ranges_read_a_span_whose_year_is_named_once(query: str, span: tuple[date, date]) -> None:
    assert date_ranges(query) == [span]


@pytest.mark.parametrize(
    ("query", "shifted"),
    [
        ("the puppy she got two weeks before August 11, 2023", (date(2023, 7, 25), date(2023, 7, 31))),
        ("what did John do the week before August 3, 2023?", (date(2023, 7, 27), date(2023, 8, 2))),
        ("last weekend before April 10, 2023", (date(2023, 4, 8), date(2023, 4, 9))),  # a Monday
        ("the weekend after 10 April 2023", (date(2023, 4, 15), date(2023, 4, 16))),
        ("a few days before 10 April 2023", (date(2023, 4, 5), date(2023, 4, 8))),
        ("three days before on 5 May 2023", (date(2023, 5, 2), date(2023, 5, 2))),
        ("the day after 2023-05-03", (date(2023, 5, 4), date(2023, 5, 4))),
        ("the month before May 2023", (date(2023, 4, 1), date(2023, 4, 30))),
        ("two months before 3 May 2023", (date(2023, 3, 1), date(2023, 3, 31))),
        ("a year before 2022", (date(2021, 1, 1), date(2021, 12, 31))),
    ],
)
def test_date_ranges_shift_a_date_as_the_words_before_it_say(query: str, shifted: tuple[date, date]) -> None:
    named, *rest = date_ranges(query)
    assert rest == [shifted]  # the named date stays too: what was said on it may name the other
    assert named not in rest


@pytest.mark.parametrize(
    ("text", "ranges"),
    [  # said on Thursday 4 May 2023
        ("My mom and I made dinner together last night!", [(date(2023, 5, 3), date(2023, 5, 3))]),
        ("I went to a support group yesterday", [(date(2023, 5, 3), date(2023, 5, 3))]),
        ("the day before yesterday", [(date(2023, 5, 2), date(2023, 5, 2))]),
        ("this morning I ran", [(date(2023, 5, 4), date(2023, 5, 4))]),
        ("we hiked two weeks ago", [(date(2023, 4, 17), date(2023, 4, 23))]),  # a week ± 3 days
        ("a few days ago", [(date(2023, 4, 29), date(2023, 5, 2))]),
        ("a month ago", [(date(2023, 4, 1), date(2023, 4, 30))]),
        ("3 years ago", [(date(2020, 1, 1), date(2020, 12, 31))]),
        ("last week was busy", [(date(2023, 4, 24), date(2023, 5, 3))]),  # last calendar week or the last 7 days
        ("last weekend I ran", [(date(2023, 4, 29), date(2023, 4, 30))]),
        ("Last Saturday", [(date(2023, 4, 29), date(2023, 4, 29))]),
        ("on Thursday", [(date(2023, 4, 27), date(2023, 4, 27))]),  # a past weekday, not the day said
        ("last month", [(date(2023, 4, 1), date(2023, 4, 30))]),
        ("last year", [(date(2022, 1, 1), date(2022, 12, 31))]),
        ("this week", [(date(2023, 5, 1), date(2023, 5, 4))]),
        ("last summer near Fort Wayne", [(date(2022, 6, 1), date(2022, 8, 31))]),
        ("last winter", [(date(2022, 12, 1), date(2023, 2, 28))]),
        ("I started in March", [(date(2023, 3, 1), date(2023, 3, 31))]),
        ("on 2 January 2021", [(date(2021, 1, 2), date(2021, 1, 2))]),
        ("next week we fly", []),  # a plan, not the event
        ("I love painting sunsets", []),
    ],
)
def test_mentioned_ranges_resolve_a_memory_s_words_against_the_day_said(
    text: str, ranges: list[tuple[date, date]]
) -> None:
    assert mentioned_ranges(text, date(2023, 5, 4)) == ranges


_RELATIVE_WORDS = st.sampled_from(
    ["yesterday", "last night", "the day before yesterday", "today", "this morning", "this week", "this month",
     "this year", "last week", "the past week", "last weekend", "last month", "last year", "last monday",
     "on Sunday", "this past Saturday", "last spring", "last summer", "last fall", "last winter"]
    + [f"{count} {unit}{plural} ago" for count in ("a", "two", "10", "99", "a few", "a couple of", "several")
       for unit in ("day", "week", "month", "year") for plural in ("", "s")]
)  # fmt: skip


@given(said=st.dates(date(11, 1, 1), date(9989, 12, 31)), words=_RELATIVE_WORDS)
def test_relative_words_resolve_to_the_past_or_the_day_said(said: date, words: str) -> None:
    """Whatever the day (memsearch keeps moments from the year 11 to 9989), never an error: words
    reaching before the calendar's start resolve to nothing."""
    for start, end in mentioned_ranges(f"I did it {words}.", said):
        assert start <= end <= said
    assert mentioned_ranges(f"I did it {words}.", date(2023, 5, 4))  # a day in the middle resolves them all


_SHIFTS = ["two weeks before", "99 years before", "99 months after", "the weekend after", "the week before",
           "a few days after", "the month before", "the year after", "last weekend before"]  # fmt: skip


@given(anchor=st.dates(date(1900, 1, 1), date(2099, 12, 31)), words=st.sampled_from(_SHIFTS))
def test_shifted_dates_are_ranges(anchor: date, words: str) -> None:
    for start, end in date_ranges(f"what happened {words} {anchor.isoformat()}?"):
        assert start <= end


def test_a_season_is_the_latest_one_over_by_the_day_said() -> None:
    assert mentioned_ranges("last summer", date(2023, 9, 1)) == [(date(2023, 6, 1), date(2023, 8, 31))]
    assert mentioned_ranges("last winter", date(2023, 2, 10)) == [(date(2021, 12, 1), date(2022, 2, 28))]


@pytest.mark.parametrize(
    ("query", "asks"),
    [
        ("When did Melanie paint a sunrise?", True),
        ("what year did we move the database", True),
        ("How long has Nate had his turtles?", True),
        # every shape of asking when asks the same (issue 33)
        ("How many weeks ago did Jon visit networking events?", True),
        ("After how many days did the build go green?", True),
        ("how much time did the migration take", True),
        ("Which week did Tim visit the UK?", True),
        ("In what season did we move the office?", True),
        ("What was the date of the outage?", True),
        ("where is the deploy key?", False),
        ("what did Ana say about the kayak", False),
        ("how many games has John won", False),  # a count, not a time
        ("how much did the trip cost", False),
    ],
)
def test_asks_when(query: str, asks: bool) -> None:
    assert asks_when(query) is asks


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("I went to a support group yesterday", True),
        ("we went camping two weekends ago", True),
        ("I've had them for 3 years now", True),
        ("rotated the key last Friday", True),
        ("released in May", True),
        ("deployed on 2024-03-02", True),
        ("the deploy key is in the vault", False),
        ("I love painting sunsets", False),
    ],
)
def test_says_when(text: str, says: bool) -> None:
    assert says_when(text) is says


def test_when_factor_applies_only_to_when_questions_and_dated_memories() -> None:
    dated = Candidate(memory(1, text="we went camping last week"), {}, fusion=1.0)
    undated = Candidate(memory(2, text="camping is fun"), {}, fusion=1.0)
    when = Adjustment("when", factor=1.2)
    asked = apply_adjustments([dated, undated], [when], T0, facts=QueryFacts(asks_when=True))
    assert [c.final for c in asked] == [pytest.approx(1.2), pytest.approx(1.0)]
    assert asked[0].factors[0] == Factor("when", "mul", 1.2, {"says_when": True})
    assert [c.factors for c in apply_adjustments([dated, undated], [when], T0)] == [(), ()]


# -- answers: the "names" adjustment ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "asks"),
    [
        ("Which city have both Jean and John visited?", True),
        ("Where did Ana go camping?", True),
        ("Who gave Tim the book?", True),
        ("What is the name of Caroline's dog?", True),
        ("what was that library called", True),
        ("What did Ana say about the kayak?", False),
        ("When did Melanie paint a sunrise?", False),
        ("how many games has John won", False),
        # which year, month, week …: a time (the `when` adjustment's), not a name
        ("Which year did Melanie paint a sunrise?", False),
        ("In which month's game did John score most?", False),
        ("Which weekend did Ana go camping?", False),
        ("Which country was Tim visiting in the second week of November?", True),
    ],
)
def test_asks_name(query: str, asks: bool) -> None:
    assert asks_name(query) is asks


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("John: I was in Chicago, it was awesome!", True),
        ("we took the train to Rome last week", True),
        ('I\'m playing "Xeonoblade Chronicles" now', True),
        ("Caroline: Thanks, Melanie! I went hiking.", False),  # the speakers' own names
        ("Great. Sounds fun! I'll come. Yes", False),  # sentence starts and "I"
        ("John: see you tomorrow", False),  # a speaker's label opens the text
        ("the deploy key is in the vault", False),
        ("We deploy on Tuesdays, never on Fridays in May", False),  # dates, not names
        ("Fixed null-deref when JWT was malformed in the YAML", False),  # acronyms
    ],
)
def test_names_something(text: str, names: bool) -> None:
    assert names_something(text, {"Caroline", "Melanie", "John"}) is names


def test_names_factor_applies_only_to_questions_asking_for_a_name() -> None:
    naming = Candidate(memory(1, text="Ana: we went to Lisbon", role="Ana"), {}, fusion=1.0)
    plain = Candidate(memory(2, text="Ana: we went away", role="Ana"), {}, fusion=1.0)
    names = Adjustment("names", factor=1.5)
    facts = QueryFacts(asks_name=True, speaker_words=frozenset({"Ana"}))
    asked = apply_adjustments([naming, plain], [names], T0, facts=facts)
    assert [c.final for c in asked] == [pytest.approx(1.5), pytest.approx(1.0)]
    assert asked[0].factors[0] == Factor("names", "mul", 1.5, {"names_something": True})
    assert [c.factors for c in apply_adjustments([naming, plain], [names], T0)] == [(), ()]


def test_about_factor_lowers_memories_that_involve_no_person_the_query_names() -> None:
    """Spoken by, in a conversation with, or naming the person: involved. A note about someone else
    in the same store is not, and is multiplied by the factor."""
    facts = QueryFacts(named=("Ana",), participants={"c1": frozenset({"Ana", "Ben"})})
    spoken = Candidate(memory(1, "I kayak", role="Ana", conversation="c1"), {}, fusion=1.0)
    addressed = Candidate(memory(2, "nice one", role="Ben", conversation="c1"), {}, fusion=1.0)
    named = Candidate(memory(3, "ana kayaks on sundays"), {}, fusion=1.0)
    other = Candidate(memory(4, "Jon kayaks on sundays"), {}, fusion=1.0)
    other_chat = Candidate(memory(5, "I kayak too", role="Jon", conversation="c2"), {}, fusion=1.0)
    about = Adjustment("about", factor=0.5)
    adjusted = apply_adjustments([spoken, addressed, named, other, other_chat], [about], T0, facts=facts)
    assert [c.final for c in adjusted] == [1.0, 1.0, 1.0, 0.5, 0.5]
    assert adjusted[3].factors[0] == Factor("about", "mul", 0.5, {"named": "Ana", "involved": False})
    assert [c.factors for c in apply_adjustments([other], [about], T0)] == [()]  # nobody named: no factor
    assert not QueryFacts(named=("Ana",)).involves(memory(6, "Anastasia kayaks"), "Ana")  # whole words
