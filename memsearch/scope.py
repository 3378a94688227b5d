"""Which memories a read may see (`Scope`), on its own: a request names one, and a command that
only sends its request to a server imports no store (memsearch.store.base re-exports it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memsearch.models import Memory


@dataclass(frozen=True)
class Scope:
    """Which memories a read may see. Every field narrows; tags must all be present."""

    project: str | None = None
    namespace: str | None = None
    tags: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    kinds: tuple[str, ...] = ()  # note, turn, session; empty: every kind
    conversation: str | None = None
    roles: tuple[str, ...] = ()
    sessions: tuple[str, ...] = ()

    @property
    def is_everything(self) -> bool:
        return self == EVERYTHING

    @property
    def only_kinds(self) -> bool:
        """True when the scope does nothing but leave out some kinds."""
        return bool(self.kinds) and self == Scope(kinds=self.kinds)

    def admits(self, memory: Memory) -> bool:
        """Whether `memory` is in scope (the reference semantics every store implements)."""
        return (
            (self.project is None or memory.project == self.project)
            and (self.namespace is None or memory.namespace == self.namespace)
            and all(tag in memory.tags for tag in self.tags)
            and (self.since is None or memory.created_at >= self.since)
            and (self.until is None or memory.created_at <= self.until)
            and (not self.kinds or memory.kind in self.kinds)
            and (self.conversation is None or memory.conversation == self.conversation)
            and (not self.roles or memory.role in self.roles)
            and (not self.sessions or memory.session in self.sessions)
        )


EVERYTHING = Scope()
