"""`memsearch eval` as a library function: run profiles (and plain baselines) over a benchmark.

Protocol (shared/benchdata/README.md for LoCoMo; xiaowu0162/LongMemEval's run_retrieval.py):

- every conversation (LoCoMo) or question haystack (LongMemEval) is ingested into a temporary
  store of its own, once, as `conversation_memories` (session chunks and turns with their views;
  LongMemEval: user turns only, their text as spoken), with facet views when a profile uses them;
- every question is searched within its own conversation, k=50, without recording access, for
  each (profile, mode, granularity), "now" being the conversation's last session date (LoCoMo) or
  the question's own date (LongMemEval's question_date);
- turn granularity ranks turn keys; session granularity ranks session ids (session chunks, or the
  sessions of turn results when there are none), first occurrences kept;
- LoCoMo scores Recall@k (the share of the gold found) and nDCG@k, k ∈ 5, 10, 25, 50, over the
  questions with evidence (`Question.is_scored`);
- LongMemEval as run_retrieval.py and eval_utils.py do: recall_any@k, recall_all@k and ndcg_any@k,
  k ∈ 1, 3, 5, 10, 30, 50, over every question but the abstentions (`'_abs' in question_id`). Gold
  is the user turns with has_answer in the answer sessions (turn level) and the answer sessions
  that have such a turn (session level); a question with none is scored as the official code
  scores it (recall_any 0, recall_all 1, ndcg_any 0). A turn ranking is also scored at session
  level by the official turn→session evaluation (`session_<metric>@k`), over the turns ranked (50).
  The file is read as a stream, one question at a time.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsearch.api import Memsearch
from memsearch.choices import BENCHMARK_FORMATS, GRANULARITIES, MODES
from memsearch.embedding import Encoder, other_model
from memsearch.errors import InvalidInputError
from memsearch.eval.baseline import BM25Baseline, longmemeval_bm25
from memsearch.eval.datasets import Question, iter_longmemeval_questions, load_locomo
from memsearch.eval.metrics import (
    KS,
    KS_OF_FORMAT,
    Aggregate,
    LatencySummary,
    QuestionResult,
    aggregate,
    latency_summary,
)
from memsearch.eval.scoring import gold_keys, last_date, score, session_ranking, strata_of, turn_ranking
from memsearch.ingest.conversations import conversation_memories, with_facets
from memsearch.ingest.readers import Conversation, turn_text
from memsearch.models import NewMemory
from memsearch.profiles import Profile, leg_models, load_profile
from memsearch.retrieval.legs import choose_route
from memsearch.retrieval.request import SearchRequest
from memsearch.retrieval.routing import Route
from memsearch.store import EVERYTHING, Scope

SCHEMA_VERSION = 1
FORMATS = BENCHMARK_FORMATS
SEARCH_K = 50  # the deepest cut-off scored (KS)
BASELINE_NAME = "bm25 (rank-bm25)"

PROTOCOLS = {
    "locomo": "locomo-evidence-recall",
    "longmemeval": "longmemeval-retrieval",
}
PROTOCOL_DESCRIPTIONS = {
    "locomo": (
        "LoCoMo turn-level evidence recall (benchdata README; LoCoMo paper Table 3): each turn one memory, "
        "each question searched within its own conversation, Recall@k = share of the evidence turns in the "
        "top k, over questions with valid evidence (all five categories); session level: the evidence "
        "turns' sessions"
    ),
    "longmemeval": (
        "LongMemEval retrieval (run_retrieval.py / eval_utils.py): user turns only, each question searched "
        "within its own haystack as of its question_date, recall_any/recall_all/ndcg_any@k for k in 1, 3, 5, "
        "10, 30, 50 over every question but the abstentions ('_abs' in the id); turn level gold = the user "
        "turns with has_answer in the answer sessions; session level gold = the answer sessions with such a "
        "turn (none: recall_any 0, recall_all 1, ndcg_any 0, as the official code scores it); turn rankings "
        "also scored at session level by the official turn-to-session evaluation (session_*@k)"
    ),
}
# The metric the tables show as "R@k" and "NDCG@k", per format.
RECALL_METRIC = {"locomo": "recall", "longmemeval": "recall_all"}
NDCG_METRIC = {"locomo": "ndcg", "longmemeval": "ndcg_any"}
LOCOMO_CATEGORIES: dict[str | int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}

Progress = Callable[[str, int, int], None]


# -- results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionOutcome:
    """One scored question in one row: its ranking (top k), its gold keys and its metrics."""

    question_id: str
    category: str | int
    ranked: tuple[str, ...]  # turn keys ("D3:7") or session ids ("session_3"), best first
    gold: tuple[str, ...]
    metrics: Mapping[str, float]
    latency_ms: float | None = None
    strata: Mapping[str, str] = field(default_factory=dict)  # see memsearch.eval.strata

    def to_dict(self) -> dict[str, Any]:
        return {
            "question_id": self.question_id,
            "category": self.category,
            "strata": dict(self.strata),
            "ranked": list(self.ranked),
            "gold": list(self.gold),
            "first_gold_rank": next((n for n, key in enumerate(self.ranked, 1) if key in self.gold), None),
            "metrics": dict(self.metrics),
            "latency_ms": self.latency_ms,
        }


@dataclass(frozen=True)
class EvalRow:
    """One (profile or baseline, mode, granularity): its aggregate over the scored questions."""

    name: str  # profile name, or BASELINE_NAME
    kind: str  # "profile" | "baseline"
    mode: str | None  # None for a baseline
    granularity: str
    aggregate: Aggregate | None  # None when no question could be scored
    latency_ms: LatencySummary | None  # per search, in milliseconds
    questions: int  # scored questions
    skipped: int  # questions of the run not scored at this granularity (no gold, abstention)
    strategies: Mapping[str, int] = field(default_factory=dict)  # auto mode: searches per strategy
    results: tuple[QuestionOutcome, ...] = ()

    @property
    def label(self) -> str:
        return self.name if self.mode is None else f"{self.name} / {self.mode}"

    def mean(self, metric: str, category: str | int | None = None) -> float | None:
        """A metric's mean over the scored questions (of one category), None if there are none."""
        if self.aggregate is None:
            return None
        group = self.aggregate.overall if category is None else self.aggregate.by_category.get(category)
        return None if group is None else group.means.get(metric)

    def to_dict(self, *, questions: bool = False, labels: Mapping[str | int, str] | None = None) -> dict[str, Any]:
        labels = labels or {}
        document: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "mode": self.mode,
            "granularity": self.granularity,
            "questions": self.questions,
            "skipped": self.skipped,
            "overall": dict(self.aggregate.overall.means) if self.aggregate else {},
            "by_category": {
                str(category): {"label": labels.get(category, str(category)), "count": group.count, **group.means}
                for category, group in (self.aggregate.by_category.items() if self.aggregate else ())
            },
            "by_stratum": {
                stratum: {
                    str(category): {value: {"count": group.count, **group.means} for value, group in values.items()}
                    for category, values in by_category.items()
                }
                for stratum, by_category in (self.aggregate.by_stratum.items() if self.aggregate else ())
            },
            "latency_ms": (
                {
                    "count": self.latency_ms.count,
                    "p50": self.latency_ms.p50,
                    "p95": self.latency_ms.p95,
                    "mean": self.latency_ms.mean,
                    "max": self.latency_ms.max,
                }
                if self.latency_ms
                else None
            ),
            "strategies": dict(self.strategies),
        }
        if questions:
            document["results"] = [outcome.to_dict() for outcome in self.results]
        return document


