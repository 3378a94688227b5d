"""Consolidation: mark older near-duplicates superseded by the newest, and group related memories."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BLOCK = 1024


@dataclass(frozen=True)
class ConsolidationPlan:
    superseded: dict[int, int]  # older id → the newest near-duplicate that replaces it
    groups: dict[int, int]  # id → group id (the smallest id of its group), for groups of two or more


def similar_pairs(ids: np.ndarray, matrix: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    """Every pair (a, b, cosine) with a < b in row order and cosine ≥ threshold, block by block."""
    pairs = []
    for start in range(0, len(ids), BLOCK):
        block = matrix[start : start + BLOCK] @ matrix.T
        rows, cols = np.nonzero(block >= threshold)
        for row, col in zip(rows.tolist(), cols.tolist(), strict=True):
            if start + row < col:
                pairs.append((int(ids[start + row]), int(ids[col]), float(block[row, col])))
    return pairs


def plan(
    ids: np.ndarray, matrix: np.ndarray, order: Sequence[int], duplicate: float, related: float
) -> ConsolidationPlan:
    """`order` lists the ids oldest first; the newest of near-duplicates is the one that stays."""
    age_rank = {memory_id: position for position, memory_id in enumerate(order)}
    pairs = similar_pairs(ids, matrix, min(duplicate, related))
    superseded: dict[int, int] = {}
    parent = {int(i): int(i) for i in ids}

    def find(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for a, b, cosine in pairs:
        if cosine >= related:
            root_a, root_b = find(a), find(b)
            if root_a != root_b:
                parent[max(root_a, root_b)] = min(root_a, root_b)
        if cosine >= duplicate:
            older, newer = sorted((a, b), key=age_rank.__getitem__)
            if older not in superseded or age_rank[newer] > age_rank[superseded[older]]:
                superseded[older] = newer
    members: dict[int, list[int]] = {}
    for memory_id in parent:
        members.setdefault(find(memory_id), []).append(memory_id)
    groups = {m: min(group) for group in members.values() if len(group) > 1 for m in group}
    return ConsolidationPlan(superseded, groups)
