"""A killed first-run model export leaves a staging folder; the next export removes it, and only
it (issue 9, item 9). Folders memsearch makes are owner-only (item 10)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memsearch.embedding import resolve_model
from memsearch.embedding.onnx import STAGING_PREFIX, ensure_export, remove_stale_staging
from tests.reliability.helpers import child_env

_HOLD_STAGING = """
import sys, time
from pathlib import Path
from memsearch.embedding.onnx import new_staging
staging, lock = new_staging(Path(sys.argv[1]))
(staging / "model.onnx").write_bytes(b"x" * 1_000_000)
print(staging, flush=True)
time.sleep(600)
"""


def _start_export_stand_in(parent: Path) -> tuple[subprocess.Popen[str], Path]:
    child = subprocess.Popen(
        [sys.executable, "-c", _HOLD_STAGING, str(parent)], stdout=subprocess.PIPE, env=child_env(), text=True
    )
    assert child.stdout is not None
    return child, Path(child.stdout.readline().strip())


def test_staging_of_a_killed_export_is_removed_and_a_live_one_kept(tmp_path: Path) -> None:
    killed, killed_staging = _start_export_stand_in(tmp_path)
    live, live_staging = _start_export_stand_in(tmp_path)
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(timeout=30)
        legacy_old = tmp_path / f"{STAGING_PREFIX}legacy-old"  # an older memsearch's, no lock file
        legacy_old.mkdir()
        (legacy_old / "model.onnx").write_bytes(b"x")
        day_ago = time.time() - 86400
        os.utime(legacy_old, (day_ago, day_ago))
        legacy_young = tmp_path / f"{STAGING_PREFIX}legacy-young"
        legacy_young.mkdir()

        removed = remove_stale_staging(tmp_path)

        assert sorted(removed) == sorted([killed_staging, legacy_old])
        assert not killed_staging.exists() and not legacy_old.exists()
        assert (live_staging / "model.onnx").is_file() and legacy_young.is_dir()
    finally:
        live.kill()
        live.wait(timeout=30)
    assert remove_stale_staging(tmp_path) == [live_staging]  # its lock went with the process


@pytest.mark.soak
@pytest.mark.timeout(3600)  # minutes of load by design
def test_a_real_export_killed_midway_is_cleaned_by_the_next(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole first run, twice: killed once staging exists, then run to the end."""
    cache = tmp_path / "a" / "b" / "cache"
    env = child_env(MEMSEARCH_CACHE_DIR=str(cache))
    code = "from memsearch.embedding import load_encoder, resolve_model; load_encoder(resolve_model(), 'onnx')"
    child = subprocess.Popen([sys.executable, "-c", code], env=env)
    deadline = time.monotonic() + 300
    while not list((cache / "onnx").glob(f"{STAGING_PREFIX}*/model.onnx")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    assert list((cache / "onnx").glob(f"{STAGING_PREFIX}*"))
    done = subprocess.run([sys.executable, "-c", code], env=env, timeout=600, check=False)
    assert done.returncode == 0
    assert list((cache / "onnx").glob(f"{STAGING_PREFIX}*")) == []
    for folder in (tmp_path / "a", tmp_path / "a" / "b", cache, cache / "onnx"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    monkeypatch.setenv("MEMSEARCH_CACHE_DIR", str(cache))
    assert (ensure_export(resolve_model()) / "manifest.json").is_file()
