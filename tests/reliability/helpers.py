"""Shared by the reliability tests: run memsearch in real child processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def child_env(**extra: str) -> dict[str, str]:
    """The test's environment (MEMSEARCH_HOME, the shared MEMSEARCH_CACHE_DIR with the session's
    model export) with this checkout first on the import path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def run_cli(
    *args: str, input: str | bytes | None = None, timeout: float = 120, **env: str
) -> subprocess.CompletedProcess[bytes]:
    """`memsearch ARGS` in a child process, as a user runs it."""
    return subprocess.run(
        # Bytes, as a shell passes them: a lone surrogate becomes the invalid UTF-8 a user can type.
        [sys.executable, "-m", "memsearch", *(arg.encode("utf-8", "surrogatepass") for arg in args)],
        input=input.encode("utf-8", "surrogateescape") if isinstance(input, str) else input,
        capture_output=True,
        env=child_env(**env),
        timeout=timeout,
        check=False,
    )


def run_python(code: str, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        env=child_env(**env),
        timeout=timeout,
        check=False,
    )


def check_consistent(db: Path, acknowledged: set[str] | frozenset[str] = frozenset()) -> int:
    """The store's invariants: SQLite's integrity check passes, every memory has one FTS row and
    one vector and nothing else has, and every acknowledged key is stored once. Returns the
    number of memories."""
    from memsearch.store.sqlite_driver import sqlite3

    connection = sqlite3.connect(db)
    try:
        assert connection.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        # FTS5's own check of its index against its rows (raises if they disagree).
        connection.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
        ids = {row[0] for row in connection.execute("SELECT id FROM memories")}
        fts = {row[0] for row in connection.execute("SELECT rowid FROM memories_fts")}
        vectors = {row[0] for row in connection.execute("SELECT memory_id FROM vectors")}
        assert ids == fts == vectors, (len(ids), len(fts), len(vectors))
        keys = [row[0] for row in connection.execute("SELECT key FROM memories WHERE key IS NOT NULL")]
        assert len(keys) == len(set(keys)), "a key is stored twice"
        missing = set(acknowledged) - set(keys)
        assert not missing, f"{len(missing)} acknowledged keys lost, e.g. {sorted(missing)[:3]}"
        return len(ids)
    finally:
        connection.close()
