"""Retrieval metrics over ranked keys, their aggregation per category, and latency percentiles.

Two families, because two benchmarks define them differently:

- LoCoMo (benchdata README, the LoCoMo paper's Table 3): `recall_at_k`, the share of the gold turns
  found in the top k; plus the textbook binary `ndcg_at_k`.
- LongMemEval (xiaowu0162/LongMemEval, src/retrieval/eval_utils.py, `evaluate_retrieval` and `ndcg`):
  `recall_any_at_k` (1 if any gold item is in the top k), `recall_all_at_k` (1 if every one is) and
  `ndcg_any_at_k`, whose DCG is rel_1 + Σ_{i≥2} rel_i / log2(i) — ranks 1 and 2 both weigh 1 — where
  the textbook DCG is Σ_{i≥1} rel_i / log2(i + 1). Both normalise by the DCG of min(|gold|, k) hits.

Every metric needs at least one gold key (recall is undefined without one: such questions are skipped,
not scored 0) and ranked keys without repeats (a repeat would count one hit twice).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

KS = (5, 10, 25, 50)
# The cut-offs each benchmark's protocol reports (LongMemEval: run_retrieval.py's [1, 3, 5, 10, 30, 50]).
KS_OF_FORMAT = {"locomo": KS, "longmemeval": (1, 3, 5, 10, 30, 50)}


def _check(ranked_keys: Sequence[str], gold_keys: Collection[str], k: int) -> tuple[Sequence[str], set[str]]:
    """The top k of the ranking and the gold set, after validating both."""
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")
    gold = set(gold_keys)
    if not gold:
        raise ValueError("no gold keys: the metric is undefined (skip the question)")
    if len(set(ranked_keys)) != len(ranked_keys):
        raise ValueError("the ranked keys repeat a key")
    return ranked_keys[:k], gold


def recall_at_k(ranked_keys: Sequence[str], gold_keys: Collection[str], k: int) -> float:
    """Share of the gold keys found in the top k (LoCoMo's turn-level evidence recall)."""
    top, gold = _check(ranked_keys, gold_keys, k)
    return sum(key in gold for key in top) / len(gold)


def recall_any_at_k(ranked_keys: Sequence[str], gold_keys: Collection[str], k: int) -> float:
    """1 if any gold key is in the top k, else 0 (LongMemEval's recall_any)."""
    top, gold = _check(ranked_keys, gold_keys, k)
    return float(any(key in gold for key in top))


def recall_all_at_k(ranked_keys: Sequence[str], gold_keys: Collection[str], k: int) -> float:
    """1 if every gold key is in the top k, else 0 (LongMemEval's recall_all)."""
    top, gold = _check(ranked_keys, gold_keys, k)
    return float(gold <= set(top))


def _dcg(hits: Iterable[bool], discount: str) -> float:
    # ranks are 1-based; "textbook": 1/log2(rank + 1); "longmemeval": 1 at rank 1, else 1/log2(rank)
    if discount == "textbook":
        return sum(1 / math.log2(rank + 1) for rank, hit in enumerate(hits, start=1) if hit)
    return sum(1.0 if rank == 1 else 1 / math.log2(rank) for rank, hit in enumerate(hits, start=1) if hit)


def _ndcg(ranked_keys: Sequence[str], gold_keys: Collection[str], k: int, discount: str) -> float:
    top, gold = _check(ranked_keys, gold_keys, k)
    ideal = _dcg([True] * min(len(gold), k), discount)
    return _dcg((key in gold for key in top), discount) / ideal


def ndcg_at_k(ranked_keys: Sequence[str], gold_keys: Collection[str], k: int) -> float:
    """Binary-relevance nDCG@k: Σ 1/log2(rank + 1) over gold keys in the top k, over the ideal
    (all min(|gold|, k) first places filled)."""
    return _ndcg(ranked_keys, gold_keys, k, "textbook")


def ndcg_any_at_k(ranked_keys: Sequence[str], gold_keys: Collection[str], k: int) -> float:
    """LongMemEval's ndcg_any@k: as `ndcg_at_k` but with its DCG, rel_1 + Σ_{rank≥2} rel / log2(rank).

    LongMemEval takes the ideal from the gold items present in its corpus; its gold ids come from
    the corpus, so that is min(|gold|, k) as here."""
    return _ndcg(ranked_keys, gold_keys, k, "longmemeval")


METRICS = {
    "recall": recall_at_k,
    "recall_any": recall_any_at_k,
    "recall_all": recall_all_at_k,
    "ndcg": ndcg_at_k,
    "ndcg_any": ndcg_any_at_k,
}
# The metrics each benchmark's own protocol reports (keys of METRICS).
METRICS_OF_FORMAT = {"locomo": ("recall", "ndcg"), "longmemeval": ("recall_any", "recall_all", "ndcg_any")}


def score_ranking(ranked_keys: Sequence[str], gold_keys: Collection[str], ks: Iterable[int] = KS) -> dict[str, float]:
    """Every metric at every k, named like "recall@10"."""
    return {f"{name}@{k}": metric(ranked_keys, gold_keys, k) for k in ks for name, metric in METRICS.items()}


def first_occurrences(keys: Iterable[str]) -> list[str]:
    """Keys in order with repeats dropped: a turn ranking mapped to sessions becomes a session ranking.

    For recall_any/recall_all this equals LongMemEval's `evaluate_retrieval_turn2session` (it widens k
    until k distinct sessions are in); its session ndcg_any instead scores the undeduplicated list."""
    return list(dict.fromkeys(keys))


def longmemeval_scores(ranked_keys: Sequence[str], gold_keys: Collection[str], k: int) -> dict[str, float]:
    """LongMemEval's `evaluate_retrieval` at k: recall_any, recall_all, ndcg_any. With no gold item
    (an answer session whose evidence is all the assistant's) it scores as the official code does:
    recall_any 0, recall_all 1 (all of nothing), ndcg_any 0."""
    if not gold_keys:
        return {f"recall_any@{k}": 0.0, f"recall_all@{k}": 1.0, f"ndcg_any@{k}": 0.0}
    return {
        f"{name}@{k}": METRICS[name](ranked_keys, gold_keys, k) for name in ("recall_any", "recall_all", "ndcg_any")
    }


def session_of_turn(key: str) -> str:
    """The session of a LongMemEval turn key `<session id>:<position>` (run_retrieval's strip_turn_id)."""
    return key.rpartition(":")[0]


def turn_to_session_scores(ranked_turns: Sequence[str], gold_turns: Collection[str], k: int) -> dict[str, float]:
    """LongMemEval's `evaluate_retrieval_turn2session` at k, named `session_<metric>@k`: the turn
    ranking is cut at the first depth that holds k distinct sessions (or at its end), and the
    sessions there are scored against the gold turns' sessions; ndcg_any scores that turn cut with
    the gold turns as the relevant items, as the official code's turn-level relevances do."""
    sessions = [session_of_turn(key) for key in ranked_turns]
    depth = k
    while depth <= len(sessions) and len(set(sessions[:depth])) < k:
        depth += 1
    gold_sessions = {session_of_turn(key) for key in gold_turns}
    found = set(sessions[:depth])
    if not gold_turns:
        scores = (0.0, 1.0, 0.0)
    else:
        scores = (
            float(bool(gold_sessions & found)),
            float(gold_sessions <= found),
            ndcg_any_at_k(ranked_turns, gold_turns, depth),
        )
    return {
        f"session_{name}@{k}": value
        for name, value in zip(("recall_any", "recall_all", "ndcg_any"), scores, strict=True)
    }


# -- aggregation ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionResult:
    question_id: str
    category: str | int
    metrics: Mapping[str, float]  # e.g. the output of `score_ranking`
    strata: Mapping[str, str] = field(default_factory=dict)  # stratum → the question's value (eval.strata)


@dataclass(frozen=True)
class GroupMeans:
    count: int  # questions in the group
    means: dict[str, float]  # metric name → arithmetic mean over the group's questions


@dataclass(frozen=True)
class Aggregate:
    overall: GroupMeans
    by_category: dict[str | int, GroupMeans]  # categories in sorted order (numbers before names)
    # stratum → category → the stratum's value → means, over the questions that have the stratum
    by_stratum: dict[str, dict[str | int, dict[str, GroupMeans]]] = field(default_factory=dict)


def _means(results: Sequence[QuestionResult], names: Sequence[str]) -> GroupMeans:
    return GroupMeans(
        len(results), {name: math.fsum(r.metrics[name] for r in results) / len(results) for name in names}
    )


def aggregate(results: Sequence[QuestionResult]) -> Aggregate:
    """Overall and per-category means, and per category the means of each value of each stratum
    the results carry. Pass only scored questions (see `Question.is_scored`); every result must
    carry the same metric names, so that each mean covers the same questions."""
    if not results:
        raise ValueError("no results to aggregate")
    names = list(results[0].metrics)
    for result in results:
        if set(result.metrics) != set(names):
            raise ValueError(
                f"question {result.question_id!r} has metrics {sorted(result.metrics)}, not {sorted(names)}"
            )
    groups: dict[str | int, list[QuestionResult]] = {}
    for result in results:
        groups.setdefault(result.category, []).append(result)
    order = sorted(groups, key=lambda category: (isinstance(category, str), category))
    by_stratum: dict[str, dict[str | int, dict[str, GroupMeans]]] = {}
    for stratum in dict.fromkeys(name for result in results for name in result.strata):
        by_category = by_stratum.setdefault(stratum, {})
        for category in order:
            values: dict[str, list[QuestionResult]] = {}
            for result in groups[category]:
                if stratum in result.strata:
                    values.setdefault(result.strata[stratum], []).append(result)
            if values:
                by_category[category] = {value: _means(values[value], names) for value in sorted(values)}
    return Aggregate(
        _means(results, names), {category: _means(groups[category], names) for category in order}, by_stratum
    )


# -- latency --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LatencySummary:
    count: int
    p50: float
    p95: float
    mean: float
    max: float


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile: the smallest value with at least p% of the values at or below it.

    Always an observed value (no interpolation): with 20 values p95 is the 19th smallest."""
    if not values:
        raise ValueError("no values")
    if not 0 < p <= 100:
        raise ValueError(f"p must be in (0, 100], not {p}")
    ordered = sorted(values)
    # p * n before the division keeps whole-number ranks exact: (7 / 100) * 100 is 7.000000000000001
    return ordered[max(1, math.ceil(p * len(ordered) / 100)) - 1]


def latency_summary(seconds: Sequence[float]) -> LatencySummary:
    """p50, p95 (nearest rank), mean and max of per-query latencies, in the unit given."""
    if not seconds:
        raise ValueError("no latencies")
    return LatencySummary(
        len(seconds), percentile(seconds, 50), percentile(seconds, 95), math.fsum(seconds) / len(seconds), max(seconds)
    )
