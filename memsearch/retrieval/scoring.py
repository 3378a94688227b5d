"""Adjustments of the fused score; each adds one named Factor to every candidate."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal, Protocol

from memsearch.models import Memory
from memsearch.profiles import Adjustment
from memsearch.retrieval.answers import names_something
from memsearch.retrieval.candidates import Candidate, Factor
from memsearch.retrieval.dates import says_when
from memsearch.retrieval.request import Boost
from memsearch.timeutil import SECONDS_PER_DAY, age_seconds


class Scored(Protocol):
    """What the adjustments read of a memory: a Memory, or the fields of one a search ranks by
    (see memsearch.retrieval.ranking). Decay reads the clock its adjustment names."""

    @property
    def text(self) -> str: ...
    @property
    def role(self) -> str | None: ...
    @property
    def conversation(self) -> str | None: ...
    @property
    def project(self) -> str | None: ...
    @property
    def pinned(self) -> bool: ...
    @property
    def priority(self) -> float: ...
    @property
    def quality(self) -> float: ...


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class QueryFacts:
    """What the adjustments need to know about the query and the store around it."""

    named: tuple[str, ...] = ()  # the speakers in scope the query names
    asks_when: bool = False
    participants: Mapping[str, frozenset[str]] = field(default_factory=dict)  # conversation → its speakers
    asks_name: bool = False
    speaker_words: frozenset[str] = frozenset()  # the words of the candidates' speakers' names

    @property
    def speaker(self) -> str | None:
        """The one speaker the query names; None for none or several."""
        return self.named[0] if len(self.named) == 1 else None

    def involves(self, memory: Scored, person: str) -> bool:
        """A memory involves a person who speaks it, takes part in its conversation or is named in it."""
        return (
            memory.role == person
            or person in self.participants.get(memory.conversation or "", ())
            or re.search(rf"\b{re.escape(person)}\b", memory.text, re.IGNORECASE) is not None
        )


def exponential_decay(age_s: float, tau_s: float) -> float:
    """exp(-age / tau): 1 for a new memory, 1/e at one tau, never below 0."""
    return math.exp(-age_s / tau_s)


def hyperbolic_decay(whole_days: int, half_days: float) -> float:
    """CEMS: 1 / (1 + days / half), 0.5 at `half` days."""
    return 1.0 / (1.0 + whole_days / half_days)


def decay_value(age_s: float, adjustment: Adjustment) -> float:
    """The decay adjustment's factor for a memory `age_s` seconds old on its clock."""
    if adjustment.shape == "hyperbolic":
        return hyperbolic_decay(int(age_s / SECONDS_PER_DAY), adjustment.tau_days)  # CEMS: whole days
    value = exponential_decay(age_s, adjustment.tau_days * SECONDS_PER_DAY)
    if adjustment.shape == "floor":
        value = adjustment.floor + (1 - adjustment.floor) * value
    return value


def project_match(own: str | None, project: str) -> str:
    """How a memory's project meets the searched one: same, none (it has none) or other."""
    return "same" if own == project else "none" if own is None else "other"


def factor_value(
    memory: Scored, adjustment: Adjustment, now: datetime, project: str | None, facts: QueryFacts
) -> float | None:
    """The adjustment's factor value for one memory (None: it does not apply to this search, for
    any memory): what `factor_for` records, without the record."""
    match adjustment.kind:
        case "decay":
            return decay_value(age_seconds(getattr(memory, adjustment.clock), now), adjustment)
        case "memory_score":
            return adjustment.weight * memory.quality
        case "priority":
            return memory.priority
        case "pinned":
            return adjustment.factor if memory.pinned else 1.0
        case "project":
            if project is None:
                return None
            values = {"same": adjustment.same, "none": adjustment.none, "other": adjustment.other}
            return values[project_match(memory.project, project)]
        case "speaker":  # the query names one speaker: their memories are the likelier answer
            if (speaker := facts.speaker) is None:
                return None
            return adjustment.factor if memory.role == speaker else 1.0
        case "about":  # the query names people: a memory that involves none of them is about someone else
            if not facts.named:
                return None
            return 1.0 if any(facts.involves(memory, person) for person in facts.named) else adjustment.factor
        case "when":  # the query asks when: memories that date something are the likelier answer
            if not facts.asks_when:
                return None
            return adjustment.factor if says_when(memory.text) else 1.0
        case "names":  # the query asks who, where, which: memories that name someone or something
            if not facts.asks_name:
                return None
            return adjustment.factor if names_something(memory.text, facts.speaker_words) else 1.0
    raise ValueError(f"unknown adjustment {adjustment.kind!r}")


