"""Selection: order the candidates and mark the ones that do not make the results, with why."""

from __future__ import annotations

from collections.abc import Sequence

from memsearch.retrieval.candidates import Candidate


def rank_by_final(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Best final score first; ties go to the higher fusion score, then to the older memory."""
    return sorted(candidates, key=lambda c: (-c.final, -c.fusion, c.id))


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


def take_top(ranked: Sequence[Candidate], k: int) -> list[Candidate]:
    """Keep the first k live candidates; mark the live ones after them as over the limit."""
    out = []
    live = 0
    for candidate in ranked:
        if candidate.dropped is None:
            live += 1
            if live > k:
                candidate = candidate.drop("limit")
        out.append(candidate)
    return out
