"""The SQLite store's record of accesses lives in a file of its own (store.sqlite_access): a
search that records what it returned leaves the store's file as it was, so other connections keep
their page caches; every read sees the store's count plus the access file's, as before."""

from __future__ import annotations

import stat
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.store.sqlite import SQLiteStore
from memsearch.store.sqlite_access import access_path
from memsearch.store.sqlite_driver import sqlite3
from memsearch.timeutil import to_iso
from tests.conftest import T0

MODEL = EmbeddingModelInfo("test-model", 3)


@pytest.fixture
def store(db_path: Path) -> SQLiteStore:
    made = SQLiteStore.open(db_path, create=True)
    vectors = np.eye(3, dtype=np.float32)
    made.insert([NewMemory(f"note {n}", key=f"k{n}") for n in range(3)], vectors, MODEL, T0)
    return made


def test_recording_accesses_leaves_the_store_file_unchanged(store: SQLiteStore, db_path: Path) -> None:
    """Another connection's `data_version` moves when the store's file changes (its page cache is
    dropped then); recording accesses must not move it."""
    other = sqlite3.connect(db_path, isolation_level=None)
    before = other.execute("PRAGMA data_version").fetchone()[0]
    for n in range(5):
        store.touch([1, 2], T0 + timedelta(hours=n))
    assert other.execute("PRAGMA data_version").fetchone()[0] == before
    assert store.get(1).access_count == 5 and store.get(3).access_count == 0
    other.close()


def test_reads_see_the_stores_count_plus_the_access_files(store: SQLiteStore, db_path: Path) -> None:
    """A store whose memories carry counts of their own (recorded by an earlier memsearch, or
    copied in) adds the access file's to them; the later time of the two is the last access."""
    with store.transaction():
        store._db.execute("UPDATE memories SET access_count = 4, last_accessed_at = ? WHERE id = 1",
                          (to_iso(T0 + timedelta(days=3)),))  # fmt: skip
    store.touch([1, 2], T0 + timedelta(days=1))
    one, two = store.get(1), store.get(2)
    assert (one.access_count, one.last_accessed_at) == (5, T0 + timedelta(days=3))
    assert (two.access_count, two.last_accessed_at) == (1, T0 + timedelta(days=1))
    assert {m.id: m.access_count for m in store.list()} == {1: 5, 2: 1, 3: 0}
    assert store.get_many([1, 2])[1] == one
    exported = {e.memory.id: e.memory for e in store.export()}
    assert exported[1] == one and exported[2] == two
    store.close()
    again = SQLiteStore.open(db_path)  # another process's view
    assert again.get(1) == one
    again.close()


def test_the_access_file_is_private_and_forgets_deleted_memories(store: SQLiteStore, db_path: Path) -> None:
    store.touch([1, 2], T0)
    assert stat.S_IMODE(access_path(db_path).stat().st_mode) == 0o600
    store.delete([2])
    rows = store._db.execute("SELECT memory_id FROM access.accesses").fetchall()
    assert rows == [(1,)]


def test_a_memory_rewritten_in_place_restarts_its_clock_and_keeps_its_count(store: SQLiteStore) -> None:
    store.touch([1], T0 + timedelta(days=30))
    store.insert([NewMemory("note one, rewritten", key="k0")], np.eye(3, dtype=np.float32)[:1], MODEL,
                 T0 + timedelta(days=1), replace=True)  # fmt: skip
    rewritten = store.get(1)
    assert rewritten.access_count == 1
    assert rewritten.last_accessed_at < T0 + timedelta(days=30)  # the store's row says (as before)


def test_an_access_file_left_by_another_store_is_not_counted(store: SQLiteStore, db_path: Path) -> None:
    store.touch([1, 2], T0)
    store.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
    anew = SQLiteStore.open(db_path, create=True)  # a new store at the same path: ids start at 1 again
    anew.insert([NewMemory("another note")], np.eye(3, dtype=np.float32)[:1], MODEL, T0)
    assert anew.get(1).access_count == 0
    anew.touch([1], T0)
    assert anew.get(1).access_count == 1
    anew.close()


def test_a_read_only_store_reads_the_access_file(store: SQLiteStore, db_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    store.touch([1], T0)
    store.close()
    monkeypatch.setenv("MEMSEARCH_READ_ONLY", "1")
    reader = SQLiteStore.open(db_path)
    assert reader.read_only and reader.get(1).access_count == 1
    reader.touch([1], T0)  # not recorded, not an error
    assert reader.get(1).access_count == 1
    reader.close()


def test_a_planted_access_file_is_neither_followed_nor_read(db_path: Path) -> None:
    """Beside a store in a folder others may write, a link planted where the access file goes is
    not followed (the file it names stays as it was) and accesses are not recorded."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    victim = db_path.parent / "victim.txt"
    victim.write_text("mine")
    access_path(db_path).symlink_to(victim)
    store = SQLiteStore.open(db_path, create=True)
    store.insert([NewMemory("note")], np.eye(3, dtype=np.float32)[:1], MODEL, T0)
    store.touch([1], T0)
    assert store.get(1).access_count == 0
    store.close()
    assert victim.read_text() == "mine" and access_path(db_path).is_symlink()
