"""A golden snapshot of search output that guards refactors: for every profile × mode ×
granularity, over a notes store and the tiny LoCoMo fixture, the ids, keys, leg ranks and drop
reasons must match exactly and every score to 1e-9.

Regenerate (only when a change of ranking is intended, and say so in the commit):
    MEMSEARCH_GOLDEN_UPDATE=1 pytest tests/test_golden.py
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memsearch.api import Memsearch
from memsearch.choices import GRANULARITIES, MODES
from memsearch.embedding import Encoder
from memsearch.eval.datasets import load_locomo
from memsearch.ingest.conversations import conversation_memories
from memsearch.models import NewMemory
from memsearch.profiles import available
from memsearch.retrieval.request import SearchRequest
from tests.conftest import T0, new_pg_database

GOLDEN = Path(__file__).parent / "golden" / "search.json"
TINY = Path(__file__).parent / "data" / "locomo_tiny.json"
# Vector-derived scores are float32 products: the model export made on each machine and OpenBLAS's
# kernel for its processor round the last bits differently (~1e-8; PostgreSQL also scores a subset
# of rows, whose place in the matrix changes the rounding), so scores agree to float32 precision.
# Ids, order, legs and drop reasons must still match exactly.
TOLERANCE = 1e-6
POSTGRES_TOLERANCE = 1e-6

NOTES = [
    NewMemory("Fixed null-deref when JWT was malformed in the auth middleware", key="jwt", tags=("auth", "bug"),
              created_at=T0 - timedelta(days=40), importance=0.8),
    NewMemory("parseConfig crashes on an empty YAML file; added a guard", tags=("config",), project="cli",
              created_at=T0 - timedelta(days=3)),
    NewMemory("We deploy the web app on Tuesdays, never on Fridays", project="web", created_at=T0 - timedelta(days=10),
              pinned=True),
    NewMemory("Alice prefers dark roast coffee and oat milk", tags=("people",), created_at=T0 - timedelta(days=200)),
    NewMemory("The staging database password rotates every 30 days", project="web", priority=1.5,
              created_at=T0 - timedelta(days=1)),
    NewMemory("Upgraded Python from 3.10 to 3.11 on the build machines", created_at=T0 - timedelta(days=1)),
    NewMemory("The deploy key lives in the team vault under ops/deploy", key="deploy-key", tags=("ops",),
              created_at=T0 - timedelta(days=5)),
    NewMemory("Deploy windows are 09:00-11:00 on weekdays", tags=("ops",), created_at=T0 - timedelta(days=5)),
]  # fmt: skip

QUERIES = {
    "notes": ["where is the deploy key?", "parseConfig", "didn't we fix something around broken login tokens",
              "coffee preferences"],
    "locomo": ["What did Ben paint?", "When did Ana go hiking?", "What does Ana like?"],
}  # fmt: skip


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def stores(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, encoder: Encoder
) -> Iterator[dict[str, Memsearch]]:
    """The notes and tiny LoCoMo stores, in a SQLite file and then in PostgreSQL: both must give
    the one snapshot."""
    root = tmp_path_factory.mktemp("golden")
    if request.param == "sqlite":
        locations: tuple[Path | str, Path | str] = (root / "notes.db", root / "locomo.db")
    else:
        server = request.getfixturevalue("pg_server")
        locations = (new_pg_database(server), new_pg_database(server))
    notes = Memsearch(locations[0], encoder=encoder)
    notes.add_many(NOTES)
    locomo = Memsearch(locations[1], encoder=encoder)
    for conversation, _ in load_locomo(TINY):
        locomo.add_many(conversation_memories(conversation))
    yield {"notes": notes, "locomo": locomo}
    notes.close()
    locomo.close()


def snapshot(stores: dict[str, Memsearch]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for store_name, ms in stores.items():
        for profile in sorted(available()):
            for mode in MODES:
                for granularity in GRANULARITIES:
                    for query in QUERIES[store_name]:
                        label = f"{store_name}|{profile}|{mode}|{granularity}|{query}"
                        try:
                            request = SearchRequest(
                                query, k=5, mode=mode, as_of=T0, granularity=granularity, profile=profile
                            )
                            document = ms.search(request).to_dict(raw=True)
                        except Exception as error:  # an error is part of the behaviour too (its wording is not)
                            out[label] = {"error": type(error).__name__}
                            continue
                        out[label] = essentials(document)
    return out


def essentials(document: dict[str, Any]) -> dict[str, Any]:
    """What ranking decides: the route, the results, and each candidate's legs, scores and fate."""

    def candidate(c: dict[str, Any]) -> list[Any]:
        explain = c["explain"]
        return [
            c["id"],
            c["key"],
            c["dropped"],
            c["score"],
            explain["cosine"],
            explain["fusion"]["score"],
            {leg: [hit["rank"], hit["score"]] for leg, hit in explain["legs"].items()},
            [[f["name"], f["value"]] for f in explain["factors"]],
            c["context_of"],
        ]

    return {
        "strategy": [document["strategy"], document["strategy_reason"], document["intents"]],
        "results": [r["id"] for r in document["results"]],
        "candidates": [candidate(c) for c in document["candidates"]],
    }


def compare(expected: Any, actual: Any, where: str, problems: list[str], tolerance: float = TOLERANCE) -> None:
    if len(problems) > 20:
        return
    if isinstance(expected, dict) and isinstance(actual, dict):
        if set(expected) != set(actual):
            problems.append(f"{where}: keys {sorted(set(expected) ^ set(actual))} differ")
        for name in expected.keys() & actual.keys():
            compare(expected[name], actual[name], f"{where}.{name}", problems, tolerance)
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            problems.append(f"{where}: {len(expected)} items expected, {len(actual)} found")
        for n, (e, a) in enumerate(zip(expected, actual, strict=False)):
            compare(e, a, f"{where}[{n}]", problems, tolerance)
    elif isinstance(expected, float) and isinstance(actual, int | float) and not isinstance(actual, bool):
        if not math.isclose(expected, actual, rel_tol=0, abs_tol=tolerance):
            problems.append(f"{where}: {expected!r} expected, {actual!r} found")
    elif expected != actual:
        problems.append(f"{where}: {expected!r} expected, {actual!r} found")


def test_search_output_matches_the_golden_snapshot(stores: dict[str, Memsearch]) -> None:
    actual = json.loads(json.dumps(snapshot(stores)))
    if os.environ.get("MEMSEARCH_GOLDEN_UPDATE") and isinstance(stores["notes"].path, Path):
        GOLDEN.parent.mkdir(exist_ok=True)
        lines = (f"{json.dumps(name)}: {json.dumps(doc, ensure_ascii=False)}" for name, doc in sorted(actual.items()))
        GOLDEN.write_text("{\n" + ",\n".join(lines) + "\n}\n", encoding="utf-8")
    expected = json.loads(GOLDEN.read_text(encoding="utf-8"))
    problems: list[str] = []
    postgres = not isinstance(stores["notes"].path, Path)
    compare(expected, actual, "snapshot", problems, POSTGRES_TOLERANCE if postgres else TOLERANCE)
    assert not problems, "\n".join(problems)
