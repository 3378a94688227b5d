"""`run_eval` end to end on tiny benchmark files with the real model, and `render_report`."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from memsearch.api import Memsearch
from memsearch.embedding import Encoder
from memsearch.errors import InvalidInputError
from memsearch.eval import runner
from memsearch.eval.baseline import bm25_rank
from memsearch.eval.datasets import load_locomo
from memsearch.eval.metrics import KS
from memsearch.eval.report import render_report
from memsearch.eval.runner import BASELINE_NAME, EvalReport, run_eval
from memsearch.eval.scoring import score
from memsearch.ingest.readers import turn_text

DATA = Path(__file__).parent / "data"
LOCOMO_TINY = DATA / "locomo_tiny.json"
LONGMEMEVAL_TINY = DATA / "longmemeval_tiny.json"


def turn(speaker: str, dia_id: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text}


# Every answer below is known by hand in lexical mode, where only turns sharing a query word are
# recalled: "where", "is", "the", "when", "did", "who" are stop words and nothing says "fly" or "play".
HAND = [
    {
        "sample_id": "conv-z",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "10:00 am on 1 January, 2023",
            "session_1": [
                turn("Ana", "D1:1", "I bought a new bicycle yesterday."),
                turn("Ben", "D1:2", "We watched a zeppelin drift over the harbour."),
                turn("Ana", "D1:3", "The bakery opened early today."),
                turn("Ben", "D1:4", "It was a calm and sunny morning."),
                turn("Ana", "D1:5", "My cello teacher is strict."),
            ],
            "session_2_date_time": "10:00 am on 1 June, 2023",
            "session_2": [
                turn("Ana", "D2:1", "My sister moved to Lisbon."),
                turn("Ben", "D2:2", "I started the cello, and the cello is hard."),
                turn("Ana", "D2:3", "The bakery closed for the summer."),
            ],
        },
        "qa": [
            # the only turn with "zeppelin": rank 1
            {"question": "Where is the zeppelin?", "answer": "over the harbour", "evidence": ["D1:2"], "category": 4},
            # two gold turns, only one shares a word: recall 1/2 at every k
            {
                "question": "When did the zeppelin fly?",
                "answer": "on a calm morning",
                "evidence": ["D1:2", "D1:4"],
                "category": 2,
            },
            # "cello" is in D1:5 (gold) and D2:2, which says it twice and is 151 days newer: gold at rank 2
            {"question": "Who plays the cello?", "answer": "Ana", "evidence": ["D1:5"], "category": 1},
            # no evidence id names a turn: not scored
            {"question": "Where is Lisbon?", "answer": "Portugal", "evidence": ["D9:9"], "category": 3},
        ],
    }
]


# A fixed profile for the hand-computed figures, so that they do not move when `default` is tuned:
# BM25 and vector legs, RRF k=60, × (0.7 + 0.3·exp(-age/90 d)).
HAND_PROFILE = """
legs = ["lexical", "vector"]
[fusion]
method = "rrf"
rrf_k = 60
[[adjust]]
kind = "decay"
shape = "floor"
floor = 0.7
tau_days = 90
"""


def write_profile(home: Path) -> None:
    (home / "profiles").mkdir(parents=True, exist_ok=True)
    (home / "profiles" / "hand.toml").write_text(HAND_PROFILE, encoding="utf-8")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Module-scoped runs happen before the per-test MEMSEARCH_HOME: give them their own."""
    folder = tmp_path_factory.mktemp("home")
    write_profile(folder)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMSEARCH_HOME", str(folder))
        yield


