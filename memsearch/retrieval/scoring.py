"""Adjustments of the fused score; each adds one named Factor to a candidate."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from memsearch.retrieval.candidates import Candidate, Factor
from memsearch.timeutil import SECONDS_PER_DAY, age_seconds


def exponential_decay(age_s: float, tau_s: float) -> float:
    """exp(-age / tau): 1 for a new memory, 1/e at one tau, never below 0."""
    return math.exp(-age_s / tau_s)


def apply_time_decay(candidates: Sequence[Candidate], now: datetime, tau_days: float) -> list[Candidate]:
    """Multiply each score by exp(-(now - created_at) / tau)."""
    tau_s = tau_days * SECONDS_PER_DAY
    adjusted = []
    for candidate in candidates:
        age = age_seconds(candidate.memory.created_at, now)
        factor = Factor(
            "decay",
            "mul",
            exponential_decay(age, tau_s),
            {"age_days": age / SECONDS_PER_DAY, "tau_days": tau_days},
        )
        adjusted.append(candidate.with_factor(factor))
    return adjusted
