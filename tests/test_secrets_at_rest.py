"""Secrets at rest: a deleted memory's text leaves the store's files (the database, its full-text
index, the WAL), and every file memsearch writes in its data and cache folders is private (0600)
whatever the umask; a config.toml that holds an API key and others can read is warned about."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.embedding import Encoder
from memsearch.models import NewMemory
from memsearch.retrieval.pipeline import SearchRequest
from memsearch.store.migrations import MIGRATIONS
from memsearch.store.sqlite_driver import SECURE_DELETE, sqlite3

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
        assert ms.stats()["memories"] == 31  # the store is open and written
        assert files_holding(db_path.parent, SECRET)  # the probe finds it while it is stored
        found = ms.search(SearchRequest(SECRET, mode="lexical")).results  # records the access
        assert [c.id for c in found] == [secret]
        ms.delete([secret])
        assert not files_holding(db_path.parent, SECRET), "deleted text left in the open store's files"
        access = sqlite3.connect(f"{db_path}-access")  # the record of accesses forgets it too
        assert access.execute("SELECT count(*) FROM accesses WHERE memory_id = ?", (secret,)).fetchone() == (0,)
        access.close()
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
        if SECURE_DELETE:  # FTS5's in-place delete off, as before
            db.execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', 0)")
        db.execute("DELETE FROM memories WHERE id = ?", (secret,))
        db.execute("DELETE FROM memories_fts WHERE rowid = ?", (secret,))
        merge = next(n for n, script in enumerate(MIGRATIONS) if "'optimize'" in script)
        db.execute(f"PRAGMA user_version = {merge}")  # the schema before the migration that merges the index
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


def assert_private(folder: Path) -> None:
    modes = modes_under(folder)
    assert modes, f"nothing was written in {folder}"
    loose = {name: mode for name, mode in modes.items() if mode != ("0o700" if (folder / name).is_dir() else "0o600")}
    assert not loose, f"{folder}: {loose}"


@pytest.mark.usefixtures("open_umask")
def test_every_file_memsearch_writes_is_private_under_umask_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoder: Encoder
) -> None:
    """The model cache (an export as an older version left it, the optimised copy onnxruntime
    writes beside it, the int8 model) and the store (its file, WAL and index) under umask 000."""
    from memsearch.embedding import resolve_model
    from memsearch.embedding.onnx import OnnxEncoder, export_dir
    from memsearch.paths import make_private_dirs

    spec = resolve_model()
    made = export_dir(spec)  # the session's export
    cache, home = tmp_path / "cache", tmp_path / "home"
    monkeypatch.setenv("MEMSEARCH_CACHE_DIR", str(cache))
    monkeypatch.setenv("MEMSEARCH_HOME", str(home))
    target = export_dir(spec)
    make_private_dirs(target)
    for name in ("model.onnx", "tokenizer.json", "manifest.json"):
        shutil.copyfile(made / name, target / name)
        (target / name).chmod(0o644)  # as exports were written before
    OnnxEncoder(spec, quantized=True)  # quantises, and saves the optimised copy of the int8 model
    fresh = OnnxEncoder(spec)  # saves the optimised copy of the model
    with Memsearch(encoder=fresh) as ms:
        ms.add_many([NewMemory(f"note {n} about private files") for n in range(3)])
        ms.delete([1])
        assert (home / "memsearch.db-wal").exists()  # the store is open, with its WAL and index
        assert_private(home)
    assert_private(cache)
    assert_private(home)


@pytest.mark.soak
@pytest.mark.timeout(3600)  # minutes of load by design
@pytest.mark.usefixtures("open_umask")
def test_a_model_export_is_private_under_umask_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The export itself (torch writes model.onnx), from scratch: about ten seconds."""
    from memsearch.embedding import resolve_model
    from memsearch.embedding.onnx import ensure_export

    monkeypatch.setenv("MEMSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    ensure_export(resolve_model())
    assert_private(tmp_path / "cache")


# -- the config file ------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "warned"), [(0o644, True), (0o640, True), (0o600, False)])
def test_a_config_file_with_an_api_key_that_others_can_read_is_warned_about(
    isolated_home: Path, mode: int, warned: bool
) -> None:
    from memsearch import config
    from tests.test_cli import run

    config._warned_about.clear()
    isolated_home.mkdir(parents=True, exist_ok=True)
    path = isolated_home / "config.toml"
    path.write_text('api_key = "s3cret-token"\n', encoding="utf-8")
    path.chmod(mode)
    stderr = run("stats").stderr
    lines = [line for line in stderr.splitlines() if "holds api_key" in line]
    assert len(lines) == (1 if warned else 0), stderr
    if warned:
        assert str(path) in lines[0] and "chmod 600" in lines[0] and "s3cret" not in stderr


def test_a_config_file_without_an_api_key_is_not_warned_about(isolated_home: Path) -> None:
    from memsearch import config
    from tests.test_cli import run

    config._warned_about.clear()
    isolated_home.mkdir(parents=True, exist_ok=True)
    (isolated_home / "config.toml").write_text("limit = 5\n", encoding="utf-8")
    (isolated_home / "config.toml").chmod(0o644)
    assert "holds api_key" not in run("stats").stderr
