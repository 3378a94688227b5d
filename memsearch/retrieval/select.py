"""Filtering and selection: order the candidates and mark those that do not make the results, with why."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from memsearch.profiles import Profile
from memsearch.retrieval.candidates import Candidate
from memsearch.retrieval.request import Boost
from memsearch.retrieval.scoring import QueryFacts, apply_adjustments, apply_boosts

if TYPE_CHECKING:
    import numpy as np


def rank_by_final(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Best final score first; ties go to the higher fusion score, then to the older memory."""
    return sorted(candidates, key=lambda c: (-c.final, -c.fusion, c.id))


def _live(candidates: Sequence[Candidate]) -> list[Candidate]:
    return [c for c in candidates if c.dropped is None]


def drop_superseded(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Hide memories that consolidation marked superseded; pinned ones stay (siftcoder)."""
    return [
        c.drop(f"superseded by {c.memory.superseded_by}")
        if c.dropped is None and c.memory.superseded_by is not None and not c.memory.pinned
        else c
        for c in candidates
    ]


def drop_below(candidates: Sequence[Candidate], threshold: float) -> list[Candidate]:
    """Relevance filtering on the fusion score."""
    return [
        c.drop(f"below threshold ({c.fusion:.4g} < {threshold:g})") if c.dropped is None and c.fusion < threshold else c
        for c in candidates
    ]


MIN_SCORE_REASON = "below min_score"


def keep_min_score(candidates: Sequence[Candidate], min_score: float | None) -> list[Candidate]:
    """The request's relevance floor, on the final score the results show: a result below it is
    dropped, and so is a context row of a dropped result (a neighbour shown for it, which has no
    score of its own); the live ones stay first, in order."""
    if min_score is None:
        return list(candidates)
    dropped: set[int] = set()
    out = []
    for candidate in candidates:
        if candidate.dropped is None:
            context_of = candidate.selection.get("context_of")
            if context_of is not None:
                if context_of in dropped:
                    candidate = candidate.drop(f"{MIN_SCORE_REASON} (context of id {context_of})")
            elif candidate.final < min_score:
                candidate = candidate.drop(f"{MIN_SCORE_REASON} ({candidate.final:.4g} < {min_score:g})")
            if candidate.dropped is not None:
                dropped.add(candidate.id)
        out.append(candidate)
    return [c for c in out if c.dropped is None] + [c for c in out if c.dropped is not None]


def drop_exact_duplicates(ranked: Sequence[Candidate]) -> list[Candidate]:
    """Keep the best-ranked memory of each identical text; mark the others."""
    kept: dict[str, int] = {}
    out = []
    for candidate in ranked:
        if candidate.dropped is None:
            first = kept.setdefault(candidate.memory.content_hash, candidate.id)
            if first != candidate.id:
                candidate = candidate.drop(f"duplicate of id {first}")
        out.append(candidate)
    return out


def take_top(ranked: Sequence[Candidate], k: int, reason: str = "limit") -> list[Candidate]:
    """Keep the first k live candidates; mark the live ones after them with `reason`."""
    out = []
    live = 0
    for candidate in ranked:
        if candidate.dropped is None:
            live += 1
            if live > k:
                candidate = candidate.drop(reason)
        out.append(candidate)
    return out


def tag_jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    union = set(a) | set(b)
    return len(set(a) & set(b)) / len(union) if union else 0.0


def mmr_select(
    ranked: Sequence[Candidate],
    k: int,
    vectors: Mapping[int, np.ndarray],
    lam: float,
    tag_weight: float,
    duplicate_threshold: float | None,
) -> list[Candidate]:
    """Memsense's diversity selection, in selection order then the dropped ones.

    mmr = λ · final − (1 − λ) · max redundancy to the selected, with
    redundancy(a, b) = max(cosine(a, b), tag_weight · jaccard(tags)); a candidate at or above
    the duplicate threshold to a selected one is dropped as its duplicate.
    """
    pool = _live(ranked)
    order = {c.id: position for position, c in enumerate(pool)}
    selected: list[Candidate] = []
    dropped: list[Candidate] = []
    while pool and len(selected) < k:
        scored = []
        for candidate in pool:
            redundancy, similar_to = 0.0, None
            for chosen in selected:
                cosine = float(vectors[candidate.id] @ vectors[chosen.id])
                value = max(cosine, tag_weight * tag_jaccard(candidate.memory.tags, chosen.memory.tags))
                if value > redundancy or similar_to is None:
                    redundancy, similar_to = value, chosen.id
            scored.append((candidate, redundancy, similar_to))
        remaining = []
        for candidate, redundancy, similar_to in scored:
            if duplicate_threshold is not None and similar_to is not None and redundancy >= duplicate_threshold:
                dropped.append(candidate.drop(f"duplicate of id {similar_to}"))
            else:
                remaining.append((candidate, redundancy, similar_to))
        if not remaining:
            break
        best, redundancy, similar_to = max(
            remaining, key=lambda item: (lam * item[0].final - (1 - lam) * item[1], -order[item[0].id])
        )
        detail = {"mmr_score": lam * best.final - (1 - lam) * redundancy, "max_redundancy": redundancy}
        if similar_to is not None:
            detail["most_similar_to"] = similar_to
        selected.append(replace(best, selection=detail))
        pool = [c for c, _, _ in remaining if c.id != best.id]
    not_chosen = [c.drop("MMR") for c in pool]
    already = [c for c in ranked if c.dropped is not None]
    return selected + dropped + not_chosen + already


def estimate_tokens(text: str) -> int:
    """About four characters a token, the usual rule of thumb for English."""
    return max(1, math.ceil(len(text) / 4))


def fit_budget(ranked: Sequence[Candidate], max_tokens: int) -> list[Candidate]:
    """CEMS's greedy assembly: best first, and after one does not fit, keep trying smaller ones."""
    used = 0
    out = []
    for candidate in ranked:
        if candidate.dropped is None:
            tokens = estimate_tokens(candidate.memory.text)
            if used + tokens > max_tokens:
                candidate = candidate.drop(f"budget ({tokens} tokens, {max_tokens - used} left)")
            else:
                used += tokens
                candidate = replace(candidate, selection={**candidate.selection, "tokens": tokens})
        out.append(candidate)
    return out


def select(
    fused: Sequence[Candidate],
    profile: Profile,
    k: int,
    now: datetime,
    project: str | None,
    vectors: Mapping[int, np.ndarray],
    max_tokens: int | None,
    facts: QueryFacts | None = None,
    *,
    boosts: Sequence[Boost] = (),
    diverse_lambda: float | None = None,
) -> list[Candidate]:
    """filter → adjust → select over fused candidates. Pure: everything it needs is in its arguments.
    `boosts` multiply the scores of the memories they match (after the profile's adjustments);
    `diverse_lambda` selects by CEMS's diverse assembly (aggregation queries) instead of greedily."""
    if profile.drop_superseded:
        fused = drop_superseded(fused)
    if profile.fusion_floor is not None:
        fused = drop_below(fused, profile.fusion_floor)
    adjusted = apply_boosts(apply_adjustments(fused, profile.adjust, now, project, facts), boosts)
    ranked = rank_by_final(adjusted)
    choice = profile.select
    if choice.drop_identical:
        ranked = drop_exact_duplicates(ranked)
    if choice.candidate_limit is not None:
        ranked = take_top(ranked, choice.candidate_limit.size(k), reason="candidate limit")
    if choice.mmr_lambda is not None:
        ranked = mmr_select(ranked, k, vectors, choice.mmr_lambda, choice.mmr_tag_weight, choice.duplicate_threshold)
    budget = max_tokens if max_tokens is not None else choice.max_tokens
    if diverse_lambda is not None:
        from memsearch.retrieval.diverse import DIVERSE_DEFAULT_TOKENS, assemble_diverse

        ranked = assemble_diverse(ranked, vectors, budget or DIVERSE_DEFAULT_TOKENS, diverse_lambda)
        return take_top(ranked, k)
    ranked = take_top(ranked, k)
    if budget is not None:
        ranked = fit_budget(ranked, budget)
    return [c for c in ranked if c.dropped is None] + [c for c in ranked if c.dropped is not None]
