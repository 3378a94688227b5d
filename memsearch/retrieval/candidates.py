"""The value every retrieval stage takes and returns: a candidate with its whole score trace."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from memsearch.models import Memory


@dataclass(frozen=True)
class LegHit:
    """Where one recall leg placed a memory: its 1-based rank and the leg's own score."""

    rank: int
    score: float


@dataclass(frozen=True)
class Factor:
    """One adjustment of the fused score: `mul` multiplies it, `add` adds to it, in order."""

    name: str
    op: Literal["mul", "add"]
    value: float
    detail: Mapping[str, Any] = field(default_factory=dict)

    def apply(self, score: float) -> float:
        return score * self.value if self.op == "mul" else score + self.value


@dataclass(frozen=True)
class Candidate:
    memory: Memory
    legs: Mapping[str, LegHit]
    cosine: float | None = None  # query · memory vector, when the query was embedded
    fusion: float = 0.0
    fusion_terms: Mapping[str, float] = field(default_factory=dict)  # they sum to `fusion` (before any blend)
    fusion_detail: Mapping[str, Any] = field(default_factory=dict)
    factors: tuple[Factor, ...] = ()
    selection: Mapping[str, Any] = field(default_factory=dict)  # e.g. MMR's score, for explain
    dropped: str | None = None

    @property
    def id(self) -> int:
        return self.memory.id

    @property
    def final(self) -> float:
        """The fusion score with every factor applied in order: what ranks the candidate."""
        score = self.fusion
        for factor in self.factors:
            score = factor.apply(score)
        return score

    def with_factor(self, factor: Factor) -> Candidate:
        return replace(self, factors=(*self.factors, factor))

    def drop(self, reason: str) -> Candidate:
        return replace(self, dropped=reason)


class Ranked(Sequence[Candidate]):
    """Ranked candidates whose results (the first `live`) come first, in order; the others
    follow, each dropped with its reason."""

    live: int

    def settle(self) -> None:
        """Build every candidate's record now (a ranked list may build them when first read)."""


def rank_hits(hits: Sequence[tuple[int, float]]) -> dict[int, LegHit]:
    """Number a leg's best-first hits 1, 2, 3, …"""
    return {memory_id: LegHit(rank, score) for rank, (memory_id, score) in enumerate(hits, start=1)}