@dataclass(frozen=True)
class EvalReport:
    dataset: str  # the file's name
    path: str
    format: str  # locomo | longmemeval
    protocol: str
    parameters: Mapping[str, Any]  # what the command line said, resolved
    conversations: int
    questions: int  # questions in the conversations run (scored or not)
    rows: tuple[EvalRow, ...]
    timing: Mapping[str, float]  # seconds: ingest, search, baseline, total
    ks: tuple[int, ...] = KS
    profiles: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # each profile's settings as run

    @property
    def recall_metric(self) -> str:
        return RECALL_METRIC[self.format]

    @property
    def ndcg_metric(self) -> str:
        return NDCG_METRIC[self.format]

    @property
    def category_labels(self) -> dict[str | int, str]:
        return dict(LOCOMO_CATEGORIES) if self.format == "locomo" else {}

    @property
    def granularities(self) -> list[str]:
        return list(dict.fromkeys(row.granularity for row in self.rows))

    def rows_for(self, granularity: str) -> list[EvalRow]:
        return [row for row in self.rows if row.granularity == granularity]

    def row(self, name: str, mode: str | None, granularity: str) -> EvalRow:
        for candidate in self.rows:
            if (candidate.name, candidate.mode, candidate.granularity) == (name, mode, granularity):
                return candidate
        raise KeyError((name, mode, granularity))

    def to_dict(self, *, questions: bool = False) -> dict[str, Any]:
        """The JSON document (values unrounded); `questions` adds every row's per-question results."""
        return {
            "schema_version": SCHEMA_VERSION,
            "dataset": self.dataset,
            "path": self.path,
            "format": self.format,
            "protocol": self.protocol,
            "protocol_description": PROTOCOL_DESCRIPTIONS[self.format],
            "parameters": dict(self.parameters),
            "metrics": {"recall": self.recall_metric, "ndcg": self.ndcg_metric, "ks": list(self.ks)},
            "conversations": self.conversations,
            "questions": self.questions,
            "timing_seconds": dict(self.timing),
            "profiles": {name: dict(settings) for name, settings in self.profiles.items()},
            "rows": [row.to_dict(questions=questions, labels=self.category_labels) for row in self.rows],
        }


