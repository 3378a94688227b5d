"""CEMS's LLM stages, siftcoder's re-rank hook and boostFn, and the latency budget: the pure stages
with the seed's numbers (seeds/cems-retrieval.txt, seeds/siftcoder-retrieval.txt)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsearch.errors import InvalidInputError
from memsearch.llm import (
    Answer,
    LLMFailure,
    LLMSettings,
    Message,
    llm_settings,
    prompt_key,
    repeats_prompt,
    reply_text,
)
from memsearch.models import Memory, content_hash
from memsearch.profiles import load_profile, with_environment
from memsearch.retrieval import diverse, llm_prompts, rerank
from memsearch.retrieval.candidates import Candidate, LegHit
from memsearch.retrieval.fusion import rrf
from memsearch.retrieval.query import parse_query
from memsearch.retrieval.request import Boost, SearchRequest
from memsearch.retrieval.scoring import apply_boosts
from memsearch.retrieval.stage_runner import StageRunner
from tests.conftest import T0


def memory(memory_id: int, text: str = "x", session: str | None = None, tags: tuple[str, ...] = ()) -> Memory:
    return Memory(
        id=memory_id, key=None, text=text, created_at=T0 - timedelta(days=1), last_accessed_at=T0,
        access_count=0, importance=0.5, priority=1.0, pinned=False, project=None, namespace=None,
        session=session, role=None, tags=tags, metadata={}, content_hash=content_hash(text),
    )  # fmt: skip


# -- intent and routing (retrieval.py:1129) ---------------------------------------------------


@pytest.mark.parametrize(
    ("complexity", "reasoning", "domains", "strategy"),
    [
        ("simple", False, (), "vector"),
        ("simple", True, (), "hybrid"),
        ("complex", False, (), "hybrid"),
        ("moderate", False, ("a", "b", "c"), "hybrid"),
        ("moderate", False, (), "hybrid"),
    ],
)
def test_route_to_strategy_as_the_seed_writes_it(
    complexity: str, reasoning: bool, domains: tuple[str, ...], strategy: str
) -> None:
    assert llm_prompts.route_to_strategy(llm_prompts.Intent("x", complexity, domains, reasoning)) == strategy


def test_intent_reply_is_parsed_leniently_and_checked() -> None:
    intent = llm_prompts.parse_intent('Sure: {"complexity": "SIMPLE", "domains": ["a"], "requires_reasoning": "false"}')
    assert (intent.complexity, intent.domains, intent.requires_reasoning) == ("simple", ("a",), False)
    assert llm_prompts.parse_intent('{"complexity": "weird"}').complexity == "moderate"  # the seed's default
    with pytest.raises(LLMFailure, match="malformed"):
        llm_prompts.parse_intent("no json here")


# -- query synthesis ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "kind", "counts"),
    [
        ("recommend video editing resources", "preference", "4-5"),
        ("which came first: doctor visit or camping trip?", "temporal", "3-4"),
        ("Python version", "general", "2-3"),
    ],
)
def test_synthesis_asks_for_the_seeds_term_counts(query: str, kind: str, counts: str) -> None:
    from memsearch.retrieval.routing import detect_intents

    assert llm_prompts.query_type(detect_intents(query)) == kind
    prompt = llm_prompts.synthesis_prompt(query, kind, ["I use Final Cut Pro"])
    assert f"into {counts} alternative search terms" in prompt[0]["content"]
    # profile context (the user's own memories) only for preference queries
    assert ("I use Final Cut Pro" in prompt[1]["content"]) == (kind == "preference")
    if kind == "temporal":
        assert "BOTH events" in prompt[0]["content"]


def test_synthesized_terms_are_capped_per_type() -> None:
    # The seed's example expansion of "recommend video editing resources": five terms.
    seed = (
        '["I use video editing software", "Adobe Premiere Pro", "Final Cut Pro", '
        '"my favorite video editor", "I work with video production", "one too many"]'
    )
    terms = llm_prompts.parse_terms(seed, "preference", "recommend video editing resources")
    assert terms == [
        "I use video editing software", "Adobe Premiere Pro", "Final Cut Pro", "my favorite video editor",
        "I work with video production",
    ]  # fmt: skip
    assert len(llm_prompts.parse_terms(seed, "temporal", "q")) == 4
    assert len(llm_prompts.parse_terms(seed, "general", "q")) == 3
    # numbered lines work too; the query itself and repeats are dropped
    assert llm_prompts.parse_terms("1. Python 3.12\n2) python 3.12\n- q\n", "general", "q") == ["Python 3.12"]
    with pytest.raises(LLMFailure):
        llm_prompts.parse_terms("", "general", "q")


def test_hyde_instructions_per_type() -> None:
    preference = llm_prompts.hyde_prompt("recommend video editing resources", "preference")[0]["content"]
    assert "FROM THE USER'S PERSPECTIVE" in preference and "by NAME" in preference and "WHY" in preference
    temporal = llm_prompts.hyde_prompt("when did I deploy?", "temporal")[0]["content"]
    assert '"On March 15th..."' in temporal and "First X happened, then Y" in temporal and "3 days before" in temporal
    assert llm_prompts.parse_hyde('  "I use Adobe Premiere Pro for video editing" ') == (
        "I use Adobe Premiere Pro for video editing"
    )


# -- weighted RRF over the original and the expansions ------------------------------------------


def test_rrf_weighs_the_original_twice_an_expansion_once_with_rank_bonuses() -> None:
    legs = {
        "lexical": {1: LegHit(1, 5.0)},
        "vector": {1: LegHit(2, 0.8)},
        "synth1.lexical": {1: LegHit(3, 2.0)},
        "hyde.vector": {1: LegHit(4, 0.7)},
    }
    weights = {"lexical": 2.0, "vector": 2.0, "synth1.lexical": 1.0, "hyde.vector": 1.0}
    score, terms = rrf(legs, 60, weights, {1: 0.05, 2: 0.02, 3: 0.02})[1]
    assert terms["lexical"] == pytest.approx(2 / 61) and terms["bonus:lexical"] == 0.05
    assert terms["vector"] == pytest.approx(2 / 62) and terms["bonus:vector"] == 0.02
    assert terms["synth1.lexical"] == pytest.approx(1 / 63) and terms["bonus:synth1.lexical"] == 0.02
    assert terms["hyde.vector"] == pytest.approx(1 / 64) and "bonus:hyde.vector" not in terms
    assert score == pytest.approx(2 / 61 + 2 / 62 + 1 / 63 + 1 / 64 + 0.05 + 0.02 + 0.02)


# -- re-ranking ----------------------------------------------------------------------------------


def test_rerank_reply_names_positions_and_the_rest_keep_their_order() -> None:
    assert llm_prompts.parse_rerank("[3, 1, 3, 9]", 4) == [2, 0, 1, 3]
    for reply in ("Order: [3, 1].", "```json\n[3, 1]\n```", "[3, 1] are the relevant ones", " 3, 1 ", "[3]"):
        assert llm_prompts.parse_rerank(reply, 4)[:2] in ([2, 0], [2, 1]), reply
    # Gemma 3 270M's replies: the prompt's listing echoed or made up is no ranking, nor is prose
    for reply in ("none of them", "Memory 3 is best", "[1] Caroline: hi\n[2] Mel: yo", " <<SYS>>\n[41] Mel: x\n[2] C"):
        with pytest.raises(LLMFailure, match="no memory numbers"):
            llm_prompts.parse_rerank(reply, 4)
    prompt = llm_prompts.rerank_prompt("q", ["a" * 1000, "b"])
    assert "[1] " + "a" * llm_prompts.RERANK_TEXT_CHARS + "\n[2] b" in prompt[1]["content"]


@given(st.permutations(list(range(5))))
def test_apply_order_moves_candidates_and_keeps_the_scores_in_place(order: list[int]) -> None:
    ranked = [Candidate(memory(i), {}, fusion=1.0 - i / 10) for i in range(7)]
    moved = rerank.apply_order(ranked, order, "llm")
    assert [c.id for c in moved[:5]] == order and [c.id for c in moved[5:]] == [5, 6]
    assert [c.fusion for c in moved] == [c.fusion for c in ranked]
    assert all(c.fusion_detail["rerank"]["to"] == n for n, c in enumerate(moved[:5], start=1))


def test_deterministic_reranker_orders_by_query_word_coverage() -> None:
    texts = ["the weather was nice", "deploy key", "the deploy key lives in the vault"]
    assert rerank.coverage_order(parse_query("where is the deploy key vault?").content_words, texts) == [2, 1, 0]


# -- diverse assembly (retrieval.py:286) -----------------------------------------------------------


def test_diverse_assembly_takes_the_best_of_each_session_first() -> None:
    # Three strong memories from session A, one weaker from session B: greedy would take A, A, A.
    ranked = [
        Candidate(memory(1, "a1" * 20, "A"), {}, fusion=1.0),
        Candidate(memory(2, "a2" * 20, "A"), {}, fusion=0.95),
        Candidate(memory(3, "a3" * 20, "A"), {}, fusion=0.9),
        Candidate(memory(4, "b1" * 20, "B"), {}, fusion=0.5),
    ]
    vectors = {i: np.eye(4, dtype=np.float32)[i - 1] for i in range(1, 5)}
    chosen = diverse.assemble_diverse(ranked, vectors, 2000, 0.6)
    assert [c.id for c in chosen] == [1, 4, 2, 3]
    assert [c.selection["phase"] for c in chosen] == [1, 1, 2, 2]
    first = chosen[0].selection
    assert first["mmr_score"] == pytest.approx(0.6 * 1.0)  # nothing selected yet: λ · relevance
    # the budget still holds: 10 tokens each, room for two
    assert [c.id for c in diverse.assemble_diverse(ranked, vectors, 20, 0.6) if c.dropped is None] == [1, 4]


# -- boostFn --------------------------------------------------------------------------------------


def test_boost_parses_and_multiplies_matching_memories_only() -> None:
    assert Boost.parse("tag:ops=2") == Boost("tag", "ops", 2.0)
    assert Boost.parse("project:my/repo").factor == 1.5
    for bad in ("ops", "colour:red", "tag:ops=x", "tag:ops=0", "tag:ops=nan", "tag:=2"):
        with pytest.raises(InvalidInputError):
            Boost.parse(bad)
    candidates = [
        Candidate(memory(1, tags=("ops",)), {}, fusion=0.5),
        Candidate(dataclasses.replace(memory(2), project="my/repo"), {}, fusion=0.5),
        Candidate(memory(3), {}, fusion=0.5),
    ]
    boosted = apply_boosts(candidates, [Boost("tag", "ops", 2.0), Boost("project", "my/repo", 3.0)])
    assert [c.final for c in boosted] == [1.0, 1.5, 0.5]
    assert boosted[0].factors[0].name == "boost" and boosted[0].factors[0].detail == {"tag": "ops"}


# -- the seed's environment variables --------------------------------------------------------------


def test_cems_environment_variables() -> None:
    profile = load_profile("cems")
    assert with_environment(profile, {}) == profile
    env = {
        "CEMS_HYBRID_VECTOR_WEIGHT": "0.7",
        "CEMS_RERANK_INPUT_LIMIT": "20",
        "CEMS_PROJECT_BOOST_FACTOR": "1.5",
        "CEMS_PROJECT_PENALTY_FACTOR": "0.6",
    }
    changed = with_environment(profile, env)
    assert changed.fusion.weights == {"lexical": pytest.approx(2.0 * 0.6), "vector": pytest.approx(2.0 * 1.4)}
    assert changed.rerank.limit == 20
    project = next(a for a in changed.adjust if a.kind == "project")
    assert (project.same, project.other, project.none) == (1.5, 0.6, 0.9)
    off = next(
        a for a in with_environment(profile, {"CEMS_ENABLE_PROJECT_PENALTY": "false"}).adjust if a.kind == "project"
    )
    assert (off.same, off.other, off.none) == (1.3, 1.0, 1.0)
    with pytest.raises(InvalidInputError, match="CEMS_HYBRID_VECTOR_WEIGHT"):
        with_environment(profile, {"CEMS_HYBRID_VECTOR_WEIGHT": "2"})
    assert with_environment(load_profile("default"), env) == load_profile("default")  # CEMS only


# -- settings and the wire format -------------------------------------------------------------------


def test_settings_come_from_the_environment_and_never_show_the_key() -> None:
    assert llm_settings({}) is None
    settings = llm_settings(
        {"MEMSEARCH_LLM_URL": "http://127.0.0.1:9/v1", "MEMSEARCH_LLM_MODEL": "m", "MEMSEARCH_LLM_API_KEY": "sk-x1"}
    )
    assert settings == LLMSettings("http://127.0.0.1:9/v1", "m", "sk-x1", 2.0)
    assert settings.endpoint == "http://127.0.0.1:9/v1/chat/completions"
    assert "sk-x1" not in repr(settings)
    with pytest.raises(InvalidInputError, match="MEMSEARCH_LLM_MODEL"):
        llm_settings({"MEMSEARCH_LLM_URL": "http://h/v1"})
    with pytest.raises(InvalidInputError, match="MEMSEARCH_LLM_TIMEOUT"):
        llm_settings({"MEMSEARCH_LLM_URL": "http://h/v1", "MEMSEARCH_LLM_MODEL": "m", "MEMSEARCH_LLM_TIMEOUT": "0"})


def test_a_reply_that_repeats_the_prompt_is_no_answer() -> None:
    prompt = llm_prompts.hyde_prompt("When did Melanie paint a sunset?", "temporal")
    # what Gemma 3 270M (a base model, no chat template) sent back: the prompt, continued
    echo = "\nReply with the memory's  text only, at most three sentences.\n<</SYS>> [/INST]"
    assert repeats_prompt(echo, prompt)
    assert repeats_prompt("<</SYS>> Query: When did Melanie paint a sunset? [/INST]", prompt)
    assert not repeats_prompt("On 7 May I painted a sunset by the lake.", prompt)
    assert not repeats_prompt("Query: q\n[2, 1]", llm_prompts.rerank_prompt("q", ["a"]))  # a short line is no sign


def test_reply_text_and_prompt_key() -> None:
    assert reply_text({"choices": [{"message": {"content": "hi"}}]}) == "hi"
    malformed: list[object] = [{}, {"choices": []}, {"choices": [{"message": {"content": None}}]}, []]
    for bad in malformed:
        with pytest.raises(LLMFailure, match="malformed"):
            reply_text(bad)
    messages = [{"role": "user", "content": "q"}]
    assert prompt_key("a", messages) == prompt_key("a", [dict(m) for m in messages]) != prompt_key("b", messages)


# -- the latency budget -----------------------------------------------------------------------------


class MeasuredLLM:
    """An LLM whose calls are known to take `ms` each (for the budget's planning only)."""

    def __init__(self, ms: float) -> None:
        self.ms = ms
        self.timeout_s = 2.0

    def estimate_ms(self) -> float:
        return self.ms

    def is_cached(self, messages: Sequence[Message]) -> bool:
        return False

    def complete(self, messages: Sequence[Message], *, max_tokens: int, timeout_s: float | None = None) -> Answer:
        raise AssertionError("not called by plan()")


@pytest.mark.parametrize(
    ("max_ms", "skipped"),
    [
        (None, []),
        (2000, []),  # 4 calls × 500 ms fit
        (1999, ["hyde"]),  # HyDE first
        (1000, ["hyde", "rerank"]),  # then re-ranking
        (999, ["hyde", "rerank", "expansion"]),  # then expansion
    ],
)
def test_max_ms_gives_up_hyde_then_reranking_then_expansion(max_ms: int | None, skipped: list[str]) -> None:
    thinking = StageRunner(MeasuredLLM(500), ["intent", "synthesis", "hyde", "rerank"], max_ms)
    thinking.plan(lambda stage: False)
    assert list(thinking.skipped_groups) == skipped


def test_cached_answers_cost_nothing_in_the_plan() -> None:
    thinking = StageRunner(MeasuredLLM(500), ["intent", "synthesis", "hyde", "rerank"], 1500)
    thinking.plan(lambda stage: stage == "intent")
    assert list(thinking.skipped_groups) == []


def test_request_checks_the_new_fields() -> None:
    with pytest.raises(InvalidInputError, match="rerank"):
        SearchRequest("q", rerank="maybe")
    with pytest.raises(InvalidInputError, match="max_ms"):
        SearchRequest("q", max_ms=0)
