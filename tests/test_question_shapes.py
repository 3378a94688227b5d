"""Every shape of asking when asks the same (issue 33): "Which year did …", "How many weeks ago did …",
"What was the date when …" are read as "When did …" by the parse (dates.as_when), so the legs search
the event's words alone, and they ask when without asking for a name."""

from __future__ import annotations

import pytest

from memsearch.retrieval.dates import as_when
from memsearch.retrieval.query import parse_query

WHEN = "When did Melanie paint a sunrise?"


@pytest.mark.parametrize(
    ("query", "read"),
    [
        ("Which year did Melanie paint a sunrise?", WHEN),
        ("In which month did Melanie paint a sunrise?", WHEN),
        ("On what date did Melanie paint a sunrise?", WHEN),
        ("Around what time did Melanie paint a sunrise?", WHEN),
        ("what exact day did Melanie paint a sunrise?", WHEN),
        ("How long ago did Melanie paint a sunrise?", WHEN),
        ("How many weeks ago did Melanie paint a sunrise?", WHEN),
        ("how much time ago did Melanie paint a sunrise?", WHEN),
        ("What was the date when Melanie painted a sunrise?", "When Melanie painted a sunrise?"),
        ("What is the day that the office moves?", "When the office moves?"),
        ("Which year was Jon in Paris?", "When was Jon in Paris?"),
        # not a time frame opening the question: as it is
        (WHEN, WHEN),
        ("How long has Nate had his turtles?", "How long has Nate had his turtles?"),  # a duration
        ("How many years was John with his team?", "How many years was John with his team?"),
        ("In which month's game did John score most?", "In which month's game did John score most?"),
        ("Which city was Tim in?", "Which city was Tim in?"),
        ("Tell me which year did we move", "Tell me which year did we move"),
        ("what time zone is the server in", "what time zone is the server in"),
        ("", ""),
    ],
)
def test_as_when_reads_a_time_frame_as_when(query: str, read: str) -> None:
    assert as_when(query) == read


@pytest.mark.parametrize(
    "query",
    [
        "Which year did Melanie paint a sunrise?",
        "In which month did Melanie paint a sunrise?",
        "How many weeks ago did Melanie paint a sunrise?",
        "Around what time did Melanie paint a sunrise?",
    ],
)
def test_every_shape_of_asking_when_searches_as_when(query: str) -> None:
    shaped, when = parse_query(query), parse_query(WHEN)
    assert shaped.text == when.text
    assert shaped.lexical == when.lexical
    assert shaped.word_counts == when.word_counts
    assert shaped.content_words == when.content_words
    assert shaped.asks_when and not shaped.asks_name


def test_what_a_query_asks_is_read_from_it_as_written() -> None:
    # the route reads "how many" as it was asked, though the legs search "When did …"
    query = parse_query("How many weeks ago did Jon visit networking events?")
    assert query.text == "When did Jon visit networking events?"
    assert query.intents == ("aggregation",)
    assert parse_query(query.text).intents == ("temporal",)
    # a duration keeps its words: "for three years" answers it
    duration = parse_query("How long has Nate had his turtles?")
    assert duration.text == "How long has Nate had his turtles?" and "long" in duration.lexical.words