# -- the run ------------------------------------------------------------------------------------


@dataclass
class _Row:
    name: str
    kind: str
    mode: str | None
    granularity: str
    outcomes: list[QuestionOutcome] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    strategies: Counter[str] = field(default_factory=Counter)
    skipped: int = 0

    def add(
        self,
        question: Question,
        ranked: Sequence[str],
        gold: Sequence[str],
        fmt: str,
        ms: float | None,
        strata: Mapping[str, str],
    ) -> None:
        if ms is not None:
            self.latencies.append(ms)
        metrics = score(ranked, gold, fmt, turns=self.granularity == "turn")
        self.outcomes.append(
            QuestionOutcome(question.id, question.category, tuple(ranked[:SEARCH_K]), tuple(gold), metrics, ms, strata)
        )

    def finish(self) -> EvalRow:
        results = [QuestionResult(o.question_id, o.category, o.metrics, o.strata) for o in self.outcomes]
        return EvalRow(
            name=self.name,
            kind=self.kind,
            mode=self.mode,
            granularity=self.granularity,
            aggregate=aggregate(results) if results else None,
            latency_ms=latency_summary(self.latencies) if self.latencies else None,
            questions=len(self.outcomes),
            skipped=self.skipped,
            strategies=dict(sorted(self.strategies.items())),
            results=tuple(self.outcomes),
        )


def _load(dataset: Path, fmt: str) -> Iterable[tuple[Conversation, list[Question]]]:
    """LoCoMo at once (ten conversations); LongMemEval as a stream, one question at a time."""
    return load_locomo(dataset) if fmt == "locomo" else iter_longmemeval_questions(dataset)


def _memories_of(conversation: Conversation, fmt: str) -> list[NewMemory]:
    if fmt == "longmemeval":  # its corpus: user turns, their content as is
        return conversation_memories(
            conversation, sessions=True, keep=lambda t: t.speaker == "user", text_of=lambda t: t.text
        )
    return conversation_memories(conversation, sessions=True)


def _baselines(conversation: Conversation, fmt: str, granularities: Sequence[str]) -> dict[str, BM25Baseline]:
    """The plain BM25 index of each granularity the format's baseline runs at."""
    if fmt == "locomo":  # the README's row: turn level only
        if "turn" not in granularities:
            return {}
        turns = conversation.turns
        return {"turn": BM25Baseline([t.key for t in turns], [turn_text(t) for t in turns])}
    indexes = {}
    user = [t for t in conversation.turns if t.speaker == "user"]
    if "turn" in granularities:
        indexes["turn"] = longmemeval_bm25([t.key for t in user], [t.text for t in user])
    if "session" in granularities:
        sessions = conversation.sessions
        texts = [" ".join(t.text for t in s.turns if t.speaker == "user") for s in sessions]
        indexes["session"] = longmemeval_bm25([s.id for s in sessions], texts)
    return indexes


