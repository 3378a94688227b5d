"""Consolidation: mark older near-duplicates superseded by the newest, and group related memories."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

BLOCK = 1024

_PUNCTUATION = "\"'`.,;:!?()[]{}<>«»“”‘’*"
# A token that names one thing exactly: a number or version (a digit), an identifier (an
# underscore, a capital as in Alice, parseConfig or JWT, an inner dot as in config.yaml), a path
# or URL (a slash), an address (@), a variable ($).
_EXACT = re.compile(r"\d|_|[/\\@$]|\w\.\w|[A-Z]")


def _tokens(text: str) -> list[tuple[str, bool]]:
    """The text's tokens (split at white space, outer punctuation stripped), each with whether it is exact."""
    tokens = []
    for raw in text.split():
        token = raw.strip(_PUNCTUATION)
        if token:
            tokens.append((token, bool(_EXACT.search(token))))
    return tokens


def distinct_exact_tokens(a: str, b: str) -> bool:
    """Whether two texts differ in an exact token (an identifier, a number, a path, a version, a
    capitalised word such as a name): one has it and the other has no token like it in any case
    (so a sentence's capitalised first word found lower-case in the other text is no difference).
    Such texts state different facts however close their embeddings are (`subscription_id`
    against `invoice_id`), so they are never near-duplicates."""
    tokens_a, tokens_b = _tokens(a), _tokens(b)
    words_a = {token.casefold() for token, _ in tokens_a}
    words_b = {token.casefold() for token, _ in tokens_b}
    return any(exact and token.casefold() not in words_b for token, exact in tokens_a) or any(
        exact and token.casefold() not in words_a for token, exact in tokens_b
    )


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
    ids: np.ndarray,
    matrix: np.ndarray,
    order: Sequence[int],
    duplicate: float,
    related: float,
    texts: Mapping[int, str] | None = None,
) -> ConsolidationPlan:
    """`order` lists the ids oldest first; the newest of near-duplicates is the one that stays.
    With `texts`, a pair that differs in an exact token (see `distinct_exact_tokens`) is related
    at most, never a duplicate."""
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
        if cosine >= duplicate and not (texts and distinct_exact_tokens(texts[a], texts[b])):
            older, newer = sorted((a, b), key=age_rank.__getitem__)
            if older not in superseded or age_rank[newer] > age_rank[superseded[older]]:
                superseded[older] = newer
    members: dict[int, list[int]] = {}
    for memory_id in parent:
        members.setdefault(find(memory_id), []).append(memory_id)
    groups = {m: min(group) for group in members.values() if len(group) > 1 for m in group}
    return ConsolidationPlan(superseded, groups)
