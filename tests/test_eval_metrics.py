"""Retrieval metrics on hand-computed cases, their invariants, aggregation and latency percentiles."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsearch.eval.metrics import (
    KS,
    KS_OF_FORMAT,
    QuestionResult,
    aggregate,
    first_occurrences,
    latency_summary,
    longmemeval_scores,
    ndcg_any_at_k,
    ndcg_at_k,
    percentile,
    recall_all_at_k,
    recall_any_at_k,
    recall_at_k,
    score_ranking,
    turn_to_session_scores,
)

RANKED = ["a", "b", "c", "d", "e"]
GOLD = {"b", "e", "z"}  # "z" was never retrieved


def test_recall_hand_computed() -> None:
    assert recall_at_k(RANKED, GOLD, 1) == 0  # top 1 = {a}: no gold
    assert recall_at_k(RANKED, GOLD, 2) == pytest.approx(1 / 3)  # {a, b}: b of 3 gold
    assert recall_at_k(RANKED, GOLD, 5) == pytest.approx(2 / 3)  # b and e of 3
    assert recall_at_k(RANKED, GOLD, 50) == pytest.approx(2 / 3)  # k past the end of the ranking


def test_recall_any_and_all_hand_computed() -> None:
    assert recall_any_at_k(RANKED, GOLD, 1) == 0
    assert recall_any_at_k(RANKED, GOLD, 2) == 1  # b
    assert recall_all_at_k(RANKED, GOLD, 5) == 0  # z is never found
    assert recall_all_at_k(RANKED, {"b", "e"}, 4) == 0  # e is 5th
    assert recall_all_at_k(RANKED, {"b", "e"}, 5) == 1


def test_ndcg_hand_computed() -> None:
    # hits at ranks 2 and 5: DCG = 1/log2(3) + 1/log2(6) = 0.63093 + 0.38685 = 1.01778
    # ideal: min(3 gold, k=5) = 3 hits at ranks 1-3: 1/log2(2) + 1/log2(3) + 1/log2(4) = 1 + 0.63093 + 0.5 = 2.13093
    assert ndcg_at_k(RANKED, GOLD, 5) == pytest.approx((1 / math.log2(3) + 1 / math.log2(6)) / 2.1309297535714573)
    assert ndcg_at_k(RANKED, GOLD, 5) == pytest.approx(0.47763, abs=1e-5)
    # k=2: hit at rank 2 only, ideal 2 hits: 0.63093 / (1 + 0.63093) = 0.38685
    assert ndcg_at_k(RANKED, GOLD, 2) == pytest.approx(0.38685, abs=1e-5)


def test_ndcg_any_hand_computed() -> None:
    # LongMemEval's DCG: rank 1 weighs 1, rank r ≥ 2 weighs 1/log2(r).
    # hits at ranks 2 and 5: 1/log2(2) + 1/log2(5) = 1 + 0.43068 = 1.43068
    # ideal, 3 hits at ranks 1-3: 1 + 1/log2(2) + 1/log2(3) = 1 + 1 + 0.63093 = 2.63093
    assert ndcg_any_at_k(RANKED, GOLD, 5) == pytest.approx((1 + 1 / math.log2(5)) / (2 + 1 / math.log2(3)))
    assert ndcg_any_at_k(RANKED, GOLD, 5) == pytest.approx(0.54379, abs=1e-5)
    # k=2: 1 / (1 + 1) = 0.5, where the textbook discount gave 0.38685
    assert ndcg_any_at_k(RANKED, GOLD, 2) == pytest.approx(0.5)


def test_ndcg_ideal_is_capped_at_k() -> None:
    # 3 gold, k=2, both places filled with gold: the ideal is 2 hits, so a perfect score
    assert ndcg_at_k(["a", "b", "c"], {"a", "b", "c"}, 2) == 1
    assert ndcg_any_at_k(["a", "b", "c"], {"a", "b", "c"}, 2) == 1


@pytest.mark.parametrize("metric", [recall_at_k, recall_any_at_k, recall_all_at_k, ndcg_at_k, ndcg_any_at_k])
def test_metrics_reject_undefined_input(metric: Callable[[Sequence[str], Collection[str], int], float]) -> None:
    with pytest.raises(ValueError, match="no gold keys"):
        metric(RANKED, set(), 5)
    with pytest.raises(ValueError, match="k must be at least 1"):
        metric(RANKED, GOLD, 0)
    with pytest.raises(ValueError, match="repeat"):
        metric(["a", "b", "a"], GOLD, 5)


def test_score_ranking_names_every_metric_at_every_k() -> None:
    scores = score_ranking(RANKED, GOLD)
    assert len(scores) == 5 * len(KS)
    assert scores["recall@5"] == pytest.approx(2 / 3)
    assert scores["recall_all@50"] == 0
    assert set(score_ranking(RANKED, GOLD, ks=(1,))) == {
        "recall@1",
        "recall_any@1",
        "recall_all@1",
        "ndcg@1",
        "ndcg_any@1",
    }


def test_first_occurrences_turns_a_turn_ranking_into_a_session_ranking() -> None:
    assert first_occurrences(["s2", "s1", "s2", "s3", "s1"]) == ["s2", "s1", "s3"]


# -- invariants ---------------------------------------------------------------------------------------

KEYS = st.lists(st.text("abcdefghij", min_size=1, max_size=2), min_size=1, max_size=30, unique=True)


@st.composite
def ranking_and_gold(draw: st.DrawFn) -> tuple[list[str], set[str]]:
    ranked = draw(KEYS)
    # gold: some ranked keys and possibly some never retrieved
    gold = set(draw(st.lists(st.sampled_from(ranked), max_size=len(ranked))))
    gold |= set(draw(st.lists(st.text("xyz", min_size=3, max_size=3), max_size=3)))
    if not gold:
        gold = {ranked[-1]}
    return ranked, gold


@given(ranking_and_gold(), st.integers(1, 40), st.integers(1, 40))
def test_recalls_are_shares_and_grow_with_k(case: tuple[list[str], set[str]], k1: int, k2: int) -> None:
    ranked, gold = case
    small, large = sorted((k1, k2))
    for metric in (recall_at_k, recall_any_at_k, recall_all_at_k):
        assert 0 <= metric(ranked, gold, small) <= metric(ranked, gold, large) <= 1
    # all ⇒ full recall, none ⇒ zero recall
    assert (
        recall_all_at_k(ranked, gold, small) <= recall_at_k(ranked, gold, small) <= recall_any_at_k(ranked, gold, small)
    )


@given(ranking_and_gold(), st.integers(1, 40))
def test_ndcg_is_in_unit_interval(case: tuple[list[str], set[str]], k: int) -> None:
    ranked, gold = case
    for metric in (ndcg_at_k, ndcg_any_at_k):
        value = metric(ranked, gold, k)
        assert 0 <= value <= 1 + 1e-12
        assert (value == 0) == (recall_any_at_k(ranked, gold, k) == 0)


@given(KEYS, st.data(), st.integers(1, 40))
def test_ndcg_is_one_when_gold_comes_first(keys: list[str], data: st.DataObject, k: int) -> None:
    count = data.draw(st.integers(1, len(keys)))
    gold, rest = keys[:count], data.draw(st.permutations(keys[count:]))
    ranked = data.draw(st.permutations(gold)) + rest
    assert ndcg_at_k(ranked, set(gold), k) == pytest.approx(1)
    assert ndcg_any_at_k(ranked, set(gold), k) == pytest.approx(1)
    assert recall_at_k(ranked, set(gold), k) == pytest.approx(min(count, k) / count)


def _longmemeval_style_ndcg(ranked: list[str], gold: set[str], k: int) -> float:
    """An independent numpy rendering of LongMemEval's eval_utils.ndcg over a full-corpus ranking:
    relevance vector, DCG = rel[0] + Σ rel[i] / log2(i + 1) for 0-based i ≥ 1, ideal = sorted relevances."""

    def dcg(relevances: np.ndarray) -> float:
        relevances = relevances[:k]
        return float(relevances[0] + np.sum(relevances[1:] / np.log2(np.arange(2, relevances.size + 1))))

    relevances = np.array([1.0 if key in gold else 0.0 for key in ranked])
    ideal = dcg(np.sort(relevances)[::-1])
    return 0.0 if ideal == 0 else dcg(relevances) / ideal


@given(KEYS, st.data(), st.integers(1, 40))
def test_ndcg_any_matches_longmemeval_formula(keys: list[str], data: st.DataObject, k: int) -> None:
    gold = set(data.draw(st.lists(st.sampled_from(keys), min_size=1)))  # gold within the corpus, as there
    assert ndcg_any_at_k(keys, gold, k) == pytest.approx(_longmemeval_style_ndcg(keys, gold, k))


# -- aggregation --------------------------------------------------------------------------------------


def test_aggregate_overall_and_per_category() -> None:
    results = [
        QuestionResult("q1", 1, {"recall@5": 1.0, "ndcg@5": 1.0}),
        QuestionResult("q2", 1, {"recall@5": 0.0, "ndcg@5": 0.0}),
        QuestionResult("q3", 4, {"recall@5": 0.5, "ndcg@5": 0.25}),
        QuestionResult("q4", 2, {"recall@5": 1.0, "ndcg@5": 0.5}),
    ]
    summary = aggregate(results)
    # overall recall@5: (1 + 0 + 0.5 + 1) / 4 = 0.625; ndcg@5: (1 + 0 + 0.25 + 0.5) / 4 = 0.4375
    assert summary.overall.count == 4
    assert summary.overall.means == {"recall@5": 0.625, "ndcg@5": 0.4375}
    assert list(summary.by_category) == [1, 2, 4]
    assert summary.by_category[1].count == 2
    assert summary.by_category[1].means == {"recall@5": 0.5, "ndcg@5": 0.5}
    assert summary.by_category[4].means == {"recall@5": 0.5, "ndcg@5": 0.25}


def test_aggregate_orders_numbers_before_names_and_checks_metrics() -> None:
    mixed = aggregate(
        [
            QuestionResult("a", "temporal", {"m": 1.0}),
            QuestionResult("b", 3, {"m": 0.0}),
            QuestionResult("c", "multi", {"m": 1.0}),
        ]
    )
    assert list(mixed.by_category) == [3, "multi", "temporal"]
    with pytest.raises(ValueError, match="'b' has metrics"):
        aggregate([QuestionResult("a", 1, {"m": 1.0}), QuestionResult("b", 1, {"n": 1.0})])
    with pytest.raises(ValueError, match="no results"):
        aggregate([])


# -- latency ------------------------------------------------------------------------------------------


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(20, 0, -1)]  # 1..20, unsorted
    assert percentile(values, 50) == 10  # rank ceil(0.50 · 20) = 10
    assert percentile(values, 95) == 19  # rank ceil(0.95 · 20) = 19
    assert percentile(values, 100) == 20
    assert percentile([5.0, 1.0, 3.0], 50) == 3  # rank ceil(1.5) = 2 → 3
    assert percentile([5.0, 1.0, 3.0], 95) == 5  # rank ceil(2.85) = 3 → 5
    assert percentile([7.0], 1) == 7
    summary = latency_summary([5.0, 1.0, 3.0])
    assert (summary.count, summary.p50, summary.p95, summary.mean, summary.max) == (3, 3.0, 5.0, 3.0, 5.0)
    for bad in (0, 101):
        with pytest.raises(ValueError, match="p must be"):
            percentile(values, bad)
    with pytest.raises(ValueError, match="no"):
        latency_summary([])


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=50), st.floats(1, 100), st.floats(1, 100))
def test_percentile_is_an_observed_value_and_grows_with_p(values: list[float], p1: float, p2: float) -> None:
    low, high = sorted((p1, p2))
    assert percentile(values, low) in values
    assert min(values) <= percentile(values, low) <= percentile(values, high) <= max(values)


# -- LongMemEval's turn→session evaluation (eval_utils.evaluate_retrieval_turn2session) --------------


def _official_turn2session(ranked: list[str], gold: set[str], k: int) -> tuple[float, float, float]:
    """eval_utils.py's algorithm over a corpus that is the ranking itself (ids `<session>:<n>`)."""
    corpus = [key.rpartition(":")[0] for key in ranked]
    correct = {key.rpartition(":")[0] for key in gold}
    effective = k
    while effective <= len(corpus) and len(set(corpus[:effective])) < k:
        effective += 1
    recalled = set(corpus[:effective])
    relevances = [1.0 if key in gold else 0.0 for key in ranked]

    def dcg(values: list[float], cut: int) -> float:
        values = values[:cut]
        return values[0] + sum(v / math.log2(i) for i, v in enumerate(values[1:], start=2)) if values else 0.0

    ideal = dcg(sorted(relevances, reverse=True), effective)
    ndcg = dcg(relevances, effective) / ideal if ideal else 0.0
    return float(any(c in recalled for c in correct)), float(all(c in recalled for c in correct)), ndcg


