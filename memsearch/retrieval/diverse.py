"""Diverse assembly of an aggregation query's results (CEMS's assemble_context_diverse): MMR over
the ranking, first one result per session, within a token budget."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from memsearch.retrieval.candidates import Candidate

if TYPE_CHECKING:
    import numpy as np

DIVERSE_DEFAULT_TOKENS = 2000  # assemble_context_diverse's max_tokens


def assemble_diverse(
    ranked: Sequence[Candidate], vectors: Mapping[int, np.ndarray], max_tokens: int, lam: float
) -> list[Candidate]:
    """retrieval.py:286: MMR = λ·relevance − (1−λ)·max similarity to the selected, in two phases:
    first the top result of each session, then the rest, within the token budget. Returns the
    selected in order, then the others marked."""
    live = [c for c in ranked if c.dropped is None]
    chosen: list[Candidate] = []
    used = 0

    def mmr(candidate: Candidate) -> tuple[float, float]:
        similarity = max(
            (
                float(vectors[candidate.id] @ vectors[c.id])
                for c in chosen
                if candidate.id in vectors and c.id in vectors
            ),
            default=0.0,
        )
        return lam * candidate.final - (1 - lam) * similarity, similarity

    def take(pool: list[Candidate], phase: int) -> None:
        nonlocal used
        while pool:
            order = {c.id: n for n, c in enumerate(live)}
            best = max(pool, key=lambda c: (mmr(c)[0], -order[c.id]))
            pool.remove(best)
            if phase == 1 and any(_session(best) == _session(c) for c in chosen):
                continue
            tokens = max(1, -(-len(best.memory.text) // 4))  # select.estimate_tokens
            if used + tokens > max_tokens:
                continue
            score, similarity = mmr(best)
            used += tokens
            chosen.append(
                replace(
                    best,
                    selection={**best.selection, "phase": phase, "mmr_score": score, "max_similarity": similarity,
                               "tokens": tokens},
                )
            )  # fmt: skip

    take(list(live), 1)
    taken = {c.id for c in chosen}
    take([c for c in live if c.id not in taken], 2)
    taken = {c.id for c in chosen}
    rest = [c.drop("budget (diverse assembly)") for c in live if c.id not in taken]
    return chosen + rest + [c for c in ranked if c.dropped is not None]


def _session(candidate: Candidate) -> object:
    memory = candidate.memory
    return (memory.conversation, memory.session) if memory.session is not None else ("memory", memory.id)