def _check(fmt: str, profiles: Sequence[str], modes: Sequence[str], granularities: Sequence[str]) -> list[Profile]:
    if fmt not in FORMATS:
        raise InvalidInputError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
    for name, values, allowed in (("mode", modes, MODES), ("granularity", granularities, GRANULARITIES)):
        if not values:
            raise InvalidInputError(f"give at least one {name}")
        for value in values:
            if value not in allowed:
                raise InvalidInputError(f"unknown {name} {value!r} (choose from {', '.join(allowed)})")
    if not profiles:
        raise InvalidInputError("give at least one profile")
    loaded = [load_profile(name) for name in dict.fromkeys(profiles)]
    for profile in loaded:
        for mode in modes:
            if mode != "auto":  # fail now rather than after the ingest (auto routes per query)
                choose_route(Route(mode, f"--mode {mode}"), profile)
    return loaded


def run_eval(
    dataset: Path,
    *,
    fmt: str,
    profiles: Sequence[str],
    modes: Sequence[str],
    granularities: Sequence[str] = ("turn", "session"),
    baselines: bool = True,
    limit: int | None = None,
    encoder: Encoder | None = None,
    model: str | None = None,
    progress: Progress | None = None,
    db: str | None = None,
) -> EvalReport:
    """Run every (profile, mode, granularity) over a LoCoMo or LongMemEval file; see the module doc.

    `limit` keeps the first N conversations (LoCoMo) or questions (LongMemEval). `progress` is
    called with (conversation id, conversations done, total) as each conversation starts and with
    ("done", total, total) at the end. Each conversation's store lives in a temporary directory
    that is removed when the conversation is done; with `db` (a postgresql:// URL of an empty or
    new store) it lives there instead and is emptied when the conversation is done.
    """
    started = time.perf_counter()
    dataset = Path(dataset)
    modes, granularities = list(dict.fromkeys(modes)), list(dict.fromkeys(granularities))
    chosen = _check(fmt, profiles, modes, granularities)
    if limit is not None and limit < 1:
        raise InvalidInputError(f"must be at least 1, not {limit}", field="limit")
    data = _load(dataset, fmt)
    if limit is not None:
        data = itertools.islice(data, limit)
    # A stream's length is known at its end: until then progress counts what is read (total = done + 1).
    known_total = len(data) if isinstance(data, list) else None
    if encoder is None:
        from memsearch.embedding import load_encoder, resolve_model

        encoder = load_encoder(resolve_model(model))  # `model`: as the CLI's --model
    facets = any("facet_" in spec for profile in chosen for spec in profile.legs.values())
    models = list(dict.fromkeys(name for profile in chosen for name in leg_models(profile.legs)))
    for name in models:  # a model that is not there is said before any work
        other_model(name)

    rows: dict[tuple[str, str | None, str], _Row] = {}
    for granularity in granularities:
        for profile in chosen:
            for mode in modes:
                rows[profile.name, mode, granularity] = _Row(profile.name, "profile", mode, granularity)
        if baselines and (fmt == "longmemeval" or granularity == "turn"):
            rows[BASELINE_NAME, None, granularity] = _Row(BASELINE_NAME, "baseline", None, granularity)

    timing = {"ingest": 0.0, "search": 0.0, "baseline": 0.0}
    total = question_count = 0
    for done, (conversation, questions) in enumerate(data):
        total, question_count = done + 1, question_count + len(questions)
        if progress is not None:
            progress(conversation.id, done, known_total if known_total is not None else done + 1)
        golds = {
            (question.id, granularity): gold_keys(question, conversation, fmt, granularity)
            for question in questions
            for granularity in granularities
        }
        for row in rows.values():
            row.skipped += sum(golds[q.id, row.granularity] is None for q in questions)
        scored = [q for q in questions if any(golds[q.id, g] is not None for g in granularities)]
        if not scored:
            continue
        strata = {question.id: strata_of(question, conversation) for question in scored}
        # the store is closed before its folder is removed (contexts exit last in, first out)
        with (
            tempfile.TemporaryDirectory(prefix="memsearch-eval-") as folder,
            Memsearch(db or Path(folder) / "eval.db", encoder=encoder) as ms,
        ):
            if db is not None and ms.store(create=True).count(EVERYTHING):
                raise InvalidInputError("holds memories; eval needs an empty store", field="db")
            tick = time.perf_counter()
            for name in models:  # the other models the profiles' legs name: embedded as memories are added
                ms.add_model(name)
            memories = _memories_of(conversation, fmt)
            if facets and memories:
                memories = with_facets(memories, encoder)
            ms.add_many(memories)
            timing["ingest"] += time.perf_counter() - tick
            tick = time.perf_counter()
            _search_conversation(ms, conversation, scored, golds, strata, rows, chosen, fmt, bool(memories))
            timing["search"] += time.perf_counter() - tick
            if db is not None:
                ms.delete([m.id for m in ms.list()])
        if baselines:
            tick = time.perf_counter()
            _baseline_conversation(conversation, scored, golds, strata, rows, fmt, granularities)
            timing["baseline"] += time.perf_counter() - tick
    if progress is not None:
        progress("done", total, total)
    timing["total"] = time.perf_counter() - started
    parameters = {
        "dataset": str(dataset),
        "format": fmt,
        "profiles": [profile.name for profile in chosen],
        "modes": modes,
        "granularities": granularities,
        "baselines": baselines,
        "limit": limit,
        "k": SEARCH_K,
        "model": encoder.info.name,
        "facets": facets,
    }
    return EvalReport(
        dataset=dataset.name,
        path=str(dataset),
        format=fmt,
        protocol=PROTOCOLS[fmt],
        parameters=parameters,
        conversations=total,
        questions=question_count,
        rows=tuple(row.finish() for row in rows.values()),
        timing=timing,
        ks=KS_OF_FORMAT[fmt],
        profiles={profile.name: profile.to_dict() for profile in chosen},
    )


