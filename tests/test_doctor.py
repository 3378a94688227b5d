"""`memsearch doctor`: the store, the model and what would make search fail or slow, in one screen."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.doctor import EXACT_SEARCH_LIMIT, LARGE_WAL_BYTES, PROBLEM, WARNING, ModelState, store_findings
from memsearch.embedding import Encoder
from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.store.base import StoreHealth
from tests.conftest import T0

DATA = Path(__file__).parent / "data"
runner = CliRunner()
MODEL = ModelState("sentence-transformers/all-MiniLM-L6-v2", 384, "/cache/onnx/x", True)
HEALTHY = StoreHealth(
    backend="sqlite",
    schema_version=4,
    latest_schema_version=4,
    model=EmbeddingModelInfo(MODEL.name, 384),
    memories_by_kind={"note": 3},
    vectors=3,
    without_vector=0,
    fts_rows=3,
    view_vectors=0,
    integrity="ok",
    ann_index=False,
    wal_bytes=0,
    size_bytes=4096,
)


def levels(health: StoreHealth, model: ModelState | None = MODEL) -> dict[str, str]:
    return {f.name: f.level for f in store_findings(health, model) if f.level != "ok"}


def test_a_healthy_store_has_no_findings() -> None:
    assert levels(HEALTHY) == {}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"integrity": "row 3 missing from index memories_kind"}, {"integrity": PROBLEM}),
        ({"model": EmbeddingModelInfo("other-model", 768)}, {"model": PROBLEM}),
        ({"without_vector": 2, "vectors": 1}, {"vectors": WARNING}),
        ({"fts_rows": 2}, {"full-text index": PROBLEM}),
        ({"vectors": EXACT_SEARCH_LIMIT + 1}, {"vector search": WARNING}),
        ({"vectors": EXACT_SEARCH_LIMIT + 1, "ann_index": True}, {}),
        ({"wal_bytes": LARGE_WAL_BYTES + 1}, {"write-ahead log": WARNING}),
        ({"schema_version": 3}, {"schema": WARNING}),
        ({"backend": "postgresql", "fts_rows": 2, "wal_bytes": None}, {}),  # a text of punctuation has no postings
    ],
)
def test_each_finding(changes: dict[str, object], expected: dict[str, str]) -> None:
    from dataclasses import replace

    assert levels(replace(HEALTHY, **changes)) == expected  # type: ignore[arg-type]


def test_doctor_on_a_real_store(store_location: Path | str, encoder: Encoder) -> None:
    with Memsearch(store_location, encoder=encoder) as ms:
        ms.add(NewMemory("the deploy key lives in the vault", created_at=T0))
        ms.import_text((DATA / "chat_tiny.jsonl").read_text(encoding="utf-8"), source="chat.jsonl", fmt="chat")
        report = ms.doctor()
    assert report.ok and report.exists and report.health is not None
    assert dict(report.health.memories_by_kind) == {"note": 1, "session": 2, "turn": 4}
    assert report.health.vectors == 7 and report.health.without_vector == 0 and report.health.integrity == "ok"
    assert report.health.view_vectors > 0
    assert report.model is not None and report.model.exported and report.model.dim == 384
    assert {f.name: f.level for f in report.findings}["model"] == "ok"
    if isinstance(store_location, str):
        assert report.health.backend == "postgresql" and report.health.ann_index
    else:
        assert report.health.backend == "sqlite" and report.health.fts_rows == 7


def test_the_cli_renders_it_in_one_screen_and_as_json(encoder: Encoder) -> None:
    assert runner.invoke(app, ["add", "the deploy key lives in the vault"]).exit_code == 0
    table = runner.invoke(app, ["doctor"])
    assert table.exit_code == 0, table.stderr
    assert len(table.stdout.splitlines()) <= 24 and "quick_check" in table.stdout and "1 note" in table.stdout
    document = json.loads(runner.invoke(app, ["doctor", "-f", "json"]).stdout)
    assert document["ok"] is True and document["store"]["memories"] == {"note": 1}
    assert document["store"]["integrity"] == "ok" and document["model"]["exported"] is True


def test_no_store_yet_is_said_and_not_created(isolated_home: Path) -> None:
    result = runner.invoke(app, ["doctor", "-f", "json"])
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document["exists"] is False and document["findings"][0]["detail"].startswith("no store yet")
    assert not (isolated_home / "memsearch.db").exists()


def test_a_problem_exits_1(tmp_path: Path, encoder: Encoder) -> None:
    db = tmp_path / "m.db"
    with Memsearch(db, encoder=encoder) as ms:
        vectors = np.eye(1, 384, dtype=np.float32)
        ms.store(create=True).insert(
            [NewMemory("made by another model")], vectors, EmbeddingModelInfo("other", 384), T0
        )
    result = runner.invoke(app, ["doctor", "--db", str(db)])
    assert result.exit_code == 1 and "problem" in result.stdout and "reindex" in result.stdout
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(b"not a database at all" * 100)
    result = runner.invoke(app, ["doctor", "--db", str(damaged), "-f", "json"])
    assert result.exit_code == 1 and json.loads(result.stdout)["findings"][0]["level"] == "problem"


def test_a_store_made_on_the_int8_route_is_its_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The int8 route names its vectors "<model> (int8)": doctor resolves the same route as search,
    so such a store is healthy, and a full-precision store searched on the int8 route is not."""
    int8_db, fp32_db = tmp_path / "int8.db", tmp_path / "fp32.db"
    with Memsearch(fp32_db) as ms:
        ms.add(NewMemory("kept in full precision", created_at=T0))
    monkeypatch.setenv("MEMSEARCH_ENCODER", "onnx-int8")
    with Memsearch(int8_db) as ms:
        ms.add(NewMemory("kept in eight bits", created_at=T0))
        assert ms.doctor().model is not None
        assert {f.name: f.level for f in ms.doctor().findings}["model"] == "ok"
    with Memsearch(fp32_db) as ms:
        assert {f.name: f.level for f in ms.doctor().findings}["model"] == PROBLEM
    monkeypatch.delenv("MEMSEARCH_ENCODER")
    with Memsearch(int8_db) as ms:  # the store's recorded route, without the variable
        report = ms.doctor()
    assert report.ok and {f.name: f.level for f in report.findings}["model"] == "ok"
    assert report.model is not None and report.model.name.endswith("(int8)")