@pytest.fixture(scope="module")
def hand_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hand") / "hand_locomo.json"
    path.write_text(json.dumps(HAND), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hand_report(home: None, hand_file: Path, encoder: Encoder) -> EvalReport:
    return run_eval(hand_file, fmt="locomo", profiles=["default", "hand"], modes=["lexical"], encoder=encoder)


@pytest.fixture(scope="module")
def tiny_report(home: None, encoder: Encoder) -> EvalReport:
    return run_eval(
        LOCOMO_TINY, fmt="locomo", profiles=["default", "siftcoder"], modes=["auto", "lexical"], encoder=encoder
    )


def outcome(report: EvalReport, row: tuple[str, str | None, str], question_id: str) -> runner.QuestionOutcome:
    return next(o for o in report.row(*row).results if o.question_id == question_id)


def test_report_structure(tiny_report: EvalReport) -> None:
    report = tiny_report
    assert (report.dataset, report.format, report.protocol) == ("locomo_tiny.json", "locomo", "locomo-evidence-recall")
    assert report.conversations == 2 and report.questions == 6
    assert report.parameters["profiles"] == ["default", "siftcoder"]
    assert report.parameters["modes"] == ["auto", "lexical"]
    assert report.parameters["granularities"] == ["turn", "session"]
    assert report.parameters["k"] == 50 and report.parameters["limit"] is None
    profiles = [(p, m) for p in ("default", "siftcoder") for m in ("auto", "lexical")]
    expected = [
        *((p, m, "turn") for p, m in profiles),
        (BASELINE_NAME, None, "turn"),
        *((p, m, "session") for p, m in profiles),
    ]
    assert [(row.name, row.mode, row.granularity) for row in report.rows] == expected
    for row in report.rows:
        # conv-a's third question names no turn ("D12:1"): 5 of the 6 are scored
        assert (row.questions, row.skipped) == (5, 1)
        assert row.aggregate is not None and row.aggregate.overall.count == 5
        assert set(row.aggregate.overall.means) == {f"{name}@{k}" for k in KS for name in ("recall", "ndcg")}
        assert {category: group.count for category, group in row.aggregate.by_category.items()} == {
            1: 1,
            2: 1,
            4: 2,
            5: 1,
        }
        assert all(0 <= value <= 1 for value in row.aggregate.overall.means.values())
        assert row.latency_ms is not None and row.latency_ms.count == 5
        assert 0 < row.latency_ms.p50 <= row.latency_ms.p95
    assert sum(report.row("default", "auto", "turn").strategies.values()) == 5
    assert report.row("default", "lexical", "turn").strategies == {"lexical": 5}

    document = json.loads(json.dumps(report.to_dict()))
    assert document["format"] == "locomo" and document["metrics"] == {
        "recall": "recall",
        "ndcg": "ndcg",
        "ks": [5, 10, 25, 50],
    }
    assert document["profiles"]["siftcoder"]["k"] == 5  # the settings each profile ran with
    first = document["rows"][0]
    assert report.rows[0].aggregate is not None
    assert first["overall"] == report.rows[0].aggregate.overall.means  # unrounded
    assert first["by_category"]["1"]["label"] == "multi-hop"
    assert "results" not in first
    assert "results" in report.to_dict(questions=True)["rows"][0]


def test_unique_word_is_found_first_in_lexical_mode(hand_report: EvalReport) -> None:
    found = outcome(hand_report, ("default", "lexical", "turn"), "conv-z:q0")
    assert found.ranked[0] == "D1:2"
    assert found.metrics["recall@5"] == 1.0 and found.metrics["ndcg@10"] == 1.0
    plain = outcome(hand_report, ("hand", "lexical", "turn"), "conv-z:q0")
    assert plain.ranked == ("D1:2",)  # a plain lexical leg recalls only turns sharing a word


def test_hand_computed_metrics(hand_report: EvalReport) -> None:
    row = hand_report.row("hand", "lexical", "turn")
    assert (row.questions, row.skipped) == (3, 1)
    half = outcome(hand_report, ("hand", "lexical", "turn"), "conv-z:q1")
    assert half.ranked == ("D1:2",) and half.gold == ("D1:2", "D1:4")
    ideal = 1 + 1 / math.log2(3)  # two gold turns at ranks 1 and 2
    for k in KS:
        assert half.metrics[f"recall@{k}"] == 0.5
        assert half.metrics[f"ndcg@{k}"] == pytest.approx(1 / ideal)
    second = outcome(hand_report, ("hand", "lexical", "turn"), "conv-z:q2")
    assert second.ranked == ("D2:2", "D1:5")
    assert second.metrics["recall@5"] == 1.0
    assert second.metrics["ndcg@10"] == pytest.approx(1 / math.log2(3))

    assert row.aggregate is not None
    overall = row.aggregate.overall.means
    assert overall["recall@5"] == pytest.approx((1 + 0.5 + 1) / 3)
    assert overall["ndcg@10"] == pytest.approx((1 + 1 / ideal + 1 / math.log2(3)) / 3)
    assert row.mean("recall@5", 2) == 0.5 and row.mean("ndcg@10", 1) == pytest.approx(1 / math.log2(3))
    assert row.mean("recall@5", 3) is None  # the unscored question's category has no group


def test_score_names_the_metrics_of_each_format() -> None:
    assert score(["a", "b"], ["b"], "locomo", ks=(1, 2)) == {
        "recall@1": 0.0,
        "ndcg@1": 0.0,
        "recall@2": 1.0,
        "ndcg@2": pytest.approx(1 / math.log2(3)),
    }
    lme = score(["a", "b", "c"], ["a", "c"], "longmemeval", ks=(2,))
    assert lme == {"recall_any@2": 1.0, "recall_all@2": 0.0, "ndcg_any@2": 0.5}  # 1 / (1 + 1/log2(2))


def test_session_granularity_ranks_sessions(hand_report: EvalReport, tiny_report: EvalReport) -> None:
    row = hand_report.row("hand", "lexical", "session")
    assert row.questions == 3
    zeppelin = outcome(hand_report, ("hand", "lexical", "session"), "conv-z:q0")
    assert zeppelin.ranked == ("session_1",) and zeppelin.gold == ("session_1",)
    assert zeppelin.metrics["recall@5"] == 1.0
    cello = outcome(hand_report, ("hand", "lexical", "session"), "conv-z:q2")
    assert sorted(cello.ranked) == ["session_1", "session_2"]  # both say "cello"
    # "D8:6; D9:17": the gold sessions of the evidence turns
    winter = outcome(tiny_report, ("default", "auto", "session"), "conv-a:q0")
    assert winter.gold == ("session_8", "session_9")
    sessions = {f"session_{n}" for n in (1, 8, 9, 10)}
    for current in tiny_report.rows_for("session"):
        for result in current.results:
            assert result.ranked and set(result.ranked) <= sessions
            assert len(set(result.ranked)) == len(result.ranked)


def test_baseline_row(hand_report: EvalReport, tiny_report: EvalReport) -> None:
    assert [row.name for row in tiny_report.rows if row.kind == "baseline"] == [BASELINE_NAME]
    baseline = tiny_report.row(BASELINE_NAME, None, "turn")
    assert baseline.questions == 5 and baseline.latency_ms is not None
    # the same figures as the README's plain BM25, computed directly
    for conversation, questions in load_locomo(LOCOMO_TINY):
        keys = [t.key for t in conversation.turns]
        texts = [turn_text(t) for t in conversation.turns]
        for question in questions:
            if question.is_scored:
                ranked = bm25_rank(keys, texts, question.text, 50)
                assert outcome(tiny_report, (BASELINE_NAME, None, "turn"), question.id).metrics == score(
                    ranked, question.evidence_keys, "locomo"
                )
    assert outcome(hand_report, (BASELINE_NAME, None, "turn"), "conv-z:q0").ranked[0] == "D1:2"


def test_longmemeval_protocol_as_run_retrieval_defines_it(
    home: None, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    as_of: dict[str, Any] = {}

    class Recording(Memsearch):
        def search(self, request: Any, **kwargs: Any) -> Any:
            as_of[request.scope.conversation] = request.as_of
            return super().search(request, **kwargs)

    monkeypatch.setattr(runner, "Memsearch", Recording)
    report = run_eval(LONGMEMEVAL_TINY, fmt="longmemeval", profiles=["default"], modes=["auto"], encoder=encoder)
    assert report.protocol == "longmemeval-retrieval" and report.questions == 3
    assert (report.recall_metric, report.ndcg_metric) == ("recall_all", "ndcg_any")
    assert report.ks == (1, 3, 5, 10, 30, 50)  # run_retrieval.py's cut-offs
    # "now" is the question's own date, not the haystack's last session
    assert as_of["q_user_1"] == datetime(2023, 5, 30, 23, 40, tzinfo=UTC)
    rows = {(row.name, row.granularity): row for row in report.rows}
    assert set(rows) == {(name, g) for name in ("default", BASELINE_NAME) for g in ("turn", "session")}
    names = {f"{name}@{k}" for k in report.ks for name in ("recall_any", "recall_all", "ndcg_any")}
    for (_, granularity), row in rows.items():
        # every question but the abstention is scored, q_asst_2 too, whose evidence is the assistant's
        assert [result.question_id for result in row.results] == ["q_user_1", "q_asst_2"]
        assert row.skipped == 1
        extra = {f"session_{name}" for name in names} if granularity == "turn" else set()
        assert row.aggregate is not None
        assert set(row.aggregate.overall.means) == names | extra
    user_turn = outcome(report, ("default", "auto", "turn"), "q_user_1")
    assert user_turn.gold == ("answer_a1:1",) and user_turn.ranked[0] == "answer_a1:1"
    assert user_turn.metrics["session_recall_all@1"] == 1.0
    # only user turns (odd positions here) are ranked
    assert set(user_turn.ranked) == {"sharegpt_noise_1:1", "answer_a1:1", "answer_a1:3", "ultrachat_noise_2:1"}
    # answer_b1 has no user evidence turn: no gold session, scored as eval_utils scores an empty gold set
    for granularity in ("turn", "session"):
        empty = outcome(report, ("default", "auto", granularity), "q_asst_2")
        assert empty.gold == ()
        assert (empty.metrics["recall_any@5"], empty.metrics["recall_all@5"], empty.metrics["ndcg_any@5"]) == (0, 1, 0)
    assert outcome(report, ("default", "auto", "session"), "q_user_1").gold == ("answer_a1",)


def test_temporary_stores_are_removed(monkeypatch: pytest.MonkeyPatch, hand_file: Path, encoder: Encoder) -> None:
    opened: list[Path] = []

    class Recording(Memsearch):
        def __init__(self, db: Any, **kwargs: Any) -> None:
            super().__init__(db, **kwargs)
            assert isinstance(self.path, Path)
            opened.append(self.path)
            assert self.path.parent.is_dir()

    monkeypatch.setattr(runner, "Memsearch", Recording)
    calls: list[tuple[str, int, int]] = []
    data = [HAND[0], {**HAND[0], "sample_id": "conv-y"}]
    (path := hand_file.with_name("two.json")).write_text(json.dumps(data), encoding="utf-8")
    report = run_eval(
        path,
        fmt="locomo",
        profiles=["default"],
        modes=["lexical"],
        granularities=["turn"],
        baselines=False,
        encoder=encoder,
        progress=lambda *call: calls.append(call),
    )
    assert report.conversations == 2 and [row.name for row in report.rows] == ["default"]
    assert calls == [("conv-z", 0, 2), ("conv-y", 1, 2), ("done", 2, 2)]
    assert len(opened) == 2 and opened[0] != opened[1]  # a store of its own per conversation
    assert not any(path.parent.exists() for path in opened)

    limited = run_eval(path, fmt="locomo", profiles=["default"], modes=["lexical"], limit=1, encoder=encoder)
    assert limited.conversations == 1 and limited.questions == 4 and limited.parameters["limit"] == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"fmt": "msc"}, "unknown format"),
        ({"modes": ["fuzzy"]}, "unknown mode"),
        ({"granularities": ["paragraph"]}, "unknown granularity"),
        ({"profiles": ["nope"]}, "unknown profile"),
        ({"profiles": ["pgvector"], "modes": ["lexical"]}, "no lexical leg"),
        ({"limit": 0}, "at least 1"),
    ],
)
def test_bad_arguments_fail_before_any_work(changes: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"fmt": "locomo", "profiles": ["default"], "modes": ["auto"]} | changes
    with pytest.raises(InvalidInputError, match=message):
        run_eval(DATA / "missing.json", **arguments)


def test_render_table_and_json(tiny_report: EvalReport, capsys: pytest.CaptureFixture[str]) -> None:
    terminal = Console(file=io.StringIO(), force_terminal=True, width=160, color_system=None)
    render_report(tiny_report, "table", console=terminal)
    shown = terminal.file.getvalue()  # type: ignore[attr-defined]
    for text in ("R@5", "R@50", "NDCG@10", "p95 ms", "siftcoder", "rank-bm25", "multi-hop", "session level"):
        assert text in shown
    render_report(tiny_report, "table")  # not a terminal: plain lines, the titles on stderr
    plain = capsys.readouterr()
    for text in ("R@5", "R@50", "NDCG@10", "p95 ms", "siftcoder", "rank-bm25", "multi-hop", "session\t"):
        assert text in plain.out
    assert "locomo-evidence-recall" in plain.err
    render_report(tiny_report, "json")
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(tiny_report.to_dict()))
    with pytest.raises(InvalidInputError, match="report format"):
        render_report(tiny_report, "csv")
