"""Strata of questions, for the breakdowns of `memsearch eval`: what a question's evidence says and
what shape the question has. Both read text only (the question's and its evidence turns'), so any
dataset whose questions name their evidence turns can be split the same way.

- `evidence`: `dated` when an evidence turn dates something by the lexicon the `when` adjustment
  reads (memsearch.retrieval.dates.says_when: "yesterday", "last week", "two days ago", "in May",
  "on Friday", a year …), else `undated` (its date is only its session's). Rules that favour
  memories which date something pay on the first and not on the second.
- `shape`: `how long` (a span of time: "how long ago", "for how long", "how many weeks ago", "how
  many days passed", "how much time did it take"), `how many` (a count: how many, how much, how
  often, "how many days of PTO"), `which date` (which or what year, month, week, day, date, season
  or time as the question's frame: "which year did", "in which month?"; "what was the date"; not
  "which time slot"), `when`, or `other`, tried in that order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memsearch.retrieval.dates import ASKS_DATE, ASKS_SPAN, says_when

EVIDENCE_VALUES = ("dated", "undated")
SHAPES = ("when", "how long", "how many", "which date", "other")
STRATA = {"evidence": EVIDENCE_VALUES, "shape": SHAPES}  # each breakdown's values, in the order reports show them

# One source with the `when` adjustment's reading (dates.ASKS_SPAN, dates.ASKS_DATE): a time word
# counts only as the question's frame ("how many days of PTO" is a count, "which time slot" other).
_SHAPE_PATTERNS = (
    ("how long", ASKS_SPAN),
    ("how many", re.compile(r"\bhow (?:many|much|often)\b", re.IGNORECASE)),
    ("which date", ASKS_DATE),
    ("when", re.compile(r"\bwhen\b", re.IGNORECASE)),
)


def question_shape(question: str) -> str:
    """The question's shape (see the module's doc)."""
    return next((shape for shape, pattern in _SHAPE_PATTERNS if pattern.search(question)), "other")


def evidence_dating(evidence: Sequence[str]) -> str:
    """`dated` when one of the evidence texts dates something, else `undated`."""
    return "dated" if any(says_when(text) for text in evidence) else "undated"


def question_strata(question: str, evidence: Sequence[str]) -> dict[str, str]:
    """The question's value in each of STRATA."""
    return {"evidence": evidence_dating(evidence), "shape": question_shape(question)}