def _search_conversation(
    ms: Memsearch,
    conversation: Conversation,
    questions: Sequence[Question],
    golds: Mapping[tuple[str, str], tuple[str, ...] | None],
    strata: Mapping[str, Mapping[str, str]],
    rows: Mapping[tuple[str, str | None, str], _Row],
    profiles: Sequence[Profile],
    fmt: str,
    searchable: bool,
) -> None:
    scope = Scope(conversation=conversation.id)
    for (name, mode, granularity), row in rows.items():
        if row.kind != "profile":
            continue
        profile = next(p for p in profiles if p.name == name)
        assert mode is not None  # only baseline rows have none
        for question in questions:
            gold = golds[question.id, granularity]
            if gold is None:
                continue
            if not searchable:  # nothing was stored (no kept turns): nothing can be found
                row.add(question, [], gold, fmt, None, strata[question.id])
                continue
            request = SearchRequest(
                question.text,
                k=SEARCH_K,
                mode=mode,
                scope=scope,
                as_of=question.question_date or last_date(conversation),
                touch=False,
                granularity=granularity,
                profile=profile,
            )
            tick = time.perf_counter()
            outcome = ms.search(request)
            elapsed_ms = (time.perf_counter() - tick) * 1000
            row.strategies[outcome.route.strategy] += 1
            results = outcome.results
            ranked = turn_ranking(results, conversation.id) if granularity == "turn" else session_ranking(results)
            row.add(question, ranked, gold, fmt, elapsed_ms, strata[question.id])


def _baseline_conversation(
    conversation: Conversation,
    questions: Sequence[Question],
    golds: Mapping[tuple[str, str], tuple[str, ...] | None],
    strata: Mapping[str, Mapping[str, str]],
    rows: Mapping[tuple[str, str | None, str], _Row],
    fmt: str,
    granularities: Sequence[str],
) -> None:
    for granularity, index in _baselines(conversation, fmt, granularities).items():
        row = rows[BASELINE_NAME, None, granularity]
        for question in questions:
            gold = golds[question.id, granularity]
            if gold is None:
                continue
            tick = time.perf_counter()
            ranked = index.rank(question.text, SEARCH_K)
            row.add(question, ranked, gold, fmt, (time.perf_counter() - tick) * 1000, strata[question.id])