def factor_detail(
    memory: Scored, adjustment: Adjustment, now: datetime, project: str | None, facts: QueryFacts
) -> dict[str, Any]:
    """What explain shows of how the adjustment's factor came about for one memory."""
    match adjustment.kind:
        case "decay":
            days = age_seconds(getattr(memory, adjustment.clock), now) / SECONDS_PER_DAY
            detail: dict[str, Any] = {"clock": adjustment.clock, "age_days": days, "tau_days": adjustment.tau_days}
            if adjustment.shape == "hyperbolic":
                detail["whole_days"] = int(days)
            elif adjustment.shape == "floor":
                detail["floor"] = adjustment.floor
            return detail
        case "memory_score":
            return {"memory_score": memory.quality, "weight": adjustment.weight}
        case "pinned":
            return {"pinned": memory.pinned}
        case "project":
            return {"project": memory.project, "match": project_match(memory.project, project or "")}
        case "speaker":
            return {"named": facts.speaker, "role": memory.role}
        case "about":
            involved = any(facts.involves(memory, person) for person in facts.named)
            return {"named": ", ".join(facts.named), "involved": involved}
        case "when":
            return {"says_when": says_when(memory.text)}
        case "names":
            return {"names_something": names_something(memory.text, facts.speaker_words)}
    return {}


def factor_for(
    candidate: Candidate, adjustment: Adjustment, now: datetime, project: str | None, facts: QueryFacts
) -> Factor | None:
    """The adjustment's factor for one candidate, with its explain detail (None: not this search's)."""
    value = factor_value(candidate.memory, adjustment, now, project, facts)
    if value is None:
        return None
    op: Literal["mul", "add"] = "add" if adjustment.kind == "memory_score" else "mul"
    return Factor(adjustment.kind, op, value, factor_detail(candidate.memory, adjustment, now, project, facts))


def apply_adjustments(
    candidates: Sequence[Candidate],
    adjustments: Sequence[Adjustment],
    now: datetime,
    project: str | None = None,
    facts: QueryFacts | None = None,
) -> list[Candidate]:
    """Each candidate with the adjustments' factors added, in order (one copy of it, not one a factor)."""
    facts = facts or QueryFacts()
    out = []
    for candidate in candidates:
        factors = [f for a in adjustments if (f := factor_for(candidate, a, now, project, facts)) is not None]
        out.append(replace(candidate, factors=(*candidate.factors, *factors)) if factors else candidate)
    return out


def boost_factors(memory: Memory, boosts: Sequence[Boost]) -> list[Factor]:
    """siftcoder's boostFn: × factor for each boost a memory matches (one factor per boost)."""
    return [
        Factor("boost", "mul", boost.factor, {boost.field: boost.value})
        for boost in boosts
        if boost.matches(memory.tags, memory.project)
    ]


def apply_boosts(candidates: Sequence[Candidate], boosts: Sequence[Boost]) -> list[Candidate]:
    """Each candidate with its boost factors added (see boost_factors)."""
    if not boosts:
        return list(candidates)
    out = []
    for candidate in candidates:
        factors = boost_factors(candidate.memory, boosts)
        out.append(replace(candidate, factors=(*candidate.factors, *factors)) if factors else candidate)
    return out
