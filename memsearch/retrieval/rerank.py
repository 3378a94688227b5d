"""Re-ordering the head of a ranking: the order an LLM or the deterministic re-ranker chose,
applied so every later stage sees it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace

from memsearch.retrieval.candidates import Candidate


def apply_order(ranked: Sequence[Candidate], order: Sequence[int], method: str) -> list[Candidate]:
    """The first len(order) candidates put in `order`: they take the fused scores of the places
    they move to (the scores, sorted, stay where they were), so every later stage sees the new
    order; each records where it moved from and to."""
    head, tail = list(ranked[: len(order)]), list(ranked[len(order) :])
    scores = [c.fusion for c in head]
    moved = []
    for place, position in enumerate(order):
        candidate = head[position]
        move = {"method": method, "from": position + 1, "to": place + 1, "score_before": candidate.fusion}
        detail = {**candidate.fusion_detail, "rerank": move}
        moved.append(replace(candidate, fusion=scores[place], fusion_detail=detail))
    return moved + tail


def coverage_order(words: AbstractSet[str], texts: Sequence[str]) -> list[int]:
    """siftcoder's deterministic re-ranker slot: by the share of the query's distinct content
    `words` (ParsedQuery.content_words) each text contains, ties kept in their old order."""
    if not words:
        return list(range(len(texts)))
    shares = [len(words & set(re.findall(r"\w+", text.lower()))) / len(words) for text in texts]
    return sorted(range(len(texts)), key=lambda i: (-shares[i], i))
