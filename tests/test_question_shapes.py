"""Every shape of asking when asks the same (issue 33): "Which year did …", "How many weeks ago did …",
"What was the date when …" are read as "When did …" by the parse (dates.as_when), so the legs search
the event's words alone, and they ask when without asking for a name."""

from __future__ import annotations

import pytest

from memsearch.retrieval.answers import asks_name
from memsearch.retrieval.dates import as_when, asks_when
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


# A time word asks when only as the question's frame: followed by an auxiliary, a preposition, a
# possessive, a subject or the clause's end ("Which weekend did …", "which week in May", "in which
# month?"), never as the first half of a noun ("which weekend bag", "what is the time limit"); a
# count of time units is a span only before an auxiliary, "ago", "passed", "since" …, never "how
# many days of PTO". Each row: the query, whether it asks when, whether it asks for a name.
FRAMES = [
    # the shape set's frames and other ways of asking when
    (WHEN, True, False),
    ("Which year did Melanie paint a sunrise?", True, False),
    ("In which month did Melanie paint a sunrise?", True, False),
    ("On what date did Melanie paint a sunrise?", True, False),
    ("Around what time did Melanie paint a sunrise?", True, False),
    ("what exact day did Melanie paint a sunrise?", True, False),
    ("How long ago did Melanie paint a sunrise?", True, False),
    ("How many weeks ago did Melanie paint a sunrise?", True, False),
    ("What was the date when Melanie painted a sunrise?", True, False),
    ("What was the date of the outage?", True, False),
    ("Which weekend did Ana go camping?", True, False),
    ("which week in May was the outage?", True, False),
    ("The release shipped in which month?", True, False),
    ("which weekends are free", True, False),
    ("In which month's game did John score most?", True, False),
    ("what year we moved the database", True, False),
    ("what day of the week is trash pickup", True, False),
    ("What time should I leave for the airport?", True, False),
    ("How many weeks passed between adopting Coco and Shadow?", True, False),
    ("After how many days did the build go green?", True, False),
    ("how much time did the migration take", True, False),
    ("How many hours did the migration take?", True, False),
    ("How many days since the last deploy?", True, False),
    ("The build took how many minutes?", True, False),
    # ordinary questions of a notes folder: a time word that is not the frame
    ("Which weekend bag did I buy?", False, True),
    ("Which time slot did we book?", False, True),
    ("What is the time limit for the exam?", False, False),
    ("How many days of PTO do I have left?", False, False),
    ("Which season ticket did Ana get?", False, True),
    ("Which date format does the API use?", False, True),
    ("what time zone is the server in", False, False),
    ("Which day rate did the contractor quote?", False, True),
    ("Which time period does the quarterly report cover?", False, True),
    ("Which month-end checklist is current?", False, True),
    ("What is the weekend schedule for the cabin?", False, False),
    ("What was the date range of the export?", False, False),
    ("How many hours of video did we record?", False, False),
    ("How many years of experience does the new hire have?", False, False),
    ("How many weeks of leave did Ana take?", False, False),
    ("How many days a week is the gym open?", False, False),
    ("how much time off is left", False, False),
    ("What day care did Ana choose for Leo?", False, False),
]


@pytest.mark.parametrize(("query", "when", "name"), FRAMES)
def test_a_time_word_asks_when_only_as_the_questions_frame(query: str, when: bool, name: bool) -> None:
    assert (asks_when(query), asks_name(query)) == (when, name)
    parsed = parse_query(query)
    assert (parsed.asks_when, parsed.asks_name) == (when, name)
