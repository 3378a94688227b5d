"""What a search is asked: the request and its validation, with the lists of modes and granularities."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from memsearch.choices import GRANULARITIES, MODES, RERANK_METHODS
from memsearch.errors import InvalidInputError
from memsearch.store.base import EVERYTHING, Scope

LEXICAL, VECTOR = "lexical", "vector"
MAX_K = 1000
BOOST_FIELDS = ("tag", "project")
DEFAULT_BOOST = 1.5


@dataclass(frozen=True)
class Boost:
    """siftcoder's boostFn (/focus): memories with this tag or project have their score × factor."""

    field: str  # tag | project
    value: str
    factor: float = DEFAULT_BOOST

    def __post_init__(self) -> None:
        if self.field not in BOOST_FIELDS:
            raise InvalidInputError(f"must be tag:NAME or project:NAME, not {self.field!r}", field="boost")
        if not self.value.strip():
            raise InvalidInputError(f"{self.field}: needs a name", field="boost")
        if isinstance(self.factor, bool) or not isinstance(self.factor, int | float) or not math.isfinite(self.factor):
            raise InvalidInputError(f"factor must be a finite number, not {self.factor!r}", field="boost")
        if not 0 < self.factor <= 100:
            raise InvalidInputError(f"factor must be above 0 and at most 100, not {self.factor:g}", field="boost")

    @classmethod
    def parse(cls, text: str) -> Boost:
        """`tag:NAME`, `project:NAME`, optionally `=FACTOR` (default 1.5)."""
        spec, _, factor = text.rpartition("=") if "=" in text else (text, "", "")
        kind, colon, value = spec.partition(":")
        if not colon:
            raise InvalidInputError(f"must be tag:NAME[=FACTOR] or project:NAME[=FACTOR], not {text!r}", field="boost")
        try:
            number = float(factor) if factor else DEFAULT_BOOST
        except ValueError:
            raise InvalidInputError(f"factor must be a number, not {factor!r}", field="boost") from None
        return cls(kind.strip(), value.strip(), number)

    def matches(self, tags: tuple[str, ...], project: str | None) -> bool:
        return self.value in tags if self.field == "tag" else project == self.value

    def __str__(self) -> str:
        return f"{self.field}:{self.value}={self.factor:g}"


@dataclass(frozen=True)
class SearchRequest:
    query: str
    k: int | None = None  # None: the profile's k
    mode: str = "auto"
    scope: Scope = EVERYTHING
    as_of: datetime | None = None  # "now" for decay; a search with it changes nothing
    max_tokens: int | None = None  # overrides the profile's token budget
    touch: bool = True  # record the access on the returned memories
    granularity: str = "turn"  # turn: turns and notes; session: session chunks (and notes)
    boosts: tuple[Boost, ...] = ()  # per-search score multipliers (siftcoder's boostFn)
    rerank: str | None = None  # off | deterministic | llm; None: the profile's
    max_ms: int | None = None  # latency budget: LLM stages that would not fit are skipped

    def __post_init__(self) -> None:
        if not self.query.strip():
            raise InvalidInputError("the query is empty; say what to search for")
        if self.mode not in MODES:
            raise InvalidInputError(f"unknown mode {self.mode!r} (choose from {', '.join(MODES)})")
        if self.k is not None and not 1 <= self.k <= MAX_K:
            raise InvalidInputError(f"k must be from 1 to {MAX_K}, not {self.k}")
        if self.granularity not in GRANULARITIES:
            raise InvalidInputError(f"granularity must be turn or session, not {self.granularity!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise InvalidInputError(f"must be at least 1, not {self.max_tokens}", field="max_tokens")
        if self.rerank is not None and self.rerank not in RERANK_METHODS:
            raise InvalidInputError(f"must be one of {', '.join(RERANK_METHODS)}, not {self.rerank!r}", field="rerank")
        if self.max_ms is not None and not 1 <= self.max_ms <= 600_000:
            raise InvalidInputError(f"must be from 1 to 600000 milliseconds, not {self.max_ms}", field="max_ms")

    @property
    def records_access(self) -> bool:
        return self.touch and self.as_of is None
