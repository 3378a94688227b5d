"""A full disk (issue 9, item 6): one clear message, nothing partial left behind, searches still
answer. Runs on a small tmpfs, which needs root (or the right to mount); skipped elsewhere."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsearch.embedding import Encoder
from tests.reliability.helpers import check_consistent, run_cli


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, timeout=60)


def fill(disk: Path) -> None:
    """Write filler files until the disk refuses another byte."""
    for name, chunk in (("filler", 65536), ("filler2", 1)):
        fd = os.open(disk / name, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * chunk)
        except OSError as error:
            assert error.errno == errno.ENOSPC
        finally:
            os.close(fd)


def _one_clear_line(done: subprocess.CompletedProcess[bytes]) -> str:
    err: str = done.stderr.decode()
    assert done.returncode == 1, err
    assert len(err.strip().splitlines()) == 1, err
    assert "disk" in err and "full" in err, err
    assert "internal error" not in err and "rollback" not in err, err
    return err


def test_a_new_store_on_a_full_disk_fails_cleanly_and_leaves_no_file(small_disk: Path, encoder: Encoder) -> None:
    fill(small_disk)
    db = small_disk / "memsearch.db"
    err = _one_clear_line(run_cli("add", "hello", "--db", str(db)))
    assert "free some space" in err
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler", "filler2"]


def test_an_import_on_a_full_disk_stores_nothing_and_searches_still_answer(
    small_disk: Path, encoder: Encoder, tmp_path: Path
) -> None:
    db = small_disk / "memsearch.db"
    assert run_cli("add", "the deploy script lives in tools/deploy.sh", "--db", str(db)).returncode == 0
    assert run_cli("add", "Alice drinks green tea", "--db", str(db)).returncode == 0
    lines = tmp_path / "many.jsonl"
    lines.write_text(
        "".join(json.dumps({"text": f"note {i}: " + "padding words " * 20}) + "\n" for i in range(40)),
        encoding="utf-8",
    )
    fill(small_disk)

    _one_clear_line(run_cli("import", str(lines), "--db", str(db)))

    for mode in ("auto", "lexical", "vector"):
        found = run_cli("search", "deploy script", "--mode", mode, "--format", "json", "--db", str(db))
        assert found.returncode == 0, found.stderr.decode()
        assert "tools/deploy.sh" in found.stdout.decode()
    (small_disk / "filler").unlink()
    assert check_consistent(db) == 2  # all or nothing: nothing of the import, nothing lost
