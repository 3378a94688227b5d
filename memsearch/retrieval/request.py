"""What a search is asked: the request and its validation, with the lists of modes and granularities."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memsearch.arguments import check_scope
from memsearch.checks import check_text, shown
from memsearch.choices import GRANULARITIES, MODES
from memsearch.errors import InvalidInputError
from memsearch.fields import MAX_K, QUERY, REQUEST_FIELDS, REQUEST_NAMES, SCOPE_FIELDS, SCOPE_NAMES
from memsearch.scope import EVERYTHING, Scope
from memsearch.timeutil import parse_moment, to_iso, utc_now

if TYPE_CHECKING:
    from memsearch.profiles import Profile

__all__ = ["GRANULARITIES", "MAX_K", "MODES", "REQUEST_NAMES", "SCOPE_NAMES", "Boost", "SearchRequest"]

LEXICAL, VECTOR = "lexical", "vector"
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
    """What a search is asked. Its values are checked, once, here, by the search operation's fields
    (memsearch.fields), the bounds every front end shares: a front end builds one from its values
    (`request_from_fields`) without checking them first."""

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
    profile: Profile | str | None = None  # a profile or its name; None: the default profile
    tau_days: float | None = None  # the profile's time-decay constant, changed for this search
    min_score: float | None = None  # results must score (final score) at least this; None: no floor

    def __post_init__(self) -> None:
        """A request that exists is valid: every stage (and `Memsearch.search_many`) relies on it."""
        QUERY.check(self.query)  # a string within the length limit every front end shares
        if not check_text("query", self.query).strip():
            raise InvalidInputError("the query is empty; say what to search for")
        for name in _SELF_CHECKED:
            _REQUEST[name].check(getattr(self, name))
        if self.mode is None or self.granularity is None:
            raise InvalidInputError("mode and granularity must be given")
        if self.touch is None:
            raise InvalidInputError("must be true or false, not None", field="touch")
        if self.as_of is not None and (not isinstance(self.as_of, datetime) or self.as_of.tzinfo is None):
            raise InvalidInputError(f"must be a time with its UTC offset, not {self.as_of!r}", field="as_of")
        if self.profile is not None and not isinstance(self.profile, str):
            from memsearch.profiles import Profile

            if not isinstance(self.profile, Profile):
                raise InvalidInputError(f"must be a profile or its name, not {self.profile!r}", field="profile")
        check_scope(self.scope)
        if not isinstance(self.boosts, tuple | list) or not all(isinstance(b, Boost) for b in self.boosts):
            raise InvalidInputError(f"must be a tuple of Boost, not {shown(self.boosts)}", field="boost")
        for boost in self.boosts:
            check_text("boost", boost.value)

    @property
    def records_access(self) -> bool:
        return self.touch and self.as_of is None

    def to_fields(self) -> dict[str, Any]:
        """The request as the search operation's JSON fields (what the CLI sends a server):
        `request_from_fields(**request.to_fields())` is the same request. A profile given as an
        object has no JSON form and is left out."""
        values: dict[str, Any] = {name: getattr(self.scope, name) for name in SCOPE_NAMES}
        values.update((name, getattr(self, name)) for name in REQUEST_NAMES if hasattr(self, name))
        values["boost"] = self.boosts
        values["profile"] = self.profile if isinstance(self.profile, str) else None
        fields = {name: _json_value(values[name]) for name in REQUEST_NAMES}
        return {"query": self.query} | {name: value for name, value in fields.items() if value is not None}


def _json_value(value: Any) -> Any:
    """A request value as JSON: a time in ISO-8601, a tuple as a list (None when empty)."""
    if isinstance(value, datetime):
        return to_iso(value)
    if isinstance(value, tuple):
        return [str(item) for item in value] or None  # a Boost prints as tag:NAME=FACTOR
    return value


def _moment(field: str, value: object, now: datetime) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return parse_moment(_REQUEST[field].check(value), now=now, field=field)


_SCOPE = {f.name: f for f in SCOPE_FIELDS}
_REQUEST = {f.name: f for f in REQUEST_FIELDS}
# The values SearchRequest's constructor checks as they are (the others are made into its types first).
_SELF_CHECKED = ("k", "mode", "max_tokens", "granularity", "rerank", "max_ms", "tau_days", "min_score", "touch")


def scope_from_fields(*, now: datetime | None = None, **fields: object) -> Scope:
    """The one way every front end (CLI, HTTP, MCP) turns filter fields (`SCOPE_NAMES`) into a
    `Scope`: JSON values or option strings are checked against the search operation's fields, and
    `since` / `until` may be ISO-8601 or relative to `now` (`7d`, `2w`, `3h`, `30m`, `3mo`, `1y`, `today`,
    `yesterday`). Errors name the field at fault."""
    unknown = sorted(set(fields) - set(_SCOPE))
    if unknown:
        raise InvalidInputError(f"is not a filter (known: {', '.join(SCOPE_NAMES)})", field=unknown[0])
    moment = now or utc_now()
    checked = {name: _SCOPE[name].check(value) for name, value in fields.items() if name not in ("since", "until")}
    return Scope(
        project=checked.get("project"),
        namespace=checked.get("namespace"),
        tags=tuple(checked.get("tags") or ()),
        since=_moment("since", fields.get("since"), moment),
        until=_moment("until", fields.get("until"), moment),
        kinds=tuple(dict.fromkeys(checked.get("kinds") or ())),
        conversation=checked.get("conversation"),
        roles=tuple(checked.get("roles") or ()),
        sessions=tuple(checked.get("sessions") or ()),
    )


def request_from_fields(query: object, **fields: object) -> SearchRequest:
    """A validated search request from JSON values or option values (every front end's one
    constructor, through `memsearch.operations.SEARCH`): `fields` are the search operation's
    request fields (`REQUEST_NAMES`), relative times resolving against `as_of` when it is given.
    `profile` may also be a `Profile`. Each value is checked once: the filters, times, boosts and
    profile as they are made into the request's types, the rest by `SearchRequest` itself."""
    unknown = sorted(set(fields) - set(_REQUEST))
    if unknown:
        raise InvalidInputError(f"is not a field of search (known: {', '.join(REQUEST_NAMES)})", field=unknown[0])
    profile = fields.pop("profile", None)
    if not _is_profile(profile):
        profile = _REQUEST["profile"].check(profile)
    now = utc_now()
    as_of = _moment("as_of", fields.pop("as_of", None), now)
    scope = {name: fields.pop(name) for name in SCOPE_NAMES if name in fields}
    boosts = _REQUEST["boost"].check(fields.pop("boost", None)) or ()
    given = {name: value for name, value in fields.items() if value is not None}
    return SearchRequest(
        query=query,  # type: ignore[arg-type]  # checked by SearchRequest
        scope=scope_from_fields(now=as_of or now, **scope),
        as_of=as_of,
        boosts=tuple(Boost.parse(text) for text in boosts),
        profile=profile,  # type: ignore[arg-type]
        **given,  # type: ignore[arg-type]
    )


def _is_profile(value: object) -> bool:
    if value is None or isinstance(value, str):
        return False
    from memsearch.profiles import Profile

    return isinstance(value, Profile)
