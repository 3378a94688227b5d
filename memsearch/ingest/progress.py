"""How far an index run is: one event per commit (a batch of files stored, a batch of vectors
made), for a front end to render (a bar, a plain line every few seconds, JSON lines).

A run has two phases: `store` (each file's chunks stored and searchable by their words, a few
files per transaction) and `vectors` (the memories that wait for their vectors embedded, a batch
per transaction), then, for a store large enough to search through an approximate vector index,
`search index` (that index made or brought up to date, so no search has to); `done` closes it.
Every count is of what is committed when the event is sent, so the last event a front end saw
says what an interrupted run kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class IndexProgress:
    phase: str  # "store", "vectors", "search index" or "done"
    files_done: int  # files stored (or removed) by this run so far
    files_total: int  # files this run stores or removes
    chunks_stored: int  # memories stored by this run (new chunks; amended ones not counted)
    vectors_done: int  # memories whose vectors this run made
    vectors_total: int  # memories that waited for vectors when the phase began, plus those stored since
    elapsed: float  # seconds since the run began
    phase_elapsed: float = 0.0  # seconds since the phase began
    indexed: int = 0  # in the `search index` phase: vectors added to the approximate index so far
    index_total: int = 0  # … of this many

    @property
    def vectors_pending(self) -> int:
        """Memories that still wait for their vectors."""
        return max(0, self.vectors_total - self.vectors_done)

    @property
    def rate(self) -> float | None:
        """The phase's rate: files a second while storing, vectors a second while embedding."""
        done = self._done_total[0]
        if self.phase == "done" or done <= 0 or self.phase_elapsed <= 0:
            return None
        return done / self.phase_elapsed

    @property
    def remaining(self) -> float | None:
        """Seconds left in the phase at its rate (None: not known yet)."""
        rate = self.rate
        if rate is None:
            return None
        done, total = self._done_total
        return (total - done) / rate

    @property
    def _done_total(self) -> tuple[int, int]:
        """The phase's (done, to do)."""
        if self.phase == "store":
            return self.files_done, self.files_total
        if self.phase == "search index":
            return self.indexed, self.index_total
        return self.vectors_done, self.vectors_total

    @property
    def unit(self) -> str:
        return "files" if self.phase == "store" else "vectors"

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "files_done": self.files_done,
            "files_total": self.files_total,
            "chunks_stored": self.chunks_stored,
            "vectors_done": self.vectors_done,
            "vectors_total": self.vectors_total,
            "vectors_pending": self.vectors_pending,
            **({"indexed": self.indexed, "index_total": self.index_total} if self.phase == "search index" else {}),
            "elapsed": round(self.elapsed, 3),
            "rate": None if self.rate is None else round(self.rate, 3),
            "remaining": None if self.remaining is None else round(self.remaining, 1),
        }

    @property
    def kept(self) -> str:
        """What an interrupted run kept: 'kept 12 of 40 files (57 chunks); 30 memories wait for vectors'."""
        files = f"kept {self.files_done:,} of {self.files_total:,} file{'' if self.files_total == 1 else 's'}"
        line = f"{files} ({self.chunks_stored:,} chunk{'' if self.chunks_stored == 1 else 's'} stored)"
        line += f", {self.vectors_done:,} vector{'' if self.vectors_done == 1 else 's'} made"
        if pending := self.vectors_pending:
            line += f"; {pending:,} memor{'y waits' if pending == 1 else 'ies wait'} for vectors"
        return line


OnProgress = Callable[[IndexProgress], None]
