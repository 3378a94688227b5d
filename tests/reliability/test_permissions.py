"""Every folder memsearch creates is owner-only, intermediate ones too, whatever the umask
(issue 9, item 10)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsearch.embedding import ModelSpec
from memsearch.embedding.onnx import ensure_export
from memsearch.errors import EmbeddingError
from memsearch.store.sqlite import SQLiteStore


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_store_folders_and_file_are_owner_only(tmp_path: Path, open_umask: None) -> None:
    db = tmp_path / "a" / "b" / "c" / "memsearch.db"
    SQLiteStore.open(db, create=True).close()
    for folder in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "c"):
        assert _mode(folder) == 0o700, folder
    assert _mode(db) == 0o600


def test_model_cache_folders_are_owner_only(tmp_path: Path, open_umask: None, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "x" / "y" / "cache"
    monkeypatch.setenv("MEMSEARCH_CACHE_DIR", str(cache))
    model = tmp_path / "not-a-model"
    model.mkdir()
    (model / "config.json").write_text("{ not json")
    with pytest.raises(EmbeddingError):  # the export fails, but only after making its folders
        ensure_export(ModelSpec("broken", model))
    for folder in (tmp_path / "x", tmp_path / "x" / "y", cache, cache / "onnx"):
        assert _mode(folder) == 0o700, folder
