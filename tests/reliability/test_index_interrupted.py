"""`memsearch index` stopped at any moment keeps every file it committed: killed (`kill -9`) or
interrupted (Ctrl-C, SIGINT) in a real process, synchronised by polling the store (bounded), then
checked: the store is consistent (the state claims exactly the files whose memories are there),
those files are found by their words, and a second run stores and embeds the rest, ending equal
to a fresh index."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memsearch.api import Memsearch
from memsearch.embedding import Encoder
from memsearch.retrieval.request import request_from_fields
from memsearch.store.sqlite_driver import sqlite3

FILES = 120
DEADLINE = 120.0  # seconds: every wait is bounded


def make_notes(folder: Path) -> None:
    for n in range(FILES):
        path = folder / f"topic{n:03d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"# Topic {n}\n\nThe codeword of this note is zqx{n}word, kept for the audit.\n\n"
            f"## Details {n}\n\nSection two of note {n} talks about shelf {n % 7} and bin {n % 11}.\n",
            encoding="utf-8",
        )


def start(db: Path, *args: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "memsearch", "index", *args, "--db", str(db), "--progress", "json"]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_memories(db: Path, process: subprocess.Popen[str]) -> int:
    """Poll the store (read only) until some files' memories are committed; how many memories."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before any file was seen committed"
        if db.exists():
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as connection:
                    (count,) = connection.execute("SELECT count(*) FROM memories").fetchone()
                if count:
                    return int(count)
            except sqlite3.OperationalError:  # not migrated yet
                pass
        time.sleep(0.005)
    raise AssertionError("no memory was committed in time")


def consistent(db: Path) -> tuple[set[str], dict[str, Any]]:
    """Check the store after the stop; the files its state claims, and the state."""
    with sqlite3.connect(db) as connection:
        assert connection.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        state = json.loads(connection.execute("SELECT value FROM meta WHERE key = 'notes_index'").fetchone()[0])
        keys = {key for (key,) in connection.execute("SELECT key FROM memories")}
        (memories,) = connection.execute("SELECT count(*) FROM memories").fetchone()
        (vectors,) = connection.execute("SELECT count(*) FROM vectors").fetchone()
        (pending,) = connection.execute("SELECT count(*) FROM pending_vectors").fetchone()
    claimed = set(state["files"])
    named = {key for record in state["files"].values() for key in record["chunks"]}
    assert all(record["size"] >= 0 and record["sha256"] for record in state["files"].values())  # none half-done
    assert keys == named  # every memory belongs to a claimed file, and every claimed file is whole
    assert vectors + pending == memories  # each memory has its vector or waits for it
    return claimed, state


def fresh_copy(tmp_path: Path, folder: Path, encoder: Encoder) -> list[tuple[Any, ...]]:
    with Memsearch(tmp_path / "fresh.db", encoder=encoder) as fresh:
        fresh.index([folder], vectors=False)
        return sorted((m.key, m.text, m.metadata, m.created_at, m.tags) for m in fresh.list())


def finish_and_compare(db: Path, tmp_path: Path, folder: Path, encoder: Encoder, claimed: set[str]) -> None:
    resumed = subprocess.run(
        [sys.executable, "-m", "memsearch", "index", "--db", str(db), "--format", "json", "--progress", "none"],
        capture_output=True, text=True, timeout=DEADLINE,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    outcome = json.loads(resumed.stdout)
    # exactly what was left: the files not stored are new (never "changed"), the stored ones unchanged
    assert outcome["files"]["new"] == FILES - len(claimed) and outcome["files"]["changed"] == 0
    assert outcome["files"]["unchanged"] == len(claimed) and outcome["vectors_pending"] == 0
    with Memsearch(db, encoder=encoder) as ms:
        store = ms.store()
        assert store.pending_count() == 0 and store.vector_count() == ms.count() == 2 * FILES
        final = sorted((m.key, m.text, m.metadata, m.created_at, m.tags) for m in ms.list())
    assert final == fresh_copy(tmp_path, folder, encoder)


def found_by_words(db: Path, encoder: Encoder, claimed: set[str]) -> None:
    with Memsearch(db, encoder=encoder) as ms:
        for path in sorted(claimed)[:5]:
            n = int(Path(path).stem.removeprefix("topic"))
            [top] = ms.search(request_from_fields(f"zqx{n}word", k=1, mode="lexical")).results
            assert top.memory.metadata["path"] == path


@pytest.mark.timeout(600)  # two real index runs with the model, a fresh index, on a loaded machine
def test_kill_9_keeps_every_file_committed(tmp_path: Path, encoder: Encoder) -> None:
    folder, db = tmp_path / "notes", tmp_path / "store.db"
    make_notes(folder)
    process = start(db, str(folder))
    try:
        wait_for_memories(db, process)
        process.send_signal(signal.SIGKILL)
        process.wait(DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(DEADLINE)
    assert process.returncode == -signal.SIGKILL
    claimed, _ = consistent(db)
    assert claimed  # some files were done when it died
    found_by_words(db, encoder, claimed)
    finish_and_compare(db, tmp_path, folder, encoder, claimed)


@pytest.mark.timeout(600)
def test_ctrl_c_exits_130_saying_what_was_kept(tmp_path: Path, encoder: Encoder) -> None:
    folder, db = tmp_path / "notes", tmp_path / "store.db"
    make_notes(folder)
    process = start(db, str(folder))
    try:
        wait_for_memories(db, process)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(DEADLINE)
    assert process.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if not line.startswith("{")]  # the JSON progress lines aside
    assert len(lines) == 1, stderr
    said = re.fullmatch(
        r"memsearch: interrupted: kept (\d+) of (\d+) files \((\d+) chunks stored\), (\d+) vectors? made"
        r"(?:; (\d+) memor(?:y waits|ies wait) for vectors)?; `memsearch index` finishes the rest",
        lines[0],
    )
    assert said, lines[0]
    claimed, _ = consistent(db)
    assert int(said[2]) == FILES and int(said[1]) <= len(claimed)  # what it says is kept, is
    with Memsearch(db, encoder=encoder) as ms:
        assert int(said[3]) <= ms.count() and int(said[4]) <= ms.store().vector_count()
    found_by_words(db, encoder, claimed)
    finish_and_compare(db, tmp_path, folder, encoder, claimed)


@pytest.fixture(autouse=True)
def _no_stray_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The subprocesses inherit the test's isolated home (conftest) and nothing that forces colour."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    assert os.environ.get("MEMSEARCH_HOME")
