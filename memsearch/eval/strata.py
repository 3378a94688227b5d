"""Strata of questions, for the breakdowns of `memsearch eval`: what a question's evidence says and
what shape the question has. Both read text only (the question's and its evidence turns'), so any
dataset whose questions name their evidence turns can be split the same way.

- `evidence`: `dated` when an evidence turn dates something by the lexicon the `when` adjustment
  reads (memsearch.retrieval.dates.says_when: "yesterday", "last week", "two days ago", "in May",
  "on Friday", a year …), else `undated` (its date is only its session's). Rules that favour
  memories which date something pay on the first and not on the second.
- `shape`: `how long` (a span of time: "how long ago", "for how long", "how many weeks ago", "how
  many days passed", "how much time"), `how many` (a count: how many, how much, how often),
  `which date` (which or what year, month, week, day, date, season or time; "what was the date"),
  `when`, or `other`, tried in that order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memsearch.retrieval.dates import says_when

EVIDENCE_VALUES = ("dated", "undated")
SHAPES = ("when", "how long", "how many", "which date", "other")
STRATA = {"evidence": EVIDENCE_VALUES, "shape": SHAPES}  # each breakdown's values, in the order reports show them

_UNIT = r"(?:minutes?|hours?|days?|nights?|weeks?|weekends?|months?|years?)"
_SHAPE_PATTERNS = (
    ("how long", re.compile(rf"\bhow (?:long|(?:many|much) {_UNIT}|much time)\b", re.IGNORECASE)),
    ("how many", re.compile(r"\bhow (?:many|much|often)\b", re.IGNORECASE)),
    (
        "which date",
        re.compile(
            r"\b(?:(?:which|what) (?:year|month|week|weekend|day|date|season|time)s?"
            r"|what (?:is|was) the (?:date|day|year|month|time))\b",
            re.IGNORECASE,
        ),
    ),
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
