"""Adjustments of the fused score; each adds one named Factor to every candidate."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memsearch.models import Memory
from memsearch.profiles import Adjustment
from memsearch.retrieval.answers import names_something
from memsearch.retrieval.candidates import Candidate, Factor
from memsearch.retrieval.dates import says_when
from memsearch.retrieval.request import Boost
from memsearch.timeutil import SECONDS_PER_DAY, age_seconds


@dataclass(frozen=True)
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

    def involves(self, memory: Memory, person: str) -> bool:
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


def decay_factor(candidate: Candidate, adjustment: Adjustment, now: datetime) -> Factor:
    moment = getattr(candidate.memory, adjustment.clock)
    age = age_seconds(moment, now)
    days = age / SECONDS_PER_DAY
    detail: dict[str, float | str] = {"clock": adjustment.clock, "age_days": days, "tau_days": adjustment.tau_days}
    if adjustment.shape == "hyperbolic":
        whole = int(days)  # CEMS counts whole days: (now - last_accessed).days
        detail["whole_days"] = whole
        value = hyperbolic_decay(whole, adjustment.tau_days)
    else:
        value = exponential_decay(age, adjustment.tau_days * SECONDS_PER_DAY)
        if adjustment.shape == "floor":
            detail["floor"] = adjustment.floor
            value = adjustment.floor + (1 - adjustment.floor) * value
    return Factor("decay", "mul", value, detail)


def project_factor(candidate: Candidate, adjustment: Adjustment, project: str) -> Factor:
    own = candidate.memory.project
    if own == project:
        return Factor("project", "mul", adjustment.same, {"project": own, "match": "same"})
    if own is None:
        return Factor("project", "mul", adjustment.none, {"project": None, "match": "none"})
    return Factor("project", "mul", adjustment.other, {"project": own, "match": "other"})


def factor_for(
    candidate: Candidate, adjustment: Adjustment, now: datetime, project: str | None, facts: QueryFacts
) -> Factor | None:
    memory = candidate.memory
    match adjustment.kind:
        case "decay":
            return decay_factor(candidate, adjustment, now)
        case "memory_score":
            value = adjustment.weight * memory.quality
            return Factor("memory_score", "add", value, {"memory_score": memory.quality, "weight": adjustment.weight})
        case "priority":
            return Factor("priority", "mul", memory.priority)
        case "pinned":
            return Factor("pinned", "mul", adjustment.factor if memory.pinned else 1.0, {"pinned": memory.pinned})
        case "project":
            return project_factor(candidate, adjustment, project) if project is not None else None
        case "speaker":  # the query names one speaker: their memories are the likelier answer
            if (speaker := facts.speaker) is None:
                return None
            same = memory.role == speaker
            return Factor("speaker", "mul", adjustment.factor if same else 1.0, {"named": speaker, "role": memory.role})
        case "about":  # the query names people: a memory that involves none of them is about someone else
            if not facts.named:
                return None
            involved = any(facts.involves(memory, person) for person in facts.named)
            detail = {"named": ", ".join(facts.named), "involved": involved}
            return Factor("about", "mul", 1.0 if involved else adjustment.factor, detail)
        case "when":  # the query asks when: memories that date something are the likelier answer
            if not facts.asks_when:
                return None
            dated = says_when(memory.text)
            return Factor("when", "mul", adjustment.factor if dated else 1.0, {"says_when": dated})
        case "names":  # the query asks who, where, which: memories that name someone or something
            if not facts.asks_name:
                return None
            names = names_something(memory.text, facts.speaker_words)
            return Factor("names", "mul", adjustment.factor if names else 1.0, {"names_something": names})
    raise ValueError(f"unknown adjustment {adjustment.kind!r}")


def apply_adjustments(
    candidates: Sequence[Candidate],
    adjustments: Sequence[Adjustment],
    now: datetime,
    project: str | None = None,
    facts: QueryFacts | None = None,
) -> list[Candidate]:
    facts = facts or QueryFacts()
    out = []
    for candidate in candidates:
        for adjustment in adjustments:
            if (factor := factor_for(candidate, adjustment, now, project, facts)) is not None:
                candidate = candidate.with_factor(factor)
        out.append(candidate)
    return out


def apply_boosts(candidates: Sequence[Candidate], boosts: Sequence[Boost]) -> list[Candidate]:
    """siftcoder's boostFn: × factor for each boost a memory matches (one factor per boost)."""
    if not boosts:
        return list(candidates)
    out = []
    for candidate in candidates:
        memory = candidate.memory
        for boost in boosts:
            if boost.matches(memory.tags, memory.project):
                candidate = candidate.with_factor(Factor("boost", "mul", boost.factor, {boost.field: boost.value}))
        out.append(candidate)
    return out
