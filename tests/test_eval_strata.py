"""The eval report's breakdown by stratum: whether a question's evidence dates something, and the
question's shape (issue 33), as pure functions, in the aggregate, and through `memsearch eval`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsearch.eval.metrics import QuestionResult, aggregate
from memsearch.eval.strata import STRATA, evidence_dating, question_shape, question_strata
from tests.test_cli import run
from tests.test_eval_cli import QUICK, blocks

TINY = Path(__file__).parent / "data" / "locomo_tiny.json"


@pytest.mark.parametrize(
    ("question", "shape"),
    [
        ("When did Melanie paint a sunrise?", "when"),
        ("when was the concert", "when"),
        ("How long has Nate had his first two turtles?", "how long"),
        ("How long ago was Caroline's 18th birthday?", "how long"),
        ("How many weeks passed between adopting Coco and Shadow?", "how long"),  # a span of time
        ("How many weeks ago did Jon visit networking events?", "how long"),
        ("how much time did the migration take", "how long"),
        ("how many games has John won", "how many"),  # a count
        ("how often does she swim", "how many"),
        ("What was the date when Maria went to the beach?", "which date"),
        ("Around what time did Caroline have a picnic?", "which date"),
        ("What year did John start surfing?", "which date"),
        ("In which month's game did John score most?", "which date"),
        ("Which week did Tim visit the UK?", "which date"),
        ("What did John attend with his colleagues in March 2023?", "other"),
        # a time word that is not the question's frame (the `when` adjustment's reading, dates.ASKS_*)
        ("How many days of PTO do I have left?", "how many"),
        ("How many hours did the migration take?", "how long"),
        ("Which weekend bag did I buy?", "other"),
        ("Which time slot did we book?", "other"),
        ("What is the time limit for the exam?", "other"),
        ("Where is the deploy key?", "other"),
        ("", "other"),
    ],
)
def test_question_shapes(question: str, shape: str) -> None:
    assert question_shape(question) == shape
    assert shape in STRATA["shape"]


@pytest.mark.parametrize(
    ("evidence", "dating"),
    [
        (["I finally finished the marathon!"], "undated"),
        (["I finally finished the marathon last Sunday!"], "dated"),
        (["Congrats!", "We went camping two weekends ago."], "dated"),  # one dated turn is enough
        (["I started in May."], "dated"),
        (["It was in 2019, I think."], "dated"),
        (["I painted it yesterday"], "dated"),
        (["The deploy key lives in 1Password"], "undated"),
        ([], "undated"),
    ],
)
def test_evidence_dating_reads_the_when_lexicon(evidence: list[str], dating: str) -> None:
    assert evidence_dating(evidence) == dating
    assert question_strata("When did it happen?", evidence) == {"evidence": dating, "shape": "when"}


def test_aggregate_breaks_each_category_down_by_stratum() -> None:
    def result(qid: str, category: int, recall: float, dating: str, shape: str) -> QuestionResult:
        return QuestionResult(qid, category, {"recall@5": recall}, {"evidence": dating, "shape": shape})

    summary = aggregate([
        result("a", 2, 1.0, "dated", "when"),
        result("b", 2, 0.0, "undated", "when"),
        result("c", 2, 0.5, "undated", "how long"),
        result("d", 4, 1.0, "dated", "other"),
    ])  # fmt: skip
    evidence = summary.by_stratum["evidence"]
    assert {value: group.count for value, group in evidence[2].items()} == {"dated": 1, "undated": 2}
    assert evidence[2]["undated"].means == {"recall@5": 0.25}
    assert summary.by_stratum["shape"][2]["when"].means == {"recall@5": 0.5}
    assert list(summary.by_stratum["shape"][4]) == ["other"]
    # results without strata (as before) aggregate as before, with no breakdown
    assert aggregate([QuestionResult("e", 1, {"recall@5": 1.0})]).by_stratum == {}


@pytest.mark.slow  # an evaluation with the model: out of the quick tier
def test_eval_shows_the_strata_in_a_third_block_and_in_json() -> None:
    plain = run(*QUICK, "--strata").stdout
    _, _, strata = blocks(plain)
    assert strata[0] == ["granularity", "profile", "mode", "category", "stratum", "value", "n", "R@5", "R@10"]
    assert all(len(line) == len(strata[0]) for line in strata)
    temporal = {(line[4], line[5]): line[6] for line in strata[1:] if line[:4] == ["turn", "default", "lexical",
                                                                                   "temporal"]}  # fmt: skip
    assert temporal, strata
    assert {stratum for stratum, _ in temporal} == {"evidence", "shape"}
    # without --strata the plain output keeps its two blocks
    assert len(blocks(run(*QUICK).stdout)) == 2
    document = json.loads(run(*QUICK, "-f", "json").stdout)
    row = document["rows"][0]
    by_stratum = row["by_stratum"]
    assert set(by_stratum) == {"evidence", "shape"}
    counts = {value: group["count"] for value, group in by_stratum["shape"]["2"].items()}
    assert sum(counts.values()) == row["by_category"]["2"]["count"]
