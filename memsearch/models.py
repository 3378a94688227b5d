"""The memory record and the validated input that creates one."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memsearch.choices import KINDS
from memsearch.errors import InvalidInputError, TextTooLongError
from memsearch.operations import MAX_TEXT_CHARS, MEMORY_NAMES
from memsearch.timeutil import parse_time, to_iso

DEFAULT_IMPORTANCE = 0.5
DEFAULT_PRIORITY = 1.0

# Fields of a JSONL import line (and of `memsearch export`'s lines), with the Python types each accepts.
_STRING_FIELDS = ("key", "project", "namespace", "session", "role", "conversation", "parent_key")
IMPORT_FIELDS = frozenset(
    {"text", "tags", "importance", "priority", "pinned", "created_at", "metadata", "kind", "position", "views",
     *_STRING_FIELDS}
)  # fmt: skip


@dataclass(frozen=True)
class EmbeddingModelInfo:
    """The model that made a store's vectors: its name and their dimension."""

    name: str
    dim: int


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
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Memory:
    id: int
    key: str | None
    text: str
    created_at: datetime
    last_accessed_at: datetime
    access_count: int
    importance: float
    priority: float
    pinned: bool
    project: str | None
    namespace: str | None
    session: str | None
    role: str | None
    tags: tuple[str, ...]
    metadata: Mapping[str, Any]
    content_hash: str
    memory_score: float | None = None  # None: derived from importance and use
    superseded_by: int | None = None
    group_id: int | None = None
    kind: str = "note"  # note | turn | session
    conversation: str | None = None
    position: int | None = None  # a turn's place in its session, from 1
    parent_id: int | None = None  # a turn's session chunk

    @property
    def quality(self) -> float:
        """The stored memory score, or one derived from importance and use when none is set."""
        if self.memory_score is not None:
            return self.memory_score
        return derived_memory_score(self.importance, self.access_count)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "key": self.key,
            "text": self.text,
            "created_at": to_iso(self.created_at),
            "last_accessed_at": to_iso(self.last_accessed_at),
            "access_count": self.access_count,
            "importance": self.importance,
            "priority": self.priority,
            "pinned": self.pinned,
            "project": self.project,
            "namespace": self.namespace,
            "session": self.session,
            "role": self.role,
            "tags": list(self.tags),
            "metadata": dict(self.metadata),
            "content_hash": self.content_hash,
            "memory_score": self.quality,
            "memory_score_set": self.memory_score is not None,
            "superseded_by": self.superseded_by,
            "group_id": self.group_id,
            "kind": self.kind,
            "conversation": self.conversation,
            "position": self.position,
            "parent_id": self.parent_id,
        }


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


def check_text(name: str, value: object) -> str:
    """`value` if it is a string SQLite and the encoder can take: one without lone surrogates
    (what Python makes of invalid UTF-8 in arguments and stdin, or of a `\\ud800` JSON escape)."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, not {shown(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidInputError(
            f"is not valid Unicode: a lone surrogate {value[error.start]!r} at character {error.start + 1} "
            "(invalid UTF-8 input or an unpaired \\ud800-style escape)",
            field=name,
        ) from None
    return value


def shown(value: object) -> str:
    """A value for a one-line error message: its type, and the value itself when short."""
    try:
        text = repr(value)
    except Exception:  # a caller's object whose repr fails (or is too long an int to print)
        text = "\n"
    return f"{type(value).__name__} {text}" if len(text) <= 40 and "\n" not in text else f"a {type(value).__name__}"


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
