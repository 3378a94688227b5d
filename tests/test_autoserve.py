"""A search kept warm between shell commands (issue 32): `memsearch serve --idle-exit SECONDS`
exits once idle, and autoserve (MEMSEARCH_AUTOSERVE, `autoserve` in config.toml) starts one on
first use that the next commands go through. Each wait is on an event (a file, a process's end)
with a bounded timeout."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.config import AUTOSERVE_IDLE_S, load_config
from memsearch.discovery import discovery_paths
from memsearch.embedding import Encoder
from memsearch.errors import ConfigError
from memsearch.models import NewMemory
from tests.serving import server_env, start_server

TIMEOUT_S = 90


def _store(path: Path, encoder: Encoder) -> Path:
    with Memsearch(path, encoder=encoder) as ms:
        ms.add(NewMemory("the deploy key is in the vault"))
        ms.add(NewMemory("lunch is at noon on fridays"))
    return path


def _wait_for_exit(pid: int, timeout: float = TIMEOUT_S) -> None:
    """Until process `pid` (not necessarily a child of ours) has ended, or fail after `timeout`."""
    try:
        descriptor = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # gone already
    try:
        readable, _, _ = select.select([descriptor], [], [], timeout)
        assert readable, f"pid {pid} still runs after {timeout} s"
    finally:
        os.close(descriptor)


def _advertised(db: Path, timeout: float = TIMEOUT_S) -> dict[str, object]:
    """The discovery file's document once the server has written it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in discovery_paths(db):
            try:
                document: dict[str, object] = json.loads(path.read_text())
                return document
            except (OSError, ValueError):
                pass
        time.sleep(0.05)
    raise AssertionError(f"no server of {db} advertised itself in {timeout} s")


def _memsearch(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memsearch", *args], env=env, capture_output=True, text=True, timeout=TIMEOUT_S
    )


def test_serve_exits_cleanly_once_idle(tmp_path: Path, encoder: Encoder) -> None:
    db = _store(tmp_path / "m.db", encoder)
    served = start_server(db, "--idle-exit", "2")
    try:
        assert served.request("GET", "/search?q=deploy+key&mode=lexical").status == 200  # a request restarts the clock
        assert served.process.wait(timeout=TIMEOUT_S) == 0
    finally:
        served.stop()
    assert "exits after 2 s without a request" in served.stderr()
    assert not any(path.exists() for path in discovery_paths(db))  # it withdrew its discovery file


def test_autoserve_starts_a_server_the_next_command_uses_and_that_stops_when_idle(
    tmp_path: Path, encoder: Encoder
) -> None:
    db = _store(tmp_path / "m.db", encoder)
    env = server_env(MEMSEARCH_AUTOSERVE="3", MEMSEARCH_HOME=str(tmp_path / "home"))
    search = ("--debug", "search", "deploy key", "--db", str(db), "-f", "json", "--no-touch", "--as-of", "2030-01-01")

    first = _memsearch(*search, env=env)
    assert first.returncode == 0, first.stderr
    started = re.search(r"started `memsearch serve` of .* \(pid (\d+)\), which exits after 3 s", first.stderr)
    assert started, first.stderr
    assert "through the server" not in first.stderr  # the first command searched in-process
    pid = int(started.group(1))
    try:
        advertised = _advertised(db)
        assert advertised["pid"] == pid
        url = str(advertised["url"])
        assert url.startswith("http://127.0.0.1:")  # loopback
        assert advertised["authenticated"] is True  # with the token it made at start, in an owner-only file
        (path,) = [p for p in discovery_paths(db) if p.exists()]
        assert path.stat().st_mode & 0o077 == 0

        second = _memsearch(*search, env=env)
        assert second.returncode == 0, second.stderr
        assert f"POST /search through the server at {url}" in second.stderr
        assert "started `memsearch serve`" not in second.stderr  # one server: the running one is used
        assert json.loads(second.stdout)["results"] == json.loads(first.stdout)["results"]

        _wait_for_exit(pid)  # idle for 3 s: it stops by itself
        assert not path.exists()
    finally:
        if pid_alive(pid):
            os.kill(pid, 15)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_autoserve_starts_nothing_for_a_store_that_is_not_there(tmp_path: Path) -> None:
    env = server_env(MEMSEARCH_AUTOSERVE="1", MEMSEARCH_HOME=str(tmp_path / "home"))
    missing = tmp_path / "missing.db"
    done = _memsearch("--debug", "search", "x", "--db", str(missing), "--mode", "lexical", env=env)
    assert done.returncode != 0
    assert "started `memsearch serve`" not in done.stderr
    assert not missing.exists()


@pytest.mark.parametrize(
    ("value", "idle"),
    [
        ("1", AUTOSERVE_IDLE_S),
        ("true", AUTOSERVE_IDLE_S),
        ("on", AUTOSERVE_IDLE_S),
        ("0", None),
        ("no", None),
        ("30", 30),
    ],
)
def test_the_autoserve_setting(value: str, idle: int | None) -> None:
    assert load_config({"MEMSEARCH_AUTOSERVE": value})["autoserve"] == idle


@pytest.mark.parametrize("value", ["1.5", "-3", "sometimes"])
def test_a_bad_autoserve_setting_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match="MEMSEARCH_AUTOSERVE: autoserve must be"):
        load_config({"MEMSEARCH_AUTOSERVE": value})


def test_autoserve_in_the_config_file() -> None:
    config = Path(os.environ["MEMSEARCH_HOME"]) / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("autoserve = 120\n")
    assert load_config({})["autoserve"] == 120
    config.write_text("autoserve = true\n")
    assert load_config({})["autoserve"] == AUTOSERVE_IDLE_S
