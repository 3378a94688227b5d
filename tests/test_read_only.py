"""Reading does not need writing (issue 8, item 10): a store that cannot be written is searched,
and a search answers while another process holds a write transaction; recording access is best
effort, skipped with one note on stderr."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.errors import StoreUnavailableError
from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.retrieval.request import SearchRequest
from memsearch.store import open_store
from tests.conftest import T0

REPO = Path(__file__).resolve().parent.parent
MODEL = EmbeddingModelInfo("test-model", 3)
PR_CAPBSET_DROP = 24
# The capabilities that let root write where file modes say no: CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER.
ROOT_OVERRIDES = (1, 2, 3)


def _seed(location: Path | str) -> None:
    store = open_store(location, create=True)
    store.insert([NewMemory("The deploy key lives in the team vault", key="deploy")], None, None, T0)
    store.close()


def _lexical(location: Path | str) -> tuple[list[int], float]:
    """A plain (access-recording) lexical search: the ids found and the seconds it took."""
    started = time.monotonic()
    with Memsearch(location) as ms:
        outcome = ms.search(SearchRequest("deploy key", mode="lexical"))
    return [c.id for c in outcome.results], time.monotonic() - started


def _access_count(location: Path | str) -> int:
    store = open_store(location)
    try:
        return store.get_by_key("deploy").access_count
    finally:
        store.close()


@pytest.fixture
def lock_holder() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        process.stdin.close()  # type: ignore[union-attr]
        process.wait(timeout=10)


def _hold_sqlite_write_lock(path: Path, started: list[subprocess.Popen[str]]) -> None:
    """Another process that holds a write transaction (BEGIN IMMEDIATE) until its stdin closes: of
    the store and its access file, as memsearch's writers do (sqlite_access)."""
    script = (
        "import sqlite3, sys\n"
        f"db = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
        f"db.execute('ATTACH DATABASE ? AS access', ({str(path) + '-access'!r},))\n"
        "db.execute('BEGIN IMMEDIATE')\n"
        'db.execute("UPDATE memories SET importance = 0.9")\n'
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
        "db.execute('ROLLBACK')\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    started.append(process)
    assert process.stdout is not None and process.stdout.readline().strip() == "held"


def test_sqlite_search_answers_while_another_process_writes(
    db_path: Path, lock_holder: list[subprocess.Popen[str]], caplog: pytest.LogCaptureFixture
) -> None:
    _seed(db_path)
    _hold_sqlite_write_lock(db_path, lock_holder)
    with caplog.at_level(logging.WARNING, logger="memsearch"):
        found, seconds = _lexical(db_path)
    assert found == [1]
    assert seconds < 5, f"the search waited {seconds:.1f} s for the writer"
    notes = [r.getMessage() for r in caplog.records if "access not recorded" in r.getMessage()]
    assert len(notes) == 1 and "busy" in notes[0]


def test_sqlite_read_only_flag_searches_and_refuses_writes(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _seed(db_path)
    monkeypatch.setenv("MEMSEARCH_READ_ONLY", "1")
    with caplog.at_level(logging.WARNING, logger="memsearch"):
        with Memsearch(db_path) as ms:
            for _ in range(3):  # one note, however many searches
                assert [c.id for c in ms.search(SearchRequest("deploy key", mode="lexical")).results] == [1]
        notes = [r.getMessage() for r in caplog.records if "access not recorded" in r.getMessage()]
    assert len(notes) == 1 and "read-only" in notes[0]
    store = open_store(db_path)
    with pytest.raises(StoreUnavailableError, match="read-only"):
        store.insert([NewMemory("more")], None, None, T0)
    store.close()
    monkeypatch.delenv("MEMSEARCH_READ_ONLY")
    assert _access_count(db_path) == 0


def _without_root_overrides() -> None:
    """In the child before exec: drop from the bounding set the capabilities that let root ignore
    file modes, so the program run is refused writes as any user would be."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in ROOT_OVERRIDES:
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "cannot drop a capability")


def test_sqlite_store_in_a_read_only_folder_is_searched() -> None:
    """A store file and folder nobody may write (no WAL side files can be made): `search` answers
    with a note, `add` says why it cannot. As root, whom chmod does not stop, the CLI runs without
    the capabilities that override file modes."""
    root = os.geteuid() == 0
    folder = Path(tempfile.mkdtemp(prefix="ms-ro-"))  # not under pytest's 0700 folders: nobody must reach it
    try:
        store_dir = folder / "store"
        store_dir.mkdir()
        db = store_dir / "memsearch.db"
        _seed(db)
        assert not Path(f"{db}-wal").exists()
        db.chmod(0o444)
        store_dir.chmod(0o555)
        folder.chmod(0o755)
        env = {**os.environ, "MEMSEARCH_DB": str(db), "PYTHONPATH": str(REPO)}
        env.pop("MEMSEARCH_READ_ONLY", None)

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "memsearch", *args],
                capture_output=True,
                text=True,
                env=env,
                cwd=folder,
                preexec_fn=_without_root_overrides if root else None,
                timeout=120,
            )

        files = sorted(p.name for p in store_dir.iterdir())  # the store and its access file
        searched = cli("search", "--mode", "lexical", "-f", "json", "deploy key")
        assert searched.returncode == 0, searched.stderr
        assert "The deploy key lives" in searched.stdout
        assert searched.stderr.count("access not recorded") == 1
        added = cli("add", "another note")
        assert added.returncode == 1 and "read-only" in added.stderr
        assert files == ["memsearch.db", "memsearch.db-access"]
        assert sorted(p.name for p in store_dir.iterdir()) == files
    finally:
        for path in (folder, *folder.rglob("*")):
            path.chmod(0o700)
        shutil.rmtree(folder)


# -- PostgreSQL -------------------------------------------------------------------------------


def test_postgres_search_answers_while_another_connection_holds_its_rows(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    import psycopg

    _seed(pg_url)
    with psycopg.connect(pg_url) as writer:  # a transaction left open, as a long import's
        writer.execute("UPDATE memories SET importance = 0.9")
        with caplog.at_level(logging.WARNING, logger="memsearch"):
            found, seconds = _lexical(pg_url)
        writer.rollback()
    assert found == [1]
    assert seconds < 5, f"the search waited {seconds:.1f} s for the writer"
    assert sum("access not recorded" in r.getMessage() for r in caplog.records) == 1


def test_postgres_read_only_database_and_flag(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import psycopg

    _seed(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        name = admin.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
        admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
    with caplog.at_level(logging.WARNING, logger="memsearch"):
        assert _lexical(pg_url)[0] == [1]
    assert sum("access not recorded" in r.getMessage() for r in caplog.records) == 1
    store = open_store(pg_url)
    with pytest.raises(StoreUnavailableError, match="read-only"):
        store.insert([NewMemory("more")], None, None, T0)
    store.close()
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SET default_transaction_read_only = off")
        admin.execute(f"ALTER DATABASE {name} SET default_transaction_read_only = off")
    monkeypatch.setenv("MEMSEARCH_READ_ONLY", "1")
    assert _lexical(pg_url)[0] == [1]
    store = open_store(pg_url)
    with pytest.raises(StoreUnavailableError, match="read-only"):
        store.delete([1])
    store.close()
    monkeypatch.delenv("MEMSEARCH_READ_ONLY")
    assert _access_count(pg_url) == 0
