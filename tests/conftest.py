"""Shared fixtures. Every test runs with MEMSEARCH_HOME in a temporary folder, so none touches
the real user dirs; the ONNX export of the bundled model is made once per test session."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.embedding import Encoder, load_encoder, resolve_model

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("MEMSEARCH_HOME", str(home))
    monkeypatch.setenv("MEMSEARCH_CACHE_DIR", str(model_cache))
    for name in ("MEMSEARCH_DB", "MEMSEARCH_MODEL", "MEMSEARCH_ENCODER", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture(scope="session")
def encoder(model_cache: Path) -> Encoder:
    """The real bundled model on the fast route (exported into the session cache)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMSEARCH_CACHE_DIR", str(model_cache))
        return load_encoder(resolve_model(), "onnx")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "memsearch.db"


@pytest.fixture
def ms(db_path: Path, encoder: Encoder) -> Iterator[Memsearch]:
    with Memsearch(db_path, encoder=encoder) as instance:
        yield instance