@given(
    st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(1, 4)), min_size=1, max_size=20, unique=True),
    st.data(),
    st.sampled_from([1, 3, 5, 10, 30, 50]),
)
def test_turn_to_session_matches_the_official_algorithm(
    pairs: list[tuple[str, int]], data: st.DataObject, k: int
) -> None:
    ranked = [f"s_{session}:{n}" for session, n in pairs]
    gold = set(data.draw(st.lists(st.sampled_from(ranked), min_size=1, unique=True)))
    scores = turn_to_session_scores(ranked, gold, k)
    expected = _official_turn2session(ranked, gold, k)
    assert (scores[f"session_recall_any@{k}"], scores[f"session_recall_all@{k}"]) == expected[:2]
    assert scores[f"session_ndcg_any@{k}"] == pytest.approx(expected[2])


def test_turn_to_session_widens_the_cut_to_k_sessions() -> None:
    ranked = ["a:1", "a:3", "b:1", "a:5", "c:1"]
    # k=2 sessions needs the first three turns: a and b
    assert turn_to_session_scores(ranked, {"c:1"}, 2)["session_recall_any@2"] == 0.0
    assert turn_to_session_scores(ranked, {"b:1"}, 2)["session_recall_any@2"] == 1.0
    assert turn_to_session_scores(ranked, set(), 2) == {
        "session_recall_any@2": 0.0, "session_recall_all@2": 1.0, "session_ndcg_any@2": 0.0,
    }  # fmt: skip


def test_longmemeval_scores_an_empty_gold_set_as_the_official_code() -> None:
    assert longmemeval_scores(["a", "b"], set(), 1) == {"recall_any@1": 0.0, "recall_all@1": 1.0, "ndcg_any@1": 0.0}
    assert longmemeval_scores(["a", "b"], {"b"}, 1)["recall_any@1"] == 0.0
    assert KS_OF_FORMAT["longmemeval"] == (1, 3, 5, 10, 30, 50)
