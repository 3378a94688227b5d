"""The sign that a question asks for a name (who, where, which …) and that a memory names
something, for the `names` adjustment: what `when` does for dates, for people, places and titles."""

from __future__ import annotations

import re
from collections.abc import Collection

from memsearch.retrieval.dates import TIME_FRAME
from memsearch.timeutil import MONTHS, WEEKDAYS

# "Which year did", "in which month", "which week's": a time, not a name (the `when` adjustment's);
# "which weekend bag", "which time slot" ask for a name (dates.TIME_FRAME).
_ASKS_NAME = re.compile(
    rf"\b(?:who|whom|whose|where|which(?! {TIME_FRAME})"
    r"|what (?:\w+ )?(?:is|was|are|were) (?:the )?names?|name of|called)\b",
    re.IGNORECASE,
)
# Each sentence's first word is capitalised whatever it is; so is a speaker's label ("Ana: …").
_SENTENCE_BREAK = re.compile(r"[.!?:;\n]+")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")
_FIRST_PERSON = frozenset({"I", "I'm", "I've", "I'll", "I'd", "I’m", "I’ve", "I’ll", "I’d"})
# Capitalised, but dates rather than names (the `when` adjustment's business).
_DATE_WORDS = frozenset(MONTHS) | frozenset(WEEKDAYS) | {f"{day}s" for day in WEEKDAYS}


def asks_name(query: str) -> bool:
    """Whether the query asks for a name: who, where, which …, what is X called or named."""
    return _ASKS_NAME.search(query) is not None


def names_something(text: str, speakers: Collection[str] = ()) -> bool:
    """Whether the text names something (a person, place or title): a capitalised word that does
    not open its sentence, other than "I", a month or weekday, an acronym (JWT, YAML: identifiers
    more often than answers) and the speakers' own names (in a conversation those label the
    memories rather than answer a question about them)."""
    for sentence in _SENTENCE_BREAK.split(text):
        for word in _WORD.findall(sentence)[1:]:
            if not word[0].isupper() or word in _FIRST_PERSON or word in speakers:
                continue
            if word.lower() not in _DATE_WORDS and not (len(word) > 1 and word.isupper()):
                return True
    return False
