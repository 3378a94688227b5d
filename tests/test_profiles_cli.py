"""Each profile through the CLI on a small store with fixed times: its seed's formula, recomputed
by hand from the explained inputs, must give the score it printed."""

from __future__ import annotations

import json
import math
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from memsearch.api import Memsearch
from memsearch.retrieval.request import SearchRequest
from tests.test_cli import run

AS_OF = "2024-05-07T00:00:00+00:00"
NOW = datetime.fromisoformat(AS_OF)


@pytest.fixture
def store() -> dict[int, dict[str, Any]]:
    run("add", "Fixed null-deref when JWT was malformed in the auth middleware", "-t", "auth", "--at", "2024-04-30")
    run(
        "add",
        "parseConfig crashes on an empty YAML file",
        "--project",
        "cli",
        "--importance",
        "0.9",
        "--at",
        "2024-05-06T12:00:00",
    )
    run("add", "Alice prefers dark roast coffee", "-t", "people", "--pin", "--priority", "1.5", "--at", "2024-05-03")
    run("add", "The auth token refresh job runs every hour", "-t", "auth", "--project", "web", "--at", "2024-02-01")
    return {m["id"]: m for m in json.loads(run("list", "-f", "json").stdout)}


def search(*args: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(run("search", *args, "--as-of", AS_OF, "-f", "json", "--raw").stdout)
    return document


def age_days(memory: dict[str, Any], clock: str = "created_at") -> float:
    return (NOW - datetime.fromisoformat(memory[clock])).total_seconds() / 86_400


def legs(result: dict[str, Any]) -> dict[str, int]:
    return {leg: hit["rank"] for leg, hit in result["explain"]["legs"].items()}


def test_siftcoder(store: dict[int, dict[str, Any]]) -> None:
    document = search("auth token bug", "-p", "siftcoder")
    assert document["profile"] == "siftcoder" and len(document["results"]) <= 5
    for result in document["results"]:
        rrf = sum(1 / (60 + rank) for rank in legs(result).values())
        assert result["score"] == pytest.approx(rrf * math.exp(-age_days(store[result["id"]]) / 7), rel=1e-12)
        assert [f["name"] for f in result["explain"]["factors"]] == ["decay"]


def test_memsense(store: dict[int, dict[str, Any]]) -> None:
    document = search("auth token bug", "-p", "memsense", "-k", "3")
    for result in document["results"]:
        memory = store[result["id"]]
        quality = 0.6 * memory["importance"] + 0.4 * (1 - math.exp(-memory["access_count"] / 5))
        rrf = sum(1 / (15 + rank) for rank in legs(result).values())
        assert result["score"] == pytest.approx(rrf + 0.1 * quality, rel=1e-12)
        assert "mmr_score" in result["explain"]["selection"]
    assert [f["name"] for f in document["results"][0]["explain"]["factors"]] == ["memory_score"]


def test_mnemosyne(store: dict[int, dict[str, Any]]) -> None:
    document = search("auth token bug", "-p", "mnemosyne")
    best_bm25 = max(
        c["explain"]["legs"]["lexical"]["score"] for c in document["candidates"] if "lexical" in c["explain"]["legs"]
    )
    for result in document["results"]:
        memory, explain = store[result["id"]], result["explain"]
        bm25 = explain["legs"].get("lexical", {}).get("score", 0.0)
        base = 0.5 * explain["cosine"] + 0.3 * bm25 / best_bm25 + 0.2 * memory["importance"]
        recency = math.exp(-age_days(memory) * 24 / 168)
        assert result["score"] == pytest.approx(base * (0.7 + 0.3 * recency), rel=1e-12)
        assert explain["fusion"]["method"] == "weighted"


def test_pgvector(store: dict[int, dict[str, Any]]) -> None:
    document = search("auth token bug", "-p", "pgvector")
    assert "vector only" in document["strategy_reason"]
    assert len(document["results"]) == 4  # exact top-k over every memory
    for result in document["results"]:
        memory = store[result["id"]]
        expected = (
            0.5 * result["explain"]["cosine"]
            + 0.3 * memory["importance"]
            + 0.2 * math.exp(-0.05 * age_days(memory, "last_accessed_at"))
        )
        assert result["score"] == pytest.approx(expected, rel=1e-12)
    scores = [r["score"] for r in document["results"]]
    assert scores == sorted(scores, reverse=True)
    assert "has no lexical leg" in run("search", "x", "-p", "pgvector", "--mode", "lexical", code=2).stderr


def test_cems(store: dict[int, dict[str, Any]]) -> None:
    document = search("auth token bug", "-p", "cems", "--project", "web")
    candidates = document["candidates"]
    raw = {}
    for c in candidates:
        ranks = legs(c).values()
        raw[c["id"]] = sum(2 / (60 + r) for r in ranks) + sum(0.05 if r == 1 else 0.02 if r <= 3 else 0 for r in ranks)
    low, high = min(raw.values()), max(raw.values())
    for c in candidates:
        memory = store[c["id"]]
        blended = 0.5 * (raw[c["id"]] - low) / (high - low) + 0.5 * c["explain"]["cosine"]
        assert c["explain"]["fusion"]["score"] == pytest.approx(blended, rel=1e-12)
        if blended < 0.3:
            assert c["dropped"].startswith("below threshold")
            continue
        project = {"web": 1.3, None: 0.9}.get(memory["project"], 0.8)
        expected = blended / (1 + int(age_days(memory, "last_accessed_at")) / 60) * memory["priority"]
        expected *= (1.1 if memory["pinned"] else 1.0) * project
        assert c["score"] == pytest.approx(expected, rel=1e-12)
    names = [f["name"] for f in document["results"][0]["explain"]["factors"]]
    assert names == ["decay", "priority", "pinned", "project"]
    table = run("search", "auth token bug", "-p", "cems", "--project", "web", "--as-of", AS_OF, "--explain").stdout
    for name in ("blend", "× decay", "× priority", "× pinned", "× project"):
        assert name in table


def test_default_explains_its_factors(store: dict[int, dict[str, Any]]) -> None:
    document = search("auth token bug")
    assert document["profile"] == "default"
    (decay,) = document["results"][0]["explain"]["factors"]
    assert decay["name"] == "decay" and 0.7 <= decay["value"] <= 1.0


def test_budget_and_project_scope(store: dict[int, dict[str, Any]]) -> None:
    document = search("auth token bug", "-p", "siftcoder", "--max-tokens", "12")
    used = sum(r["explain"]["selection"]["tokens"] for r in document["results"])
    assert used <= 12
    assert any((c["dropped"] or "").startswith("budget") for c in document["candidates"])
    filtered = search("auth", "--project", "web")  # the default profile filters by project
    assert {r["project"] for r in filtered["results"]} == {"web"}


def test_profiles_commands() -> None:
    listing = run("profiles").stdout
    for name in ("default", "siftcoder", "memsense", "mnemosyne", "pgvector", "cems"):
        assert name in listing
    shown = json.loads(run("profiles", "show", "memsense", "-f", "json").stdout)
    assert shown["fusion"]["rrf_k"] == 15 and shown["select"]["mmr_lambda"] == 0.78
    assert "rrf_k" in run("profiles", "show", "cems").stdout
    assert "unknown profile" in run("profiles", "show", "nope", code=2).stderr


def test_search_records_access_unless_told_not_to(store: dict[int, dict[str, Any]]) -> None:
    run("search", "parseConfig", "-k", "1", "-f", "json", "--as-of", AS_OF)
    run("search", "parseConfig", "-k", "1", "-f", "json", "--no-touch")
    assert json.loads(run("get", "2", "-f", "json").stdout)["access_count"] == 0
    run("search", "parseConfig", "-k", "1", "-f", "json")
    touched = json.loads(run("get", "2", "-f", "json").stdout)
    assert touched["access_count"] == 1
    assert touched["last_accessed_at"] > store[2]["last_accessed_at"]


def test_concurrent_searches_lose_no_update(store: dict[int, dict[str, Any]], isolated_home: Path) -> None:
    def searches() -> None:
        with Memsearch() as ms:
            for _ in range(10):
                ms.search(SearchRequest("parseConfig", k=1, mode="lexical"))

    threads = [threading.Thread(target=searches) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert json.loads(run("get", "2", "-f", "json").stdout)["access_count"] == 40


def test_ingest_dedup_reports_near_duplicates(store: dict[int, dict[str, Any]], tmp_path: Path) -> None:
    result = run("add", "Alice prefers dark roast coffee.", "-p", "pgvector")
    assert result.stdout.strip() == "3" and "near-duplicate of id 3" in result.stderr
    lines = tmp_path / "more.jsonl"
    lines.write_text('{"text": "Bob likes green tea"}\n{"text": "parseConfig crashes on an empty YAML file!"}\n')
    result = run("import", str(lines), "-p", "pgvector")
    assert "imported 1 memory from" in result.stderr and "line 2 not stored: a near-duplicate of id 2" in result.stderr
    assert len(json.loads(run("list", "-f", "json").stdout)) == 5
    assert run("add", "Alice prefers dark roast coffee.").stdout.strip() == "6"  # the default profile keeps all


def test_consolidate_supersedes_older_near_duplicates(store: dict[int, dict[str, Any]]) -> None:
    run("add", "Fixed the null-deref when a JWT was malformed in the auth middleware", "--at", "2024-05-05")
    run("add", "Alice prefers dark roast coffee!", "--at", "2024-05-04")
    report = json.loads(run("consolidate", "--dry-run", "-f", "json").stdout)
    pairs = [(row["id"], row["superseded_by"]) for row in report["superseded"]]
    assert (1, 5) in pairs and (3, 6) in pairs
    coffee = next(row for row in report["superseded"] if row["id"] == 3)
    assert (coffee["text"], coffee["superseded_by_text"]) == (
        "Alice prefers dark roast coffee",
        "Alice prefers dark roast coffee!",
    )
    assert json.loads(run("get", "1", "-f", "json").stdout)["superseded_by"] is None  # a dry run changes nothing
    run("consolidate")
    assert json.loads(run("get", "1", "-f", "json").stdout)["superseded_by"] == 5
    document = search("JWT null deref auth middleware")
    dropped = {c["id"]: c["dropped"] for c in document["candidates"]}
    assert dropped[1] == "superseded by 5" and dropped[5] is None
    coffee = search("dark roast coffee")  # 3 is pinned: exempt from the filter
    assert {c["id"]: c["dropped"] for c in coffee["candidates"]}[3] is None
    memsense = search("JWT null deref auth middleware", "-p", "memsense")  # keeps superseded memories
    assert all(c["dropped"] != "superseded by 5" for c in memsense["candidates"])


def test_set_pin_and_unpin(store: dict[int, dict[str, Any]]) -> None:
    changed = json.loads(
        run("set", "2", "--importance", "0.2", "--memory-score", "0.75", "-t", "yaml", "-f", "json").stdout
    )
    assert (changed["importance"], changed["memory_score"], changed["tags"]) == (0.2, 0.75, ["yaml"])
    assert json.loads(run("search", "yaml", "--mode", "lexical", "-f", "json").stdout)["results"][0]["id"] == 2
    derived = json.loads(run("set", "2", "--derived-score", "-f", "json").stdout)
    assert derived["memory_score_set"] is False and derived["memory_score"] == pytest.approx(
        0.6 * 0.2 + 0.4 * (1 - math.exp(-0.2))
    )
    run("unpin", "3")
    assert json.loads(run("get", "3", "-f", "json").stdout)["pinned"] is False
    run("pin", "3", "1")
    assert json.loads(run("get", "1", "-f", "json").stdout)["pinned"] is True
    assert "priority must be from 1 to 2" in run("set", "1", "--priority", "3", code=2).stderr
    assert "nothing to set" in run("set", "1", code=2).stderr
