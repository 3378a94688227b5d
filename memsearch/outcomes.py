"""What the library's use cases return (see `memsearch.api.Memsearch`): records with a `to_dict`
that the CLI renders and the HTTP API and MCP tools send as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.models import Memory

if TYPE_CHECKING:
    from memsearch.consolidate import ConsolidationPlan
    from memsearch.profiles import Profile

__all__ = ["KIND_NAMES", "AddOutcome", "Consolidation", "ImportOutcome", "ProfileInfo", "Timeline"]


@dataclass(frozen=True)
class AddOutcome:
    """What became of one memory given to `add`: stored under `id`, or not stored because it is a
    near-duplicate of memory `duplicate_of` (then `id` is that memory's) at cosine `similarity`,
    which reached the profile's ingest dedup `threshold`."""

    id: int
    stored: bool = True
    duplicate_of: int | None = None
    similarity: float | None = None
    threshold: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "stored": self.stored,
            "duplicate_of": self.duplicate_of,
            "similarity": self.similarity,
            "threshold": self.threshold,
        }


KIND_NAMES = {"note": ("memory", "memories"), "turn": ("turn", "turns"), "session": ("session", "sessions")}


@dataclass(frozen=True)
class ImportOutcome:
    """What an import stored: `counts` by kind, and the near-duplicates it did not store, each with
    its line number (JSONL records) or item number (the memories made from conversations)."""

    source: str
    counts: dict[str, int]
    duplicates: list[tuple[int, AddOutcome]] = field(default_factory=list)
    numbered_by: str = "line"  # "line" or "item"
    # Left out of a JSONL import of read commands' records: the fields it takes no value from
    # (ids, use counts, scores), and records repeating a memory given before (same id and fields).
    ignored: tuple[str, ...] = ()
    repeats: int = 0

    @property
    def summary(self) -> str:
        """ "3 memories", "2 sessions, 9 turns": the stored memories by kind."""
        parts = [f"{n} {KIND_NAMES[kind][n != 1]}" for kind, n in self.counts.items() if n]
        return ", ".join(parts) or "0 memories"

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "counts": dict(self.counts),
            "duplicates": [{self.numbered_by: number, **outcome.to_dict()} for number, outcome in self.duplicates],
            "ignored_fields": list(self.ignored),
            "repeats": self.repeats,
        }


@dataclass(frozen=True)
class Timeline:
    """A memory with its neighbours in order (see `Store.around`); `current` is the one asked for."""

    memories: list[Memory]
    current: int

    def to_dict(self) -> dict[str, Any]:
        """`{current, memories}`: the id asked for, and every memory marked whether it is that one."""
        return {
            "current": self.current,
            "memories": [{**memory.to_dict(), "current": memory.id == self.current} for memory in self.memories],
        }


@dataclass(frozen=True)
class Consolidation:
    """What `consolidate` marked (or would mark, on a dry run), with the texts of the memories on
    both sides of each supersession."""

    plan: ConsolidationPlan
    dry_run: bool
    memories: dict[int, Memory]  # the superseded memories and the ones superseding them, by id

    @property
    def superseded(self) -> dict[int, int]:
        return self.plan.superseded

    @property
    def texts(self) -> dict[int, str]:
        return {memory_id: memory.text for memory_id, memory in self.memories.items()}

    @property
    def groups(self) -> dict[int, list[int]]:
        """Group id → its memories' ids, in order."""
        groups: dict[int, list[int]] = {}
        for memory_id, group in sorted(self.plan.groups.items()):
            groups.setdefault(group, []).append(memory_id)
        return groups

    def to_dict(self) -> dict[str, Any]:
        texts = self.texts
        return {
            "dry_run": self.dry_run,
            "superseded": [
                {"id": old, "superseded_by": new, "text": texts.get(old), "superseded_by_text": texts.get(new)}
                for old, new in sorted(self.superseded.items())
            ],
            "groups": [{"group_id": group, "ids": ids} for group, ids in self.groups.items()],
        }


@dataclass(frozen=True)
class ProfileInfo:
    """A ranking profile as listed: its parameters and the file it comes from; a profile whose
    file cannot be used has no parameters and says why in `error`."""

    name: str
    path: Path
    profile: Profile | None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "summary": self.profile.summary if self.profile else "",
            "seed": self.profile.seed if self.profile else "",
            "path": str(self.path),
            "error": self.error,
        }

    @classmethod
    def every(cls) -> list[ProfileInfo]:
        """Every ranking profile found, by name; one that cannot be loaded is listed with its error."""
        from memsearch.errors import InvalidInputError
        from memsearch.profiles import available, load_profile

        infos = []
        for name, path in available().items():
            try:
                infos.append(cls(name, path, load_profile(name)))
            except InvalidInputError as error:
                infos.append(cls(name, path, None, str(error)))
        return infos

    @classmethod
    def named(cls, name: str) -> ProfileInfo:
        """The profile of that name with its resolved parameters."""
        from memsearch.profiles import available, load_profile

        profile = load_profile(name)
        return cls(profile.name, available()[profile.name], profile)
