"""Reciprocal Rank Fusion: scale-free, it uses only where each leg ranked a memory."""

from __future__ import annotations

from collections.abc import Mapping

from memsearch.retrieval.candidates import LegHit


def rrf(
    legs: Mapping[str, Mapping[int, LegHit]], k: float, weights: Mapping[str, float]
) -> dict[int, tuple[float, dict[str, float]]]:
    """score(d) = Σ_leg weight_leg / (k + rank_leg(d)), over the legs that found d.

    Returns, per memory id, the fused score and each leg's term of it.
    """
    fused: dict[int, tuple[float, dict[str, float]]] = {}
    for leg in sorted(legs):
        weight = weights.get(leg, 1.0)
        for memory_id, hit in legs[leg].items():
            term = weight / (k + hit.rank)
            total, terms = fused.get(memory_id, (0.0, {}))
            terms[leg] = term
            fused[memory_id] = (total + term, terms)
    return fused
