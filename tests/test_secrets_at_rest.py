"""Secrets at rest: a deleted memory's text leaves the store's files (the database, its full-text
index, the WAL), and every file memsearch writes in its data and cache folders is private (0600)
whatever the umask; a config.toml that holds an API key and others can read is warned about."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.embedding import Encoder
from memsearch.models import NewMemory
from memsearch.store.migrations import SCHEMA_VERSION

SECRET = "Hunter2Zebra99"


def files_holding(folder: Path, word: str) -> list[str]:
    """The files under `folder` whose bytes hold `word` (as UTF-8, any case: the index lowercases)."""
    found = []
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes().lower()
            if word.lower().encode() in data:
                found.append(path.name)
    return found


def test_a_deleted_memorys_text_is_in_no_file_of_the_store(db_path: Path, encoder: Encoder) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.add_many([NewMemory(f"ordinary note number {n} about the garden") for n in range(30)])
        secret = ms.add(NewMemory(f"the vault password is {SECRET}", key="vault", tags=("secret",))).id
        assert ms.search_many  # the store is open and written
        assert files_holding(db_path.parent, SECRET)  # the probe finds it while it is stored
        ms.delete([secret])
        assert not files_holding(db_path.parent, SECRET), "deleted text left in the open store's files"
    assert not files_holding(db_path.parent, SECRET)


def test_a_replaced_memorys_old_text_is_in_no_file_of_the_store(db_path: Path, encoder: Encoder) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.add(NewMemory(f"the vault password is {SECRET}", key="vault"))
        ms.add(NewMemory("the vault password was changed", key="vault"), replace=True)
    assert not files_holding(db_path.parent, SECRET)


def test_an_existing_store_loses_the_index_traces_of_earlier_deletes(db_path: Path, encoder: Encoder) -> None:
    """A store written before secure deletion keeps deleted words in old full-text segments; the
    migration merges the index, so they go on the first open by this version."""
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.add_many([NewMemory(f"ordinary note number {n}") for n in range(5)])
        secret = ms.add(NewMemory(f"the vault password is {SECRET}")).id
    with sqlite3.connect(db_path, isolation_level=None) as db:  # as a store of the previous version did
        db.execute("PRAGMA secure_delete = OFF")
        db.execute("BEGIN")
        db.execute("DELETE FROM memories WHERE id = ?", (secret,))
        db.execute("DELETE FROM memories_fts WHERE rowid = ?", (secret,))
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
        db.execute("COMMIT")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    held = sqlite3.connect(db_path).execute("SELECT count(*) FROM memories_fts_data WHERE instr(lower(block), ?)",
                                            (SECRET.lower().encode(),)).fetchone()[0]  # fmt: skip
    assert held, "the old way of deleting leaves the word in the index"
    with Memsearch(db_path, encoder=encoder) as ms:
        assert ms.stats()["memories"] == 5
    with sqlite3.connect(db_path) as db:
        data = db.execute("SELECT block FROM memories_fts_data").fetchall()
    assert not any(SECRET.lower().encode() in bytes(block) for (block,) in data if block)


# -- file modes ---------------------------------------------------------------------------------------


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def modes_under(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): oct(stat.S_IMODE(path.stat().st_mode))
        for path in folder.rglob("*")
        if path.is_file() or path.is_dir()
    }


@pytest.mark.usefixtures("open_umask")
def test_every_file_memsearch_writes_is_private_under_umask_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memsearch.embedding import load_encoder, resolve_model

    cache = tmp_path / "cache"
    home = tmp_path / "home"
    monkeypatch.setenv("MEMSEARCH_CACHE_DIR", str(cache))
    monkeypatch.setenv("MEMSEARCH_HOME", str(home))
    encoder = load_encoder(resolve_model(), "onnx")  # exports the model into the fresh cache
    with Memsearch(encoder=encoder) as ms:
        ms.add_many([NewMemory(f"note {n} about private files") for n in range(3)])
        ms.delete([1])
        ms.search_many  # noqa: B018 - the store is written
    for folder in (cache, home):
        modes = modes_under(folder)
        assert modes, folder
        loose = {
            name: mode for name, mode in modes.items() if mode != ("0o700" if (folder / name).is_dir() else "0o600")
        }
        assert not loose, f"{folder}: {loose}"
