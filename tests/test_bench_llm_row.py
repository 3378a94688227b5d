"""bench/llm_row.py and bench/llm_server.py's pure parts: the stratified sample of dev questions,
the chat template, and the per-category summary."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCOMO_DEV = ROOT.parent / "shared" / "benchdata" / "locomo_dev.json"


def load(name: str, file: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


llm_row = load("bench_llm_row", "llm_row.py")
llm_server = load("bench_llm_server", "llm_server.py")
needs_dev = pytest.mark.skipif(not LOCOMO_DEV.exists(), reason=f"{LOCOMO_DEV} is absent (shared benchmark data)")


@needs_dev
def test_the_sample_has_as_many_questions_of_each_category_spread_over_the_conversations() -> None:
    from memsearch.eval.datasets import load_locomo

    sample = llm_row.stratified_sample(LOCOMO_DEV, 30, 23, None)
    questions = {conversation.id: qs for conversation, qs in load_locomo(LOCOMO_DEV)}
    drawn = [questions[c][i] for c, indices in sample.items() for i in indices]
    assert Counter(int(q.category) for q in drawn) == {1: 30, 2: 30, 3: 30, 4: 30, 5: 30}
    assert all(q.evidence_keys for q in drawn), "a question the protocol skips is never drawn"
    for category in range(1, 6):  # each conversation's share of a category is its proportion, ±1
        available = Counter(
            c for c, qs in questions.items() for q in qs if int(q.category) == category and q.evidence_keys
        )
        taken = Counter(
            c for c, indices in sample.items() for i in indices if int(questions[c][i].category) == category
        )
        total = sum(available.values())
        assert all(abs(taken[c] - 30 * available[c] / total) < 1 for c in available)
    assert sample == llm_row.stratified_sample(LOCOMO_DEV, 30, 23, None), "the same seed draws the same questions"
    assert sample != llm_row.stratified_sample(LOCOMO_DEV, 30, 24, None)


@needs_dev
def test_a_category_with_fewer_questions_than_asked_is_taken_whole() -> None:
    sample = llm_row.stratified_sample(LOCOMO_DEV, 1000, 23, ["conv-30"])
    assert list(sample) == ["conv-30"] and len(sample["conv-30"]) == 105  # every question of conv-30 has evidence


def test_the_chat_template_is_chatml_with_qwens_default_system_message_when_none_is_given() -> None:
    asked = llm_server.chatml([{"role": "system", "content": "Rank."}, {"role": "user", "content": "Query: x"}])
    assert asked == "<|im_start|>system\nRank.<|im_end|>\n<|im_start|>user\nQuery: x<|im_end|>\n<|im_start|>assistant\n"
    bare = llm_server.chatml([{"role": "user", "content": "hi"}])
    assert bare.startswith(f"<|im_start|>system\n{llm_server.DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nhi")


def outcome(category: int, recall5: float, recall10: float, ms: float) -> dict[str, Any]:
    return {"category": category, "metrics": {"recall@5": recall5, "recall@10": recall10}, "latency_ms": ms}


def test_the_summary_averages_each_row_per_category_and_times_the_stages() -> None:
    document = {
        "conversations": {
            "conv-a": {
                "rows": {"cems (no LLM)": [outcome(1, 0.0, 1.0, 10.0), outcome(2, 1.0, 1.0, 30.0)]},
                "calls": [{"stage": "rerank", "prompt_tokens": 1500, "completion_tokens": 20, "seconds": 18.0}],
            },
            "conv-b": {
                "rows": {"cems (no LLM)": [outcome(1, 1.0, 1.0, 20.0)]},
                "calls": [
                    {"stage": "rerank", "prompt_tokens": 1700, "completion_tokens": 40, "seconds": 22.0},
                    {"stage": "rerank", "prompt_tokens": 1600, "completion_tokens": 30, "seconds": 40.0},
                ],
            },
        }
    }
    summary = llm_row.summarise(document)
    row = summary["rows"]["cems (no LLM)"]
    assert row["questions"] == 3 and row["overall"] == {"R@5": pytest.approx(2 / 3), "R@10": 1.0}
    assert row["by_category"]["multi-hop"] == {"R@5": 0.5, "R@10": 1.0}
    assert row["by_category"]["open-domain"] == {"R@5": None, "R@10": None}
    assert row["seconds_per_search"]["p50"] == pytest.approx(0.02)
    rerank = summary["stages"]["rerank"]
    assert rerank["calls"] == 3 and rerank["seconds_p50"] == 22.0 and rerank["seconds_mean"] == pytest.approx(80 / 3)
    table = llm_row.markdown(summary)
    assert (
        "| cems (no LLM) | 3 | 0.667 | 1.000 | 0.500/1.000 |" in table
        and "| rerank | 3 | 1600 | 30 | 22.00 (26.67) |" in table
    )
