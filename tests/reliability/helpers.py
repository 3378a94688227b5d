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
) -> subprocess.CompletedProcess:
    """`memsearch ARGS` in a child process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "memsearch", *args],
        input=input.encode("utf-8", "surrogateescape") if isinstance(input, str) else input,
        capture_output=True,
        env=child_env(**env),
        timeout=timeout,
        check=False,
    )


def run_python(code: str, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        env=child_env(**env),
        timeout=timeout,
        check=False,
    )
