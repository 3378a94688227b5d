"""bench/peers.py, the peers section of bench/bench.py, at a tiny size: it runs, every figure sits
beside its floor or peer, and a peer whose package is missing is skipped, never fails."""

from __future__ import annotations

import importlib.util
import sys
import zlib
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from memsearch.api import Memsearch
from memsearch.models import EmbeddingModelInfo, NewMemory

ROOT = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 6, 1, tzinfo=UTC)
SIZE = 300
DIM = 16
PEER_MODULES = {"chroma": ("chromadb",), "sqlite-vec": ("apsw", "sqlite_vec"), "lancedb": ("lancedb",)}


class HashEncoder:
    """A unit vector a text, from its hash (no model runs)."""

    info = EmbeddingModelInfo("hash-test-model", DIM)

    def encode(self, texts: Sequence[str], *, progress: Any = None) -> np.ndarray:
        rows = [np.random.default_rng(zlib.crc32(text.encode())).normal(size=DIM) for text in texts]
        matrix = np.array(rows, dtype=np.float32).reshape(len(texts), DIM)
        unit: np.ndarray = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        return unit


@pytest.fixture
def peers(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """bench/peers.py loaded (with bench.py and fixed_cost.py, which it imports), sys.path and the
    modules put back afterwards."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    spec = importlib.util.spec_from_file_location("peers", ROOT / "bench" / "peers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["peers"] = module
    spec.loader.exec_module(module)
    yield module
    for name in ("peers", "bench", "fixed_cost"):
        if name not in before:
            sys.modules.pop(name, None)


def run(peers: ModuleType, tmp_path: Path) -> tuple[list[Any], list[str]]:
    bench = peers.bench
    records = bench.corpus(SIZE, 42, NOW)
    store = tmp_path / "store.db"
    with Memsearch(store, encoder=HashEncoder()) as ms:
        ms.add_many([NewMemory.from_json(record) for record in records])
    queries = bench.queries(12, 42, records)
    figures, skipped = peers.bench_peers(SIZE, store, queries, 42, tmp_path, NOW, warm=1, encoder=HashEncoder())
    return figures, skipped


@pytest.mark.timeout(60)
def test_the_peers_section_runs_at_a_tiny_size_each_figure_beside_its_floor_or_peer(
    peers: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sqlite-vec only: importing chromadb and lancedb alone takes seconds (bench.py runs them all).
    monkeypatch.setattr(peers, "PEERS", {"sqlite-vec": peers.PEERS["sqlite-vec"]})
    figures, skipped = run(peers, tmp_path)
    ops = {fig.extra["peer_op"]: fig for fig in figures if "peer_op" in fig.extra}
    for name in (peers.MS_VECTOR, peers.MS_HYBRID, peers.MS_LEXICAL, peers.FLOOR, peers.MS_RANK):
        assert len(ops[name].values) == 12
    assert ops[peers.MS_HYBRID].extra["over floor"] > 0
    if all(importlib.util.find_spec(module) for module in PEER_MODULES["sqlite-vec"]):
        assert skipped == []
        assert ops[peers.SQLITE_VEC].extra["recall_at_10"] == 1.0  # exact search
        assert ops[peers.MS_VECTOR].extra[f"over {peers.SQLITE_VEC}"] > 0
        assert ops[peers.MS_HYBRID].extra[f"over {peers.SQLITE_VEC_HYBRID}"] > 0
        assert len(ops[peers.SQLITE_VEC_HYBRID].values) == 12
    else:
        assert len(skipped) == 1 and skipped[0].startswith("sqlite-vec: skipped (pip install .[bench])")
    table = peers.render_goals(peers.goal_rows(figures))
    assert "| hydration + ranking ≤ 2 ms at 10k | not measured here" in table  # 300 memories: no 10k figures
    assert "| fresh `memsearch search`, hybrid ≤ 1.5× `import numpy` | not measured here" in table


@pytest.mark.timeout(60)
def test_a_missing_peer_package_is_skipped_never_fails(
    peers: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for modules in PEER_MODULES.values():
        for module in modules:
            monkeypatch.setitem(sys.modules, module, None)  # `import chromadb` raises ImportError
    figures, skipped = run(peers, tmp_path)
    assert [note.split(":")[0] for note in skipped] == list(PEER_MODULES)
    assert all("skipped (pip install .[bench])" in note for note in skipped)
    assert {fig.extra["peer_op"] for fig in figures} == {
        peers.MS_VECTOR,
        peers.MS_HYBRID,
        peers.MS_LEXICAL,
        peers.FLOOR,
        peers.MS_RANK,
    }


def test_goals_from_figures_give_ratios_and_whether_each_is_met(peers: ModuleType) -> None:
    figure = peers.bench.Figure

    def op(name: str, size: int, ms: float) -> Any:
        return figure(f"peers: {name}", "ms", [ms], extra={"peer_op": name, "size": size})

    goals = {
        goal.goal: goal
        for goal in peers.goal_rows(
            [
                op(peers.MS_VECTOR, 100000, 12.0),
                op(peers.CHROMA, 100000, 8.0),
                op(peers.MS_HYBRID, 10000, 9.0),
                op(peers.FLOOR, 10000, 4.0),
                op(peers.MS_LEXICAL, 10000, 3.0),
                op(peers.MS_VECTOR, 10000, 3.0),
            ]
        )
    }
    chroma = goals["vector mode at 100k within 2× Chroma's HNSW"]
    assert (chroma.ratio, chroma.met) == (1.5, True)
    floor = goals["in-process hybrid ≤ 1.5× the stop-word floor at 10k"]
    assert (floor.ratio, floor.met) == (2.25, False)
    legs = goals["hybrid within 1.5× of its vector and lexical legs' sum at 10k"]
    assert (legs.ratio, legs.met) == (1.5, True)
    assert goals["in-process hybrid ≤ 1.5× the stop-word floor at 100k"].met is None
    # a figure whose floor was not measured (bench.py's startup part skipped) is not judged alone
    cli = figure("CLI search --mode hybrid, 10k (process)", "s", [0.292])
    fresh = next(g for g in peers.goal_rows([cli]) if g.goal.startswith("fresh `memsearch search`, hybrid"))
    assert (fresh.figure, fresh.ratio, fresh.met) == (0.292, None, None)
    assert "| fresh `memsearch search`, hybrid ≤ 1.5× `import numpy` | not measured here" in peers.render_goals([fresh])
