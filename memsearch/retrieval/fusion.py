"""Fusion: one score per candidate from its legs' ranks (RRF) or from named signals (weighted)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from memsearch.profiles import Fusion
from memsearch.retrieval.candidates import Candidate, LegHit
from memsearch.timeutil import SECONDS_PER_DAY, age_seconds


def rrf(
    legs: Mapping[str, Mapping[int, LegHit]],
    k: float,
    weights: Mapping[str, float],
    rank_bonus: Mapping[int, float] | None = None,
) -> dict[int, tuple[float, dict[str, float]]]:
    """score(d) = Σ_leg weight_leg / (k + rank_leg(d)) [+ bonus(rank_leg(d))], over the legs that found d.

    Returns, per memory id, the fused score and its terms (`bonus:<leg>` for rank bonuses).
    """
    bonuses = rank_bonus or {}
    found: dict[int, dict[str, float]] = {}
    for leg in sorted(legs):
        weight = weights.get(leg, 1.0)
        for memory_id, hit in legs[leg].items():
            terms = found.setdefault(memory_id, {})
            terms[leg] = weight / (k + hit.rank)
            if bonus := bonuses.get(hit.rank, 0.0):
                terms[f"bonus:{leg}"] = bonus
    # fsum is exact (the correctly rounded sum, in any order): one sum per memory, once
    return {memory_id: (math.fsum(terms.values()), terms) for memory_id, terms in found.items()}


def min_max(values: Sequence[float]) -> list[float]:
    """Scale to [0, 1]; when all values are equal each counts as the best (1.0)."""
    if not values:
        return []
    low, high = min(values), max(values)
    if high == low:
        return [1.0 for _ in values]
    return [(v - low) / (high - low) for v in values]


def fuse_rrf(candidates: Sequence[Candidate], fusion: Fusion) -> list[Candidate]:
    legs: dict[str, dict[int, LegHit]] = {}
    for candidate in candidates:
        for leg, hit in candidate.legs.items():
            legs.setdefault(leg, {})[candidate.id] = hit
    fused = rrf(legs, fusion.rrf_k, fusion.weights, fusion.rank_bonus)
    out = [replace(c, fusion=fused[c.id][0], fusion_terms=fused[c.id][1]) for c in candidates]
    if fusion.blend_vector is None:
        return out
    # CEMS: normalise RRF to [0, 1] over the candidates, then blend with the vector score.
    blend = fusion.blend_vector
    normalised = min_max([c.fusion for c in out])
    return [
        replace(
            c,
            fusion=(1 - blend) * norm + blend * (c.cosine or 0.0),
            fusion_detail={"rrf": c.fusion, "norm_rrf": norm, "vector_score": c.cosine or 0.0, "blend_vector": blend},
        )
        for c, norm in zip(out, normalised, strict=True)
    ]


def signal_values(candidate: Candidate, best_lexical: float, now: datetime, access_rate: float) -> dict[str, float]:
    """The weighted method's signals, each in [0, 1] (cosine in [-1, 1])."""
    lexical = candidate.legs.get("lexical")
    days_since_access = age_seconds(candidate.memory.last_accessed_at, now) / SECONDS_PER_DAY
    return {
        "vector": candidate.cosine or 0.0,
        "lexical": lexical.score / best_lexical if lexical and best_lexical > 0 else 0.0,
        "importance": candidate.memory.importance,
        "access_recency": math.exp(-access_rate * days_since_access),
    }


def fuse_weighted(candidates: Sequence[Candidate], fusion: Fusion, now: datetime) -> list[Candidate]:
    """Σ weight · signal; the BM25 signal is divided by the best BM25 score among the candidates."""
    best_lexical = max((c.legs["lexical"].score for c in candidates if "lexical" in c.legs), default=0.0)
    out = []
    for candidate in candidates:
        signals = signal_values(candidate, best_lexical, now, fusion.access_rate)
        terms = {name: weight * signals[name] for name, weight in fusion.weights.items()}
        detail = {name: signals[name] for name in fusion.weights}
        out.append(replace(candidate, fusion=math.fsum(terms.values()), fusion_terms=terms, fusion_detail=detail))
    return out


def fuse(candidates: Sequence[Candidate], fusion: Fusion, now: datetime) -> list[Candidate]:
    return fuse_rrf(candidates, fusion) if fusion.method == "rrf" else fuse_weighted(candidates, fusion, now)
