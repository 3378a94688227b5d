"""Processes sharing a store (issue 9, item 2 and the suite): first use of a store that does not
exist yet, several processes upgrading an old store, and writers with readers, all checked for
lost or duplicated writes and for a consistent index."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from memsearch.embedding import Encoder
from memsearch.store.migrations import MIGRATIONS, SCHEMA_VERSION
from memsearch.store.sqlite_driver import sqlite3
from tests.reliability.helpers import check_consistent, child_env

pytestmark = pytest.mark.timeout(600)  # each test starts six to eight interpreters at once on 2 cores

# Says it is ready (a file in the go file's folder, once memsearch is imported), waits for the go
# file, so that all processes open the store at the same moment, then adds memories one call at a
# time and prints each key once it is acknowledged.
_WRITER = """
import os, sys, time
from pathlib import Path
from memsearch.api import Memsearch
from memsearch.models import NewMemory
db, go, name, count = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
(go.parent / f"ready-{os.getpid()}").touch()
while not go.exists():
    time.sleep(0.005)
with Memsearch(db) as ms:
    for i in range(count):
        key = f"{name}-{i}"
        ms.add(NewMemory(text=f"note {i} from writer {name} about deploy {i % 7}", key=key))
        print(key, flush=True)
"""

_READER = """
import os, sys, time
from pathlib import Path
from memsearch.api import Memsearch
from memsearch.retrieval.request import SearchRequest
db, go, stop = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
(go.parent / f"ready-{os.getpid()}").touch()
while not go.exists():
    time.sleep(0.005)
searches = 0
with Memsearch(db) as ms:
    while not stop.exists():
        try:
            ms.search(SearchRequest("deploy note", mode=("auto", "lexical", "vector")[searches % 3]))
        except Exception as error:
            if type(error).__name__ != "StoreNotFoundError":  # before the first writer made it
                raise
            time.sleep(0.01)
        searches += 1
print(searches, flush=True)
"""


def _start(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), text=True
    )


def _writers(db: Path, go: Path, processes: int, count: int) -> list[subprocess.Popen[str]]:
    return [_start(_WRITER, str(db), str(go), f"w{n}", str(count)) for n in range(processes)]


def _acknowledged(children: list[subprocess.Popen[str]], timeout: float = 300) -> set[str]:
    keys: set[str] = set()
    failures = []
    for child in children:
        out, err = child.communicate(timeout=timeout)
        keys.update(out.split())
        if child.returncode != 0:
            failures.append(err.strip().splitlines()[-1:] or [f"exit {child.returncode}"])
    assert not failures, failures
    return keys


def _let_them_import_then_go(go: Path, children: list[subprocess.Popen[str]], timeout: float = 300) -> None:
    """Once every child has imported memsearch and waits on the go file (each says so with a
    ready file beside it), touch the go file."""
    waiting = {child.pid: child for child in children}
    deadline = time.monotonic() + timeout
    while waiting:
        for pid, child in list(waiting.items()):
            if (go.parent / f"ready-{pid}").exists():
                del waiting[pid]
            elif child.poll() is not None:
                raise AssertionError(f"a child exited before it was ready: {child.communicate(timeout=10)}")
        assert time.monotonic() < deadline, f"{len(waiting)} of {len(children)} children not ready in {timeout} s"
        time.sleep(0.01)
    go.touch()


def test_eight_processes_creating_the_same_new_store_all_succeed(tmp_path: Path, encoder: Encoder) -> None:
    db = tmp_path / "deep" / "new" / "memsearch.db"
    go = tmp_path / "go"
    children = _writers(db, go, processes=8, count=5)
    _let_them_import_then_go(go, children)
    keys = _acknowledged(children)
    assert len(keys) == 40
    assert check_consistent(db, keys) == 40


def _schema_2_store(path: Path) -> None:
    db = sqlite3.connect(path)
    for number, script in enumerate(MIGRATIONS[:2], start=1):
        db.executescript(script)
        db.execute(f"PRAGMA user_version = {number}")
    db.execute("PRAGMA application_id = 1297306179")
    db.commit()
    db.close()


def test_several_processes_upgrading_an_old_store_all_succeed(tmp_path: Path, encoder: Encoder) -> None:
    db = tmp_path / "old.db"
    _schema_2_store(db)
    go = tmp_path / "go"
    children = _writers(db, go, processes=6, count=3)
    _let_them_import_then_go(go, children)
    keys = _acknowledged(children)
    assert len(keys) == 18
    assert check_consistent(db, keys) == 18
    (version,) = sqlite3.connect(db).execute("PRAGMA user_version").fetchone()
    assert version == SCHEMA_VERSION


def run_writers_and_readers(tmp_path: Path, writers: int, readers: int, per_writer: int) -> tuple[int, int]:
    """Writers and readers at once on a new store; returns (memories, searches)."""
    db = tmp_path / "store" / "memsearch.db"
    go, stop = tmp_path / "go", tmp_path / "stop"
    writing = _writers(db, go, writers, per_writer)
    reading = [_start(_READER, str(db), str(go), str(stop)) for _ in range(readers)]
    _let_them_import_then_go(go, writing + reading)
    try:
        keys = _acknowledged(writing, timeout=1800)
    finally:
        stop.touch()
    searches = 0
    for reader in reading:
        out, err = reader.communicate(timeout=120)
        assert reader.returncode == 0, err.strip().splitlines()[-1:]
        searches += int(out.split()[-1])
    assert len(keys) == writers * per_writer
    return check_consistent(db, keys), searches


def test_writers_and_readers_at_once_lose_nothing(tmp_path: Path, encoder: Encoder) -> None:
    memories, searches = run_writers_and_readers(tmp_path, writers=4, readers=2, per_writer=15)
    assert memories == 60
    assert searches > 0


@pytest.mark.soak
@pytest.mark.timeout(3600)  # minutes of load by design
def test_soak_writers_and_readers(tmp_path: Path, encoder: Encoder) -> None:
    start = time.monotonic()
    memories, searches = run_writers_and_readers(tmp_path, writers=8, readers=8, per_writer=100)
    elapsed = time.monotonic() - start
    print(f"soak: {memories} memories from 8 writers, {searches} searches by 8 readers, {elapsed:.0f} s")
    assert memories == 800
