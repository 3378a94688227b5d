"""What a search is asked: the request and its validation, with the lists of modes and granularities."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memsearch.choices import GRANULARITIES, KINDS, MODES
from memsearch.errors import InvalidInputError
from memsearch.store.base import EVERYTHING, Scope
from memsearch.timeutil import parse_moment, utc_now

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
    **scope_fields: object,
) -> SearchRequest:
    """A validated search request from JSON values or option strings (every front end's one
    constructor); `scope_fields` are those of `scope_from_fields`, relative times resolving
    against `as_of` when it is given."""
    if not isinstance(query, str):
        raise InvalidInputError(f"must be a string, not {query!r}", field="query")
    for name, value in (("k", k), ("max_tokens", max_tokens)):
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
    )


# The fields `request_from_fields` takes besides the query, by the names the HTTP API and MCP use.
SCOPE_FIELDS = ("project", "namespace", "tags", "since", "until", "kinds", "conversation", "roles", "sessions")
REQUEST_FIELDS = ("k", "mode", "granularity", "max_tokens", "as_of", "touch", *SCOPE_FIELDS)
