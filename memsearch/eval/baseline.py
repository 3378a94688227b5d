"""Plain BM25 baselines (rank_bm25's BM25Okapi, default k1=1.5, b=0.75, epsilon=0.25) to compare with.

Two published set-ups:

- benchdata README (shared/benchdata): lower-cased `\\w+` tokens. `BM25Baseline(keys, texts)`.
- LongMemEval's flat-bm25 (xiaowu0162/LongMemEval, src/retrieval/run_retrieval.py,
  `run_flat_retrieval`): `text.split(" ")` tokens, case kept, punctuation left on the words, and
  the ranking `np.argsort(scores)[::-1]`. `longmemeval_bm25(keys, texts)`.

rank_bm25 is imported on first use, so the rest of `memsearch.eval` works without it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

Tokenizer = Callable[[str], list[str]]
_WORD = re.compile(r"\w+")


def word_tokens(text: str) -> list[str]:
    """The benchdata README's tokens: lower-cased `\\w+` runs."""
    return _WORD.findall(text.lower())


def space_tokens(text: str) -> list[str]:
    """LongMemEval's tokens: `text.split(" ")`, as is (so "Paris?" and "paris" differ)."""
    return text.split(" ")


class BM25Baseline:
    """BM25Okapi over one conversation's turns; `rank(query)` returns every key, best first.

    `order="stable"` breaks score ties by corpus order (deterministic); `order="numpy"` is
    LongMemEval's `np.argsort(scores)[::-1]` (unstable sort reversed: ties come out in an order
    numpy does not promise), for reproducing its numbers exactly.
    """

    def __init__(
        self,
        keys: Sequence[str],
        texts: Sequence[str],
        *,
        tokenizer: Tokenizer = word_tokens,
        order: Literal["stable", "numpy"] = "stable",
    ) -> None:
        if len(keys) != len(texts):
            raise ValueError(f"{len(keys)} keys for {len(texts)} texts")
        if len(set(keys)) != len(keys):
            raise ValueError("the keys repeat a key")
        self.keys = list(keys)
        self.tokenizer = tokenizer
        self.order = order
        corpus = [tokenizer(text) for text in texts]
        self._bm25 = None
        # rank_bm25 divides by the corpus's token count and vocabulary size: with no tokens at
        # all every score is 0 instead.
        if any(corpus):
            try:
                from rank_bm25 import BM25Okapi
            except ImportError:
                raise ImportError("the BM25 baseline needs rank_bm25: pip install rank-bm25") from None
            self._bm25 = BM25Okapi(corpus)  # pre-tokenised: its own tokenizer= path starts a process pool

    def scores(self, query: str) -> np.ndarray:
        if self._bm25 is None:
            return np.zeros(len(self.keys))
        return np.asarray(self._bm25.get_scores(self.tokenizer(query)), dtype=float)

    def rank(self, query: str, k: int | None = None) -> list[str]:
        scores = self.scores(query)
        indices = np.argsort(scores)[::-1] if self.order == "numpy" else np.argsort(-scores, kind="stable")
        return [self.keys[i] for i in indices[:k]]


def longmemeval_bm25(keys: Sequence[str], texts: Sequence[str]) -> BM25Baseline:
    """BM25 exactly as LongMemEval's flat-bm25 retriever builds and ranks it."""
    return BM25Baseline(keys, texts, tokenizer=space_tokens, order="numpy")


def bm25_rank(keys: Sequence[str], texts: Sequence[str], query: str, k: int | None = None) -> list[str]:
    """One query against one corpus with the README's set-up (build a `BM25Baseline` to reuse the index)."""
    return BM25Baseline(keys, texts).rank(query, k)
