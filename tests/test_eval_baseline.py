"""The plain BM25 baselines, and the benchdata README's BM25 figures reproduced on the real LoCoMo dev file."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from memsearch.eval.baseline import BM25Baseline, bm25_rank, longmemeval_bm25, space_tokens, word_tokens
from memsearch.eval.datasets import load_locomo
from memsearch.eval.metrics import recall_at_k
from memsearch.ingest.readers import turn_text

LOCOMO_DEV = Path(__file__).parents[2] / "shared" / "benchdata" / "locomo_dev.json"

KEYS = ["t1", "t2", "t3", "t4"]
TEXTS = [
    "Ana: We rented a cabin by the lake.",
    "Ben: The violin lessons start in May.",
    "Ana: Paris? I loved Paris in the spring.",
    "Ben: Nothing planned yet.",
]


def test_tokenizers() -> None:
    assert word_tokens("Paris? I loved PARIS, it's great") == ["paris", "i", "loved", "paris", "it", "s", "great"]
    # LongMemEval splits on single spaces and keeps case and punctuation
    assert space_tokens("Paris? I  loved") == ["Paris?", "I", "", "loved"]


def test_bm25_ranks_matching_turns_first() -> None:
    assert bm25_rank(KEYS, TEXTS, "when do violin lessons start?")[0] == "t2"
    assert bm25_rank(KEYS, TEXTS, "lake cabin", k=1) == ["t1"]
    assert sorted(bm25_rank(KEYS, TEXTS, "lake")) == sorted(KEYS)  # every key, best first


def test_stable_order_breaks_ties_by_corpus_order() -> None:
    # no query word occurs: every score is 0, so the corpus order stands
    assert BM25Baseline(KEYS, TEXTS).rank("xylophone") == KEYS


def test_longmemeval_tokens_are_case_and_punctuation_sensitive() -> None:
    index = longmemeval_bm25(KEYS, TEXTS)
    assert index.scores("paris").max() == 0  # the corpus has "Paris?" and "Paris"
    assert index.rank("Paris")[0] == "t3"
    assert BM25Baseline(KEYS, TEXTS).scores("paris").argmax() == 2


def test_degenerate_corpora() -> None:
    assert BM25Baseline([], []).rank("anything") == []
    assert BM25Baseline(["a", "b"], ["", "!!"]).rank("anything") == ["a", "b"]  # no tokens at all
    with pytest.raises(ValueError, match="2 keys for 1 texts"):
        BM25Baseline(["a", "b"], ["x"])
    with pytest.raises(ValueError, match="repeat"):
        BM25Baseline(["a", "a"], ["x", "y"])


@pytest.mark.skipif(not LOCOMO_DEV.exists(), reason=f"{LOCOMO_DEV} is absent (shared benchmark data)")
def test_reproduces_the_benchdata_readme_bm25_row() -> None:
    # README: BM25 (rank_bm25 Okapi, lower-cased \w+ tokens) turn-level R@5/10/25/50 = 0.468 / 0.546 / 0.647 / 0.704
    recalls: dict[int, list[float]] = {5: [], 10: [], 25: [], 50: []}
    for conversation, questions in load_locomo(LOCOMO_DEV):
        turns = conversation.turns
        index = BM25Baseline([t.key for t in turns], [turn_text(t) for t in turns])
        for question in questions:
            if question.is_scored:
                ranked = index.rank(question.text, k=50)
                for k, values in recalls.items():
                    values.append(recall_at_k(ranked, question.evidence_keys, k))
    assert len(recalls[5]) == 997
    means = {k: round(statistics.fmean(values), 3) for k, values in recalls.items()}
    assert means == {5: 0.468, 10: 0.546, 25: 0.647, 50: 0.704}
