"""What a search is asked: the request and its validation, with the lists of modes and granularities."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from memsearch.choices import GRANULARITIES, KINDS, MODES, RERANK_METHODS
from memsearch.errors import InvalidInputError
from memsearch.store.base import EVERYTHING, Scope
from memsearch.timeutil import parse_moment, utc_now

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


def _strings(field: str, value: object) -> tuple[str, ...]:
    """A list of strings from JSON or the command line (a lone string is one value)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise InvalidInputError(f"must be a list of strings, not {value!r}", field=field)
    return tuple(value)


def _optional_string(field: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InvalidInputError(f"must be a string, not {value!r}", field=field)
    return value


def _moment(field: str, value: object, now: datetime) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise InvalidInputError(f"must be a string, not {value!r}", field=field)
    return parse_moment(value, now=now, field=field)


def scope_from_fields(
    *,
    project: object = None,
    namespace: object = None,
    tags: object = None,
    since: object = None,
    until: object = None,
    kinds: object = None,
    conversation: object = None,
    roles: object = None,
    sessions: object = None,
    now: datetime | None = None,
) -> Scope:
    """The one way every front end (CLI, HTTP, MCP) turns filter fields into a `Scope`: JSON values
    or option strings are checked, and `since` / `until` may be ISO-8601 or relative to `now`
    (`7d`, `2w`, `3h`, `30m`, `today`, `yesterday`). Errors name the field at fault."""
    moment = now or utc_now()
    chosen_kinds = _strings("kinds", kinds)
    for kind in chosen_kinds:
        if kind not in KINDS:
            raise InvalidInputError(f"must be one of {', '.join(KINDS)}, not {kind!r}", field="kinds")
    return Scope(
        project=_optional_string("project", project),
        namespace=_optional_string("namespace", namespace),
        tags=_strings("tags", tags),
        since=_moment("since", since, moment),
        until=_moment("until", until, moment),
        kinds=tuple(dict.fromkeys(chosen_kinds)),
        conversation=_optional_string("conversation", conversation),
        roles=_strings("roles", roles),
        sessions=_strings("sessions", sessions),
    )


def request_from_fields(
    query: object,
    *,
    k: object = None,
    mode: object = None,
    granularity: object = None,
    max_tokens: object = None,
    as_of: object = None,
    touch: object = True,
    boost: object = None,
    rerank: object = None,
    max_ms: object = None,
    **scope_fields: object,
) -> SearchRequest:
    """A validated search request from JSON values or option strings (every front end's one
    constructor); `scope_fields` are those of `scope_from_fields`, relative times resolving
    against `as_of` when it is given."""
    if not isinstance(query, str):
        raise InvalidInputError(f"must be a string, not {query!r}", field="query")
    for name, value in (("k", k), ("max_tokens", max_tokens), ("max_ms", max_ms)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidInputError(f"must be a whole number, not {value!r}", field=name)
    for name, value in (("mode", mode), ("granularity", granularity)):
        _optional_string(name, value)
    now = utc_now()
    as_of_moment = _moment("as_of", as_of, now)
    return SearchRequest(
        query=query,
        k=k,  # type: ignore[arg-type]
        mode=str(mode or "auto"),
        scope=scope_from_fields(now=as_of_moment or now, **scope_fields),  # type: ignore[arg-type]
        as_of=as_of_moment,
        max_tokens=max_tokens,  # type: ignore[arg-type]
        touch=touch is not False,
        granularity=str(granularity or "turn"),
        boosts=tuple(Boost.parse(text) for text in _strings("boost", boost)),
        rerank=_optional_string("rerank", rerank),
        max_ms=max_ms,  # type: ignore[arg-type]
    )


# The fields `request_from_fields` takes besides the query, by the names the HTTP API and MCP use.
SCOPE_FIELDS = ("project", "namespace", "tags", "since", "until", "kinds", "conversation", "roles", "sessions")
REQUEST_FIELDS = (
    "k",
    "mode",
    "granularity",
    "max_tokens",
    "as_of",
    "touch",
    "boost",
    "rerank",
    "max_ms",
    *SCOPE_FIELDS,
)
