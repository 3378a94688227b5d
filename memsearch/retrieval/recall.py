"""Recall legs: each turns the query into one ranked list of (memory id, score), numbered here."""

from __future__ import annotations

from collections.abc import Sequence

from memsearch.retrieval.candidates import LegHit


def rank_hits(hits: Sequence[tuple[int, float]]) -> dict[int, LegHit]:
    """Number a leg's best-first hits 1, 2, 3, …"""
    return {memory_id: LegHit(rank, score) for rank, (memory_id, score) in enumerate(hits, start=1)}
