"""Conversations at session level: Memsense's session-first scoring, and neighbour expansion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from memsearch.retrieval.candidates import Candidate
from memsearch.store.base import SearchBackend


def session_support(
    sessions: Sequence[Candidate], turns: Sequence[Candidate], cap: float, share: float
) -> list[Candidate]:
    """Memsense's session-first scoring: each session's fused score plus
    turn_support = min(cap, share · best turn's fused score) from its own turns.

    `sessions` may lack a session that only its turns found; it is added by the caller as a
    candidate with no legs. Returns the sessions with the support folded into the fusion score.
    """
    best: dict[int, Candidate] = {}
    counts: dict[int, int] = {}
    for turn in turns:
        parent = turn.memory.parent_id
        if parent is None:
            continue
        counts[parent] = counts.get(parent, 0) + 1
        if parent not in best or turn.fusion > best[parent].fusion:
            best[parent] = turn
    out = []
    for session in sessions:
        top = best.get(session.id)
        support = min(cap, share * top.fusion) if top is not None else 0.0
        detail = {
            "session_rrf_score": session.fusion,
            "turn_support": support,
            "supporting_turn_count": counts.get(session.id, 0),
            "best_turn_routes": sorted(top.legs) if top is not None else [],
            "best_turn_id": top.id if top is not None else None,
        }
        out.append(
            replace(
                session,
                fusion=session.fusion + support,
                fusion_terms={**session.fusion_terms, "turn_support": support},
                fusion_detail={**session.fusion_detail, **detail},
            )
        )
    return out


def expand_neighbours(ranked: Sequence[Candidate], store: SearchBackend, distance: int) -> list[Candidate]:
    """Results followed by the turns next to them (marked as context); the dropped after."""
    results = [c for c in ranked if c.dropped is None]
    shown = {c.id for c in results}
    out: list[Candidate] = []
    for hit in results:
        out.append(hit)
        if hit.memory.kind != "turn" or distance < 1:
            continue
        for memory in store.around(hit.memory, distance, distance):
            if memory.id not in shown:
                shown.add(memory.id)
                out.append(Candidate(memory, {}, fusion=0.0, selection={"context_of": hit.id}))
    return out + [c for c in ranked if c.dropped is not None]
