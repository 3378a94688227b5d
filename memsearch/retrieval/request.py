"""What a search is asked: the request and its validation, with the lists of modes and granularities."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memsearch.choices import GRANULARITIES, MODES
from memsearch.errors import InvalidInputError
from memsearch.store.base import EVERYTHING, Scope

LEXICAL, VECTOR = "lexical", "vector"
MAX_K = 1000


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

    @property
    def records_access(self) -> bool:
        return self.touch and self.as_of is None
