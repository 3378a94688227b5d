"""The memory record and the validated input that creates one."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from datetime import datetime
from typing import Any, get_origin, get_type_hints

from memsearch.checks import check_text, shown
from memsearch.choices import KINDS
from memsearch.errors import InvalidInputError, TextTooLongError
from memsearch.fields import IMPORTANCE, MAX_TEXT_CHARS, MEMORY_NAMES, PRIORITY
from memsearch.timeutil import parse_time, to_iso

DEFAULT_IMPORTANCE: float = IMPORTANCE.default
DEFAULT_PRIORITY: float = PRIORITY.default

# The string fields of a JSONL import line: none may be empty.
_STRING_FIELDS = ("key", "project", "namespace", "session", "role", "conversation", "parent_key")


@dataclass(frozen=True)
class EmbeddingModelInfo:
    """The model that made a store's vectors: its name, their dimension, the version of its
    weights (a content hash, or its package's version) and, for a model folder given by path,
    where it was last seen (a hint to find it again, not part of what the model is)."""

    name: str
    dim: int
    version: str | None = None
    location: str | None = field(default=None, compare=False)

    def is_same_model(self, other: EmbeddingModelInfo) -> bool:
        """Whether the two make the same vectors: when both know their version, the versions
        decide (a moved or renamed model folder is the same model); else the names do, a name
        recorded as a folder's path (before versions) matching the model found there."""
        if self.dim != other.dim:
            return False
        if self.version and other.version:
            return self.version == other.version
        return other.name in (self.name, self.location) or self.name == other.location


# Views: extra texts a memory is searched by (a turn's neighbourhood, its facets). The lexical
# views are full-text indexed; the vector views are embedded. A note's views are its own text.
LEXICAL_VIEWS = ("context", "prev")
FACETS = ("personal_info", "preferences", "events")
VECTOR_VIEWS = ("context", "next", *(f"facet_{name}" for name in FACETS))
# The views every memory has: one that has no text of its own for them (a note, say) is searched
# there by its own text and vector, so no kind collects ranked lists another kind cannot.
OWN_TEXT_VIEWS = ("context", "prev")


# A note longer than the model's window is embedded in chunks (text.embedding_chunks): the first
# is its own vector, the others vector views `chunk_2`, `chunk_3`, …, and the note's vector score
# is its best chunk's. One memory's text is capped: a note at the cap imports in about half a
# minute (see the README's "Long notes"); a 22 MB paste by mistake took gigabytes.
CHUNK_VIEW_PREFIX = "chunk_"


def chunk_view(number: int) -> str:
    return f"{CHUNK_VIEW_PREFIX}{number}"


def is_chunk_view(view: str) -> bool:
    return view.startswith(CHUNK_VIEW_PREFIX)


def default_view_text(kind: str, view: str, text: str) -> str:
    """A lexical view's text for a memory that has none of its own: its own text (OWN_TEXT_VIEWS),
    except a session chunk's previous-turn view, which stays empty: session chunks are ranked by
    their own-text legs alone (see retrieval.legs.own_text_legs), and their long texts would skew
    that view's BM25 length statistics for the turns (measured: LoCoMo turn R@5 0.729 against 0.735)."""
    return "" if kind == "session" and view == "prev" else text


def content_hash(text: str) -> str:
    """Hash of the text with white space folded, so re-adds of the same note are recognised."""
    import hashlib  # by the writes: OpenSSL's start is not a read's to pay

    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class FieldSpec:
    """What memsearch does with one field of `Memory` besides holding it. Every field is a column
    of the stores' `memories` table of the same name, read and written through its type (see
    `MemoryField.kind`); the stores, `to_dict`, export, CSV and `memsearch set` read this."""

    given: bool = False  # a NewMemory field of the same name: written on insert, exported as a JSONL field
    refers: bool = False  # another memory's id: restored once every memory is there
    settable: Callable[[str, Any], Any] | None = None  # `memsearch set` may change it; checks (name, value)
    csv: int | None = None  # its place among the CSV columns of `list` and `get`
    result: int | None = None  # its place among a search result's fields (retrieval.explain.SCORE_PLACE)


def _spec(**spec: Any) -> dict[str, FieldSpec]:
    return {"memsearch": FieldSpec(**spec)}


def _check_unit(name: str, value: Any) -> float:
    return check_range(name, value, 0, 1)


def _check_memory_score(name: str, value: Any) -> float | None:  # None: derived from importance and use again
    return None if value is None else check_range(name, value, 0, 1)


def _check_priority(name: str, value: Any) -> float:
    return check_range(name, value, 1, 2)


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidInputError(f"must be True or False, not {shown(value)}", field=name)
    return value


def _check_tags(name: str, value: Any) -> tuple[str, ...]:
    return normalise_tags(value)


def _check_scope_name(name: str, value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or not check_text(name, value).strip()):
        raise InvalidInputError(f"must be a non-empty string, not {shown(value)}", field=name)
    return value


@dataclass(frozen=True)
class Memory:
    """A stored memory. Its fields are described once, here: adding one is a line below (with its
    FieldSpec) and a migration of each store's schema."""

    id: int = field(metadata=_spec(csv=1, result=1))
    key: str | None = field(metadata=_spec(given=True, csv=2, result=2))
    text: str = field(metadata=_spec(given=True, csv=12, result=3))
    created_at: datetime = field(metadata=_spec(given=True, csv=3, result=5))
    last_accessed_at: datetime = field(metadata=_spec())
    access_count: int = field(metadata=_spec())
    importance: float = field(metadata=_spec(given=True, settable=_check_unit, csv=9))
    priority: float = field(metadata=_spec(given=True, settable=_check_priority, csv=10))
    pinned: bool = field(metadata=_spec(given=True, settable=_check_bool, csv=11, result=12))
    project: str | None = field(metadata=_spec(given=True, settable=_check_scope_name, csv=4, result=8))
    namespace: str | None = field(metadata=_spec(given=True, settable=_check_scope_name, csv=5, result=9))
    session: str | None = field(metadata=_spec(given=True, csv=6, result=10))
    role: str | None = field(metadata=_spec(given=True, csv=7, result=11))
    tags: tuple[str, ...] = field(metadata=_spec(given=True, settable=_check_tags, csv=8, result=6))
    metadata: Mapping[str, Any] = field(metadata=_spec(given=True, result=7))
    content_hash: str = field(metadata=_spec())
    # None: derived from importance and use (`quality`)
    memory_score: float | None = field(default=None, metadata=_spec(settable=_check_memory_score))
    superseded_by: int | None = field(default=None, metadata=_spec(refers=True, result=13))
    group_id: int | None = field(default=None, metadata=_spec())
    kind: str = field(default="note", metadata=_spec(given=True, result=14))  # note | turn | session
    conversation: str | None = field(default=None, metadata=_spec(given=True, result=15))
    # a turn's place in its session, from 1
    position: int | None = field(default=None, metadata=_spec(given=True, result=16))
    parent_id: int | None = field(default=None, metadata=_spec(refers=True))  # a turn's session chunk

    @property
    def quality(self) -> float:
        """The stored memory score, or one derived from importance and use when none is set."""
        if self.memory_score is not None:
            return self.memory_score
        return derived_memory_score(self.importance, self.access_count)

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON; `memory_score` is `quality`, and `memory_score_set` says whether it is stored."""
        document: dict[str, Any] = {}
        for f in MEMORY_FIELDS:
            if f.name == "memory_score":
                document["memory_score"] = self.quality
                document["memory_score_set"] = self.memory_score is not None
            else:
                document[f.name] = f.to_json(getattr(self, f.name))
        return document

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> Memory:
        """The memory of a `to_dict` document (a server's or `get --format json`'s): `to_dict`'s
        inverse, so `Memory.from_dict(memory.to_dict()) == memory`."""
        values = {f.name: f.from_json(document[f.name]) for f in MEMORY_FIELDS if f.name in document}
        if document.get("memory_score_set") is False:
            values["memory_score"] = None  # to_dict sent the derived score
        return cls(**values)

    def json_fields(self, fields: Iterable[MemoryField]) -> dict[str, Any]:
        """The named fields' values as JSON values, in the order given."""
        return {f.name: f.to_json(getattr(self, f.name)) for f in fields}


@dataclass(frozen=True)
class MemoryField:
    """One field of `Memory`: its name, its kind of value (how JSON and the stores hold it) and its spec."""

    name: str
    kind: str  # plain (a number or a string, as it is), bool, time, tags or json
    spec: FieldSpec

    def to_json(self, value: Any) -> Any:
        if value is None:
            return None
        if self.kind == "time":
            return to_iso(value)
        if self.kind == "tags":
            return list(value)
        if self.kind == "json":
            return dict(value)
        return value

    def from_json(self, value: Any) -> Any:
        """`to_json`'s inverse."""
        if value is None:
            return None
        if self.kind == "time":
            return parse_time(value, what=self.name)
        if self.kind == "tags":
            return tuple(value)
        if self.kind == "json":
            return dict(value)
        return value


def _kind_of(annotation: Any) -> str:
    if annotation is datetime:
        return "time"
    if annotation is bool:
        return "bool"
    origin = get_origin(annotation)
    if origin is tuple:
        return "tags"
    if origin is Mapping:
        return "json"
    return "plain"


def _memory_fields() -> tuple[MemoryField, ...]:
    hints = get_type_hints(Memory)
    return tuple(
        MemoryField(f.name, _kind_of(hints[f.name]), f.metadata["memsearch"]) for f in dataclass_fields(Memory)
    )


MEMORY_FIELDS = _memory_fields()
FIELDS_BY_NAME = {f.name: f for f in MEMORY_FIELDS}
# The fields a new memory gives (NewMemory's of the same name), written on insert and exported.
GIVEN_FIELDS = tuple(f for f in MEMORY_FIELDS if f.spec.given)
# Fields `memsearch set` may change, in the order of the Memory dataclass.
SETTABLE_FIELDS = tuple(f.name for f in MEMORY_FIELDS if f.spec.settable is not None)
CSV_FIELDS = tuple(f.name for f in sorted((f for f in MEMORY_FIELDS if f.spec.csv), key=lambda f: f.spec.csv or 0))
RESULT_FIELDS = tuple(sorted((f for f in MEMORY_FIELDS if f.spec.result), key=lambda f: f.spec.result or 0))
# Fields of a JSONL import line (and of `memsearch export`'s lines).
IMPORT_FIELDS = frozenset({*(f.name for f in GIVEN_FIELDS), "parent_key", "views"})
# What a read command prints beside a memory's fields: `to_dict`'s memory_score_set, a search
# result's rank, score, context_of, explain (retrieval.explain) and matches, a raw candidate's
# dropped, an ndjson hit's query, a timeline row's current.
READ_EXTRA_FIELDS = (
    "memory_score_set", "rank", "score", "context_of", "explain", "matches", "dropped", "query", "current",
)  # fmt: skip
# The fields of read commands' records (`list`, `get`, `search`, `timeline`) that an import takes
# no value from: the store's own (ids, use, consolidation marks) and the search's. An import of
# those records ignores them (and names them), so they store the memories again.
NOT_IMPORTED_FIELDS = frozenset({f.name for f in MEMORY_FIELDS} - IMPORT_FIELDS | set(READ_EXTRA_FIELDS))


def check_changes(changes: Mapping[str, object]) -> dict[str, object]:
    """`memsearch set`'s changes, each checked (InvalidInputError for a field that cannot be set)."""
    checked: dict[str, object] = {}
    for name, value in changes.items():
        found = FIELDS_BY_NAME.get(name)
        if found is None or found.spec.settable is None:
            raise InvalidInputError(f"cannot set {name!r}")
        checked[name] = found.spec.settable(name, value)
    return checked


def derived_memory_score(importance: float, access_count: int) -> float:
    """0.6 · importance + 0.4 · use, where use = 1 − exp(−accesses / 5) saturates after ~15 searches."""
    return 0.6 * importance + 0.4 * (1.0 - math.exp(-access_count / 5.0))


def check_range(field: str, value: float, low: float, high: float) -> float:
    """`value` as a float if it is a number from `low` to `high`; else an error naming `field`."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise InvalidInputError(f"must be a number from {low:g} to {high:g}, not {shown(value)}", field=field)
    if not low <= value <= high:
        raise InvalidInputError(f"must be from {low:g} to {high:g}, not {value:g}", field=field)
    return float(value)


def normalise_tags(tags: Iterable[str] | str) -> tuple[str, ...]:
    """Trimmed, de-duplicated, in first-seen order; empty tags are dropped. A lone string is one
    tag (not a sequence of one-letter tags)."""
    if isinstance(tags, bytes | bytearray | Mapping) or not isinstance(tags, str | Iterable):
        raise InvalidInputError(f"must be a list of strings, not {shown(tags)}", field="tags")
    seen: dict[str, None] = {}
    for tag in (tags,) if isinstance(tags, str) else tags:
        if not isinstance(tag, str):
            raise InvalidInputError(f"tags must be strings, not {shown(tag)}")
        check_text("tags", tag)
        cleaned = tag.strip()
        if cleaned:
            seen.setdefault(cleaned, None)
    return tuple(seen)


def _check_views(views: object) -> None:
    if not isinstance(views, Mapping):
        raise InvalidInputError(f"views must be an object of view name → text, not {shown(views)}")
    known = dict.fromkeys([*LEXICAL_VIEWS, *VECTOR_VIEWS])
    for name, text in views.items():
        if name not in known and not is_chunk_view(name):
            raise InvalidInputError(f"unknown view {name!r} (known: {', '.join(known)})")
        check_text(f"views.{name}", text)


@dataclass(frozen=True)
class NewMemory:
    """A memory to be stored; constructing one validates every field."""

    text: str
    key: str | None = None
    tags: tuple[str, ...] = ()
    importance: float = DEFAULT_IMPORTANCE
    priority: float = DEFAULT_PRIORITY
    pinned: bool = False
    project: str | None = None
    namespace: str | None = None
    session: str | None = None
    role: str | None = None
    created_at: datetime | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # Conversations (set by the conversation importers, not by JSONL lines):
    kind: str = "note"
    conversation: str | None = None
    position: int | None = None
    parent_key: str | None = None  # the key of this turn's session chunk, stored earlier or in the same batch
    views: Mapping[str, str] = field(default_factory=dict)  # view name → text, indexed and embedded

    def __post_init__(self) -> None:
        check_text("text", self.text)
        if not self.text.strip():
            raise InvalidInputError("memory text is empty")
        if len(self.text) > MAX_TEXT_CHARS:
            raise TextTooLongError(
                f"memory text is {len(self.text):,} characters, over the limit of {MAX_TEXT_CHARS:,}; "
                "split it into several memories"
            )
        object.__setattr__(self, "importance", check_range("importance", self.importance, 0.0, 1.0))
        object.__setattr__(self, "priority", check_range("priority", self.priority, 1.0, 2.0))
        object.__setattr__(self, "tags", normalise_tags(self.tags))
        if not isinstance(self.pinned, bool):
            raise InvalidInputError(f"pinned must be true or false, not {self.pinned!r}")
        for name in _STRING_FIELDS:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not check_text(name, value).strip()):
                raise InvalidInputError(f"{name} must be a non-empty string, not {shown(value)}")
        if not isinstance(self.metadata, Mapping):
            raise InvalidInputError(f"metadata must be an object, not {shown(self.metadata)}")
        try:  # stored as JSON and printed by `list -f json`: it must be JSON that round-trips
            json.dumps(self.metadata, allow_nan=False, ensure_ascii=False).encode("utf-8")
        except (ValueError, TypeError, RecursionError) as error:
            raise InvalidInputError(
                "metadata must be plain JSON: valid Unicode text, finite numbers, "
                f"nesting under 1000 levels ({type(error).__name__}: {str(error)[:80]})"
            ) from None
        if self.kind not in KINDS:
            raise InvalidInputError(f"kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if self.position is not None and (
            isinstance(self.position, bool) or not isinstance(self.position, int) or self.position < 1
        ):
            raise InvalidInputError(f"position must be a whole number from 1, not {shown(self.position)}")
        _check_views(self.views)

    def to_fields(self) -> dict[str, Any]:
        """The memory as the JSON fields of an add request (operations.MEMORY_FIELDS), which
        `from_json` reads back into an equal memory; absent fields are left out. A conversation's
        fields (kind, position, views, …) are no part of it."""
        fields: dict[str, Any] = {
            "text": self.text,
            "tags": list(self.tags) or None,
            "importance": self.importance,
            "priority": self.priority,
            "pinned": self.pinned,
            "created_at": to_iso(self.created_at) if self.created_at is not None else None,
            "metadata": dict(self.metadata) or None,
            **{name: getattr(self, name) for name in MEMORY_NAMES if name in _STRING_FIELDS},
        }
        assert set(fields) == set(MEMORY_NAMES), "NewMemory.to_fields and operations.MEMORY_FIELDS differ"
        return {name: value for name, value in fields.items() if value is not None}

    @classmethod
    def from_json(cls, obj: Any) -> NewMemory:
        """Build from one decoded JSONL object; raises InvalidInputError naming the bad field."""
        if not isinstance(obj, dict):
            raise InvalidInputError('expected a JSON object with a "text" field')
        unknown = sorted(set(obj) - IMPORT_FIELDS)
        if unknown:
            raise InvalidInputError(f"unknown field {unknown[0]!r} (known: {', '.join(sorted(IMPORT_FIELDS))})")
        if "text" not in obj:
            raise InvalidInputError('missing field "text"')
        fields = dict(obj)
        tags = fields.pop("tags", None)
        if tags is None:
            tags = []
        if not isinstance(tags, list):
            raise InvalidInputError(f"tags must be a list of strings, not {tags!r}")
        created = fields.pop("created_at", None)
        if created is not None and not isinstance(created, str):
            raise InvalidInputError(f"created_at must be an ISO-8601 string, not {created!r}")
        metadata = fields.pop("metadata", None)
        views = fields.pop("views", None)
        return cls(
            tags=tuple(tags),
            created_at=parse_time(created, what="created_at") if created is not None else None,
            metadata=metadata if metadata is not None else {},
            views=views if views is not None else {},
            **fields,
        )
