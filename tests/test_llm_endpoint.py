"""The LLM stages against a real HTTP server on loopback that speaks the chat-completions protocol
(tests/llm_server.py): success, the disk cache, and every failure degrading to the offline search."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.embedding import Encoder
from memsearch.llm import HttpLLM, LLMSettings
from memsearch.models import NewMemory
from memsearch.retrieval.request import SearchRequest
from tests.cli_probe import modules_imported_by
from tests.llm_server import HOLD_S, FakeLLM, fake_llm_server

KEY = "sk-test-5f2c9a-never-shown"
NOTES = [
    "The deploy key lives in 1Password, in the ops vault",
    "Lunch on Friday was pasta with the team",
    "ssh keys are rotated every month by the ops team",
]


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with fake_llm_server() as server:
        yield server


@pytest.fixture
def filled(ms: Memsearch) -> Memsearch:
    ms.add_many([NewMemory(text) for text in NOTES])
    return ms


def searcher(filled: Memsearch, fake: FakeLLM, tmp_path: Path, timeout: float = 1.0) -> Memsearch:
    llm = HttpLLM(LLMSettings(fake.url, "tiny", KEY, timeout), tmp_path / "llm-cache")
    return Memsearch(filled.path, encoder=filled.encoder(), llm=llm)


def search(ms: Memsearch, query: str = "where is the deploy key?", **fields: object) -> dict[str, Any]:
    return ms.search(SearchRequest(query, touch=False, profile="cems", **fields)).to_dict(raw=True)  # type: ignore[arg-type]


def test_cems_stages_run_as_named_legs_and_are_cached(filled: Memsearch, fake: FakeLLM, tmp_path: Path) -> None:
    with searcher(filled, fake, tmp_path) as ms:
        document = search(ms)
        assert [(s["stage"], s["status"]) for s in document["stages"]] == [
            ("intent", "ran"), ("synthesis", "ran"), ("hyde", "ran"), ("rerank", "ran"),
        ]  # fmt: skip
        assert document["strategy"] == "hybrid" and document["strategy_reason"].startswith("LLM intent")
        assert [(e["name"], e["text"]) for e in document["expansions"]] == [
            ("synth1", "deploy key vault"), ("synth2", "1Password credentials"), ("synth3", "ssh key location"),
            ("hyde", "I keep the deploy key in 1Password, in the ops vault."),
        ]  # fmt: skip
        assert document["expansions"][3]["legs"] == {"hyde.vector": "vector"}  # HyDE: vector legs only
        legs = {leg for row in document["results"] for leg in row["explain"]["legs"]}
        assert {"synth1.lexical", "synth1.vector", "hyde.vector"} <= legs
        weights = document["results"][0]["explain"]["fusion"]["weights"]
        assert weights["lexical"] == 2.0 and weights.get("synth1.lexical", 1.0) == 1.0
        moves = [c["explain"]["fusion"]["detail"]["rerank"] for c in document["candidates"][:2]]
        assert [m["method"] for m in moves] == ["llm", "llm"]
        assert fake.stages_called == ["intent", "synthesis", "hyde", "rerank"]
        assert fake.headers[0]["Authorization"] == f"Bearer {KEY}"
        assert fake.requests[0]["model"] == "tiny" and fake.requests[0]["temperature"] == 0
        # the same search again is answered from the disk cache: no request
        again = search(ms)
        assert [s["status"] for s in again["stages"]] == ["cached"] * 4
        assert len(fake.requests) == 4
        assert [r["id"] for r in again["results"]] == [r["id"] for r in document["results"]]
    assert KEY not in json.dumps(document) and KEY not in repr(ms.llm())
    for path in (tmp_path / "llm-cache").iterdir():
        assert KEY not in path.read_text()


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        ("timeout", "timeout after 0.3 s"),
        ("malformed", "malformed reply (not JSON)"),
        ("401", "HTTP 401 (unauthorized)"),
        ("429", "HTTP 429 (rate limited)"),
        ("500", "HTTP 500 (server error)"),
    ],
)
def test_every_failure_degrades_to_the_offline_search(
    filled: Memsearch, fake: FakeLLM, tmp_path: Path, behaviour: str, reason: str
) -> None:
    offline = search(filled)  # the profile without an endpoint
    fake.behaviour = behaviour
    with searcher(filled, fake, tmp_path, timeout=0.3) as ms:
        started = time.perf_counter()
        document = search(ms)
        elapsed = time.perf_counter() - started
    assert document["stages"][0] == {
        "stage": "intent",
        "status": "skipped",
        "reason": reason,
        "ms": None,
        "output": None,
    }
    # the endpoint is not waited on again in the same search
    assert {s["reason"] for s in document["stages"][1:]} == {f"{reason}, earlier in this search"}
    assert len(fake.requests) == 1
    assert elapsed < 0.3 + HOLD_S
    assert [r["id"] for r in document["results"]] == [r["id"] for r in offline["results"]]
    assert document["expansions"] == [] and KEY not in json.dumps(document)


def test_refused_connection_degrades_too(filled: Memsearch, tmp_path: Path) -> None:
    llm = HttpLLM(LLMSettings("http://127.0.0.1:9/v1", "tiny", KEY, 0.5), tmp_path / "cache")
    with Memsearch(filled.path, encoder=filled.encoder(), llm=llm) as ms:
        document = search(ms)
    assert document["stages"][0]["reason"] == "cannot connect to the endpoint"
    assert document["results"]


def test_a_malformed_answer_skips_that_stage_only(filled: Memsearch, fake: FakeLLM, tmp_path: Path) -> None:
    fake.answers["synthesis"] = "I cannot help with that."
    fake.answers["rerank"] = "all of them are fine"
    with searcher(filled, fake, tmp_path) as ms:
        document = search(ms)
    statuses = {s["stage"]: (s["status"], s["reason"]) for s in document["stages"]}
    # a line of prose is a term, however unhelpful; a re-rank reply that names no memory is skipped
    assert statuses["synthesis"][0] == "ran" and statuses["hyde"][0] == "ran"
    assert statuses["rerank"] == ("skipped", "malformed reply (no memory numbers)")


def test_echoed_prompts_are_no_answers(filled: Memsearch, fake: FakeLLM, tmp_path: Path) -> None:
    # What a base model with no chat template (Gemma 3 270M on llama.cpp's server) sends back:
    # HyDE's instructions continued, and the re-rank prompt's listing echoed. Neither is used.
    fake.answers["hyde"] = "\nReply with the memory's text only, at most three sentences.\n<</SYS>> Query: x [/INST]"
    fake.answers["rerank"] = "\n\n[1] The deploy key lives in 1Password\n[2] ssh keys are rotated [/INST]\n\n[1] Lunch"
    with searcher(filled, fake, tmp_path) as ms:
        document = search(ms)
    statuses = {s["stage"]: (s["status"], s["reason"]) for s in document["stages"]}
    assert statuses["hyde"] == ("skipped", "malformed reply (repeats the prompt)")
    assert statuses["rerank"] == ("skipped", "malformed reply (no memory numbers)")
    assert [e["stage"] for e in document["expansions"]] == ["synthesis"] * 3
    assert all("rerank" not in c["explain"]["fusion"].get("detail", {}) for c in document["candidates"])


def test_simple_intent_routes_to_vector_with_no_expansion(filled: Memsearch, fake: FakeLLM, tmp_path: Path) -> None:
    fake.answers["intent"] = json.dumps({"complexity": "simple", "domains": [], "requires_reasoning": False})
    with searcher(filled, fake, tmp_path) as ms:
        document = search(ms)
    assert document["strategy"] == "vector"
    assert [(s["stage"], s["status"]) for s in document["stages"]][:3] == [
        ("intent", "ran"), ("synthesis", "skipped"), ("hyde", "skipped"),
    ]  # fmt: skip


def test_max_ms_skips_what_does_not_fit(filled: Memsearch, fake: FakeLLM, tmp_path: Path) -> None:
    with searcher(filled, fake, tmp_path, timeout=1.0) as ms:
        # no latency measured yet: each call is expected to take the timeout (1 s)
        document = search(ms, max_ms=2500)
    reasons = {s["stage"]: s["reason"] for s in document["stages"] if s["status"] == "skipped"}
    assert set(reasons) == {"hyde", "rerank"} and reasons["hyde"].startswith("--max-ms 2500")
    assert fake.stages_called == ["intent", "synthesis"]


def test_aggregation_queries_get_the_diverse_assembly(filled: Memsearch, fake: FakeLLM, tmp_path: Path) -> None:
    with searcher(filled, fake, tmp_path) as ms:
        document = search(ms, "how many different keys does the ops team have?")
    assert any(s["stage"] == "diverse" and s["status"] == "ran" for s in document["stages"])
    assert all("phase" in row["explain"]["selection"] for row in document["results"])


def test_cli_explain_and_raw_show_the_stages(
    filled: Memsearch, fake: FakeLLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    filled.close()
    monkeypatch.setenv("MEMSEARCH_LLM_URL", fake.url)
    monkeypatch.setenv("MEMSEARCH_LLM_MODEL", "tiny")
    monkeypatch.setenv("MEMSEARCH_LLM_API_KEY", KEY)
    args = ["search", "where is the deploy key?", "--db", str(filled.path), "-p", "cems", "--no-touch"]
    result = CliRunner().invoke(app, [*args, "--explain", "--raw"])
    assert result.exit_code == 0, result.output
    assert "expansion: " in result.stdout and "leg synth1 (synthesis): deploy key vault" in result.stdout
    assert "re-ranking moved: id " in result.stdout
    assert "synth1.lexical leg" in result.stdout
    fake.behaviour = "timeout"
    monkeypatch.setenv("MEMSEARCH_LLM_TIMEOUT", "0.2")
    other = ["search", "what else is in the ops vault?", *args[2:]]  # not cached yet
    result = CliRunner().invoke(app, [*other, "--explain"])
    assert result.exit_code == 0, result.output
    assert "intent: skipped (timeout after 0.2 s)" in result.stdout
    assert KEY not in result.stdout + result.stderr


def test_no_http_client_is_imported_without_an_endpoint(filled: Memsearch, encoder: Encoder) -> None:
    filled.close()
    modules = modules_imported_by("search", "deploy key", "--db", str(filled.path), "-p", "cems", check=True)
    assert "httpx2" not in modules


def test_boost_and_deterministic_rerank_from_the_cli(filled: Memsearch) -> None:
    filled.close()
    base = ["search", "the ops team", "--db", str(filled.path), "--no-touch", "-f", "json"]
    plain = json.loads(CliRunner().invoke(app, base).stdout)
    last = plain["results"][-1]["id"]
    # tag the last result and boost it to the top
    assert CliRunner().invoke(app, ["set", str(last), "--tag", "focus", "--db", str(filled.path)]).exit_code == 0
    boosted = json.loads(CliRunner().invoke(app, [*base, "--boost", "tag:focus=100"]).stdout)
    assert boosted["results"][0]["id"] == last
    factor = [f for f in boosted["results"][0]["explain"]["factors"] if f["name"] == "boost"]
    assert factor == [{"name": "boost", "op": "mul", "value": 100.0, "detail": {"tag": "focus"}}]
    result = CliRunner().invoke(app, [*base, "--boost", "colour:red"])
    assert result.exit_code == 2 and "--boost must be tag:NAME or project:NAME" in result.stderr
    hooked = json.loads(CliRunner().invoke(app, [*base, "-p", "siftcoder", "--rerank", "deterministic"]).stdout)
    assert hooked["stages"][0]["stage"] == "rerank" and hooked["stages"][0]["reason"].startswith("deterministic")
    # without an endpoint the LLM re-ranker is skipped, and says why
    unhooked = json.loads(CliRunner().invoke(app, [*base, "-p", "siftcoder", "--rerank", "llm"]).stdout)
    assert unhooked["stages"] == [
        {"stage": "rerank", "status": "skipped", "reason": "no LLM endpoint configured", "ms": None, "output": None}
    ]


def test_servers_take_the_same_fields() -> None:
    from memsearch.errors import InvalidInputError
    from memsearch.retrieval.request import Boost, request_from_fields

    request = request_from_fields("q", boost=["tag:x=2", "project:p"], rerank="deterministic", max_ms=300)
    assert request.boosts == (Boost("tag", "x", 2.0), Boost("project", "p", 1.5))
    assert (request.rerank, request.max_ms) == ("deterministic", 300)
    assert request_from_fields("q", boost="tag:x").boosts == (Boost("tag", "x", 1.5),)  # a lone string: one value
    for bad in ({"boost": [3]}, {"rerank": 3}, {"max_ms": "fast"}, {"rerank": "maybe"}):
        with pytest.raises(InvalidInputError):
            request_from_fields("q", **bad)
