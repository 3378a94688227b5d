"""The fields of memsearch's operations, each described once: name, JSON type, bounds, choices,
default, description, and its command-line option. `memsearch.operations` makes the operations
(their requests and the use case each runs) from them; the library's typed requests
(`SearchRequest`, `NewMemory`) and `Memsearch`'s arguments are checked by these same fields, so a
value is refused in the same words by every front end and by the Python API.

A value of the wrong JSON type (a boolean is no number, a string no number), out of bounds or not
among the choices is an `InvalidInputError` naming the field.

This module imports nothing heavy: the CLI's options and its client of a server use it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memsearch.choices import GRANULARITIES, IMPORT_FORMATS, KINDS, MODES, RERANK_METHODS, switch
from memsearch.errors import InvalidInputError, short_repr
from memsearch.timeutil import RELATIVE_EXAMPLES

MAX_K = 1000  # the most results a search returns
# The most bytes one request may hold: an HTTP body, an MCP message (a line on stdio). An import of
# a large conversation file fits; a mistake does not.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# A query may be a whole document (a search by example: an agent's prompt, a pasted paragraph):
# the vector legs read the model's window of it, the lexical legs its most distinctive words, the
# question's features (route, dates, names) its first characters. One bound for every front end,
# that any query within it fits a message in any JSON spelling (12 bytes a character at worst).
MAX_QUERY_CHARS = 1_000_000
MAX_TEXT_CHARS = 100_000  # one memory's text
MAX_TIMELINE = 10_000  # memories before or after one in a timeline
MAX_MS = 600_000  # a search's latency budget

_ID = re.compile(r"[0-9]+")  # ASCII digits only: "٣" or "２" is a key, never an id

TYPES = ("string", "integer", "number", "boolean", "array", "object", "ref")


def parse_ref(ref: object, *, field: str = "ref") -> int | str:
    """A memory reference as a front end receives it: an int, or a string of ASCII digits, is an
    id; any other non-empty string is a key."""
    if isinstance(ref, bool) or not isinstance(ref, int | str) or (isinstance(ref, str) and not ref.strip()):
        raise InvalidInputError(f"must be a memory id or key, not {_shown(ref)}", field=field)
    if isinstance(ref, str):
        return int(ref) if _ID.fullmatch(ref) else ref
    if ref < 0:
        raise InvalidInputError(f"must be a memory id (0 or more) or a key, not {ref}", field=field)
    return ref


def _shown(value: object) -> str:
    text = short_repr(value)
    return text if text is not None else f"a {type(value).__name__}"


@dataclass(frozen=True)
class Field:
    """One field of an operation: its JSON type and what values it takes."""

    name: str
    type: str  # one of TYPES; "ref" is an id (integer) or a key (string)
    description: str
    required: bool = False
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()  # the strings a string (or each item of an array) may be
    max_length: int | None = None  # of a string
    parameter: str | None = None  # its name as a URL query parameter, when not `name` (q, tag, …)
    default: Any = None  # what an absent field means: the one place each default is written
    items: str = "string"  # an array's items: "string", or "ref" (ids or keys)
    option: str | None = None  # its command-line option, when not --QUERY-NAME (--limit, --pin, …)
    flags: tuple[str, ...] = ()  # the option's short flags (-k, -t, …)

    def __post_init__(self) -> None:
        assert self.type in TYPES, self.type

    @property
    def query_name(self) -> str:
        return self.parameter or self.name

    @property
    def option_name(self) -> str:
        """Its command-line option: `--limit` for k, `--tag` for tags, `--dry-run` for dry_run."""
        return self.option or f"--{self.query_name.replace('_', '-')}"

    def json_schema(self) -> dict[str, Any]:
        schema: dict[str, Any]
        if self.type == "ref":
            schema = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "minLength": 1}]}
        elif self.type == "array":
            items: dict[str, Any] = (
                Field(self.name, "ref", self.description).json_schema() if self.items == "ref" else {"type": "string"}
            )
            items.pop("description", None)
            if self.choices:
                items["enum"] = list(self.choices)
            schema = {"type": "array", "items": items}
        else:
            schema = {"type": self.type}
            if self.choices:
                schema["enum"] = list(self.choices)
        if self.minimum is not None:
            schema["minimum"] = self.minimum
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        if self.max_length is not None:
            schema["maxLength"] = self.max_length
        if self.default is not None:
            schema["default"] = self.default
        schema["description"] = self.description
        return schema

    def check(self, value: object) -> Any:
        """`value` as JSON gives it, checked against the field; `None` (JSON null) means absent."""
        if value is None:
            return None
        match self.type:
            case "string":
                if not isinstance(value, str):
                    raise self._error(f"must be a string, not {_shown(value)}")
                if self.max_length is not None and len(value) > self.max_length:
                    raise self._error(f"is {len(value):,} characters long; the limit is {self.max_length:,}")
                self._check_choice(value)
            case "integer":
                if isinstance(value, bool) or not isinstance(value, int):
                    raise self._error(f"must be a whole number, not {_shown(value)}")
                self._check_bounds(value)
            case "number":
                if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                    raise self._error(f"must be a number, not {_shown(value)}")
                self._check_bounds(value)
            case "boolean":
                if not isinstance(value, bool):
                    raise self._error(f"must be true or false, not {_shown(value)}")
            case "array":
                if isinstance(value, str):  # a lone string is one item, as on the command line
                    value = [value]
                if self.items == "ref":
                    if not isinstance(value, list | tuple):
                        raise self._error(f"must be a list of ids or keys, not {_shown(value)}")
                    return [parse_ref(item, field=self.name) for item in value]
                if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
                    raise self._error(f"must be a list of strings, not {_shown(value)}")
                for item in value:
                    self._check_choice(item)
                value = list(value)
            case "object":
                if not isinstance(value, dict):
                    raise self._error(f"must be an object, not {_shown(value)}")
            case "ref":
                return parse_ref(value, field=self.name)
        return value

    def from_text(self, values: Sequence[str]) -> Any:
        """The field's value from URL query parameters, parsed by its type (an array takes every
        repeat; anything else one value); `check` checks it, as it checks a JSON value."""
        if self.type == "array":
            return list(values) if values else None
        if len(values) > 1:
            raise self._error("is given more than once")
        text = values[0]
        if text == "":
            return None
        match self.type:
            case "integer":
                if re.fullmatch(r"-?[0-9]{1,19}", text) is None:
                    raise self._error(f"must be a whole number, not {_shown(text)}")
                return int(text)
            case "number":
                try:
                    number = float(text) if re.fullmatch(r"[-+0-9.eE]{1,40}", text) else math.nan
                except ValueError:
                    number = math.nan
                if not math.isfinite(number):
                    raise self._error(f"must be a number, not {_shown(text)}")
                return number
            case "boolean":
                if (on := switch(text)) is not None:
                    return on
                raise self._error(f"must be true or false, not {_shown(text)}")
            case "object":
                raise self._error("cannot be given as a URL parameter")
        return text

    def _check_bounds(self, value: float) -> None:
        low, high = self.minimum, self.maximum
        if (low is not None and value < low) or (high is not None and value > high):
            if isinstance(value, int) and abs(value) > 1e300:  # beyond a float, which :g converts it to
                shown = f"{'a negative' if value < 0 else 'a'} {value.bit_length()}-bit number"
            else:
                shown = f"{value:g}"
            if low is not None and high is not None:
                raise self._error(f"must be from {low:g} to {high:g}, not {shown}")
            if low is not None:
                raise self._error(f"must be at least {low:g}, not {shown}")
            raise self._error(f"must be at most {high:g}, not {shown}")

    def _check_choice(self, value: str) -> None:
        if self.choices and value not in self.choices:
            raise self._error(f"must be one of {', '.join(self.choices)}, not {_shown(value)}")

    def _error(self, problem: str) -> InvalidInputError:
        return InvalidInputError(problem, field=self.name)


def _string(name: str, description: str, **options: Any) -> Field:
    return Field(name, "string", description, **options)


def _strings(name: str, description: str, **options: Any) -> Field:
    return Field(name, "array", description, **options)


def _flag(name: str, description: str, default: bool, **options: Any) -> Field:
    return Field(name, "boolean", description, default=default, **options)


# The filters a search, a listing and an export share (memsearch.store.base.Scope).
SCOPE_FIELDS: tuple[Field, ...] = (
    _string("project", "Only memories of this project (in a search whose profile boosts projects: a boost instead)."),
    _string("namespace", "Only memories of this namespace."),
    _strings("tags", "Only memories that have all these tags.", parameter="tag", flags=("-t",)),
    _string("since", f"Only memories created at or after this time: ISO-8601, or {RELATIVE_EXAMPLES}."),
    _string("until", f"Only memories created at or before this time: ISO-8601, or {RELATIVE_EXAMPLES}."),
    _strings("kinds", "Only these kinds: note, turn, session.", choices=KINDS, parameter="kind"),
    _string("conversation", "Only this conversation's memories."),
    _strings("roles", "Only memories of these roles (speakers).", parameter="role"),
    _strings("sessions", "Only memories of these sessions.", parameter="session"),
)
SCOPE_NAMES = tuple(f.name for f in SCOPE_FIELDS)

QUERY = _string(
    "query",
    "What to look for, in natural language or keywords.",
    required=True,
    max_length=MAX_QUERY_CHARS,
    parameter="q",
)
# What the search request itself holds (memsearch.retrieval.request.SearchRequest), besides the query.
REQUEST_FIELDS: tuple[Field, ...] = (
    Field(
        "k",
        "integer",
        "How many results; default: the profile's.",
        minimum=1,
        maximum=MAX_K,
        option="--limit",
        flags=("-k", "-n"),
    ),
    _string(
        "mode", "auto picks vector or hybrid per query; lexical is keyword-only (BM25).", choices=MODES, flags=("-m",)
    ),
    _string("profile", "Ranking profile (default, cems, siftcoder, …); default: default.", flags=("-p",)),
    Field(
        "tau_days",
        "number",
        "Time-decay constant in days (0: no decay); default: the profile's.",
        minimum=0,
        option="--tau",
    ),
    _string(
        "granularity",
        "turn: turns and notes; session: whole conversation sessions.",
        choices=GRANULARITIES,
        default="turn",
        flags=("-g",),
    ),
    Field("max_tokens", "integer", "Token budget for the results' text (about 4 characters a token).", minimum=1),
    _string(
        "as_of",
        "The 'now' for time decay and relative times: ISO-8601, or 7d, 2w, 3h, 30m, 3mo, 1y ago "
        "(such a search records no access).",
    ),
    _flag("touch", "Record the search as an access of its results.", True),
    _strings("boost", "Score multipliers: tag:NAME[=FACTOR] or project:NAME[=FACTOR] (default factor 1.5)."),
    _string("rerank", "Re-rank the top fused candidates; default: the profile's.", choices=RERANK_METHODS),
    Field(
        "max_ms",
        "integer",
        "Latency budget in ms: the LLM stages that would not fit are skipped (HyDE, then re-ranking, then expansion).",
        minimum=1,
        maximum=MAX_MS,
    ),
    Field(
        "min_score",
        "number",
        "Keep only results whose score (the final score each result shows) is at least this; default: no floor.",
    ),
    *SCOPE_FIELDS,
)
REQUEST_NAMES = tuple(f.name for f in REQUEST_FIELDS)
RAW = _flag("raw", "Also return every candidate before filtering, with why it was dropped.", False)
EXPLAIN = _flag("explain", "Keep each result's score breakdown (legs, fusion, factors).", False)

# A JSONL import line's fields that a front end may set (memsearch.models.NewMemory.from_json).
TEXT = _string("text", "The memory: one self-contained statement.", required=True, max_length=MAX_TEXT_CHARS)
IMPORTANCE = Field("importance", "number", "0 to 1.", minimum=0, maximum=1, default=0.5)
PRIORITY = Field("priority", "number", "1 to 2; a ranking boost.", minimum=1, maximum=2, default=1.0)
MEMORY_FIELDS: tuple[Field, ...] = (
    TEXT,
    _string("key", "A unique key to find or replace it by."),
    _strings("tags", "Its tags.", option="--tag", flags=("-t",)),
    IMPORTANCE,
    PRIORITY,
    _flag("pinned", "Pinned memories are boosted and never superseded.", False, option="--pin"),
    _string("project", "The project it belongs to."),
    _string("namespace", "Its namespace."),
    _string("session", "The session it came from."),
    _string("role", "Who said it (user, assistant, …)."),
    _string("created_at", "When: ISO-8601, or 7d, 2w, 3h, 30m, 3mo, 1y ago; default: now.", option="--at"),
    Field("metadata", "object", "Any JSON object to keep with it."),
)
MEMORY_NAMES = tuple(f.name for f in MEMORY_FIELDS)

REPLACE = _flag("replace", "Overwrite the memory that has the same key.", False)
DEDUP_PROFILE = _string("profile", "A profile whose ingest dedup may find it a near-duplicate.", flags=("-p",))

IMPORT_FORMAT = _string(
    "format",
    "The file's format. jsonl: one memory a line (export's; the JSON of list, get and search too); chat: "
    "one turn a line (session, role or speaker, text, created_at); locomo, longmemeval: those benchmarks' JSON.",
    choices=IMPORT_FORMATS,
    default="jsonl",
    flags=("-f",),
)
SESSIONS = _flag("sessions", "Conversations: store a chunk per session too.", True)
FACETS = _flag("facets", "Conversations: extract facet views (personal info, preferences, events).", False)
IMPORT_OPTIONS: tuple[Field, ...] = (
    IMPORT_FORMAT,
    _string("source", "The name to use in messages."),
    _string("conversation", "chat: the conversation's name (default: the file's stem)."),
    SESSIONS,
    FACETS,
    REPLACE,
    DEDUP_PROFILE,
)

REF = Field("ref", "ref", "The memory's id (digits) or key.", required=True)
REFS = Field("refs", "array", "Ids or keys of the memories to delete; none: every one the filters match.", items="ref")
EVERYTHING = _flag("everything", "Delete every memory: needed with no refs and no filter.", False, option="--all")
DRY_RUN = _flag("dry_run", "Only say which memories would be deleted.", False)

BEFORE = Field(
    "before", "integer", "How many memories before it.", minimum=0, maximum=MAX_TIMELINE, default=5, flags=("-B",)
)
AFTER = Field(
    "after", "integer", "How many memories after it.", minimum=0, maximum=MAX_TIMELINE, default=5, flags=("-A",)
)
