"""Exit codes under pipes and Ctrl-C (issue 8, item 9), in real child processes: a reader that goes
away (`| head -1`) is a success with nothing on stderr; SIGINT prints one line and exits 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memsearch.embedding import Encoder
from tests.reliability.helpers import child_env, run_cli

LONG = "x" * 4000  # some 200 KB of output in all: more than a pipe holds, so the writer meets the closed end


@pytest.fixture
def db(tmp_path: Path, encoder: Encoder) -> Path:
    path = tmp_path / "m.db"
    lines = "".join(json.dumps({"text": f"note {n} {LONG}", "key": f"k{n}"}) + "\n" for n in range(50))
    assert run_cli("import", "-", "--db", str(path), input=lines).returncode == 0
    return path


@pytest.mark.parametrize(
    ("command", "env"),
    [
        ("list -f jsonl -n 0", {}),
        ("list -f json -n 0", {}),
        ("list -n 0", {}),  # plain lines
        ("list -n 0", {"TTY_COMPATIBLE": "1", "COLUMNS": "80"}),  # a Rich table
        ("search note -k 50 -f jsonl --mode lexical", {}),
        ("search note -k 50 --raw --mode lexical", {"TTY_COMPATIBLE": "1"}),
    ],
)
def test_a_closed_pipe_is_success(db: Path, command: str, env: dict[str, str]) -> None:
    pipeline = f"set -o pipefail; {sys.executable} -m memsearch {command} --db {db} | head -1 >/dev/null"
    done = subprocess.run(["bash", "-c", pipeline], capture_output=True, env=child_env(**env), timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""


@pytest.mark.parametrize("command", [["--help"], ["search", "--help"], ["--version"]])
def test_help_into_a_closed_pipe_is_success(command: list[str]) -> None:
    """The reader is gone before the child writes a byte (no race with how much it prints)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "memsearch", *command], stdout=write_end, stderr=subprocess.PIPE,
            env=child_env(), timeout=120, check=False,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, b"")


def _as_from_a_terminal() -> None:
    """Ctrl-C's default in the child: a suite started in the background by a non-interactive
    shell inherits SIGINT ignored, and Python then installs no handler for it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_reading_stdin(child: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Until the child sits in read(0, …): past start-up, inside the command."""
    syscall = Path(f"/proc/{child.pid}/syscall")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            fields = syscall.read_text().split()
        except OSError:
            pytest.skip("no /proc/PID/syscall here")
        if fields[:2] == ["0", "0x0"]:  # read(2) on file descriptor 0
            return
        assert child.poll() is None, child.communicate(timeout=10)
        time.sleep(0.05)
    raise AssertionError("the child never read its stdin")


def _wait_holding_open(child: subprocess.Popen[bytes], path: Path, timeout: float = 120) -> None:
    """Until the child has `path` open: past start-up, inside the command."""
    folder = Path(f"/proc/{child.pid}/fd")
    if not folder.is_dir():
        pytest.skip("no /proc/PID/fd here")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if any(Path(os.readlink(fd)) == path.resolve() for fd in folder.iterdir()):
                return
        except OSError:  # a descriptor closed while we looked, or the child is gone (polled next)
            pass
        assert child.poll() is None, child.communicate(timeout=10)
        time.sleep(0.02)
    raise AssertionError(f"the child never opened {path}")


@pytest.mark.parametrize("command", [["import", "-"], ["search", "--queries", "-"]])
def test_ctrl_c_prints_one_line_and_exits_130(db: Path, command: list[str]) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "memsearch", *command, "--db", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
        preexec_fn=_as_from_a_terminal,
    )
    try:
        _wait_reading_stdin(child)
        child.send_signal(signal.SIGINT)
        # stdin stays open until the child has exited: closing it at once (communicate does) races
        # the signal with an end of input, which a loaded machine can deliver first
        child.wait(timeout=60)
        out, err = child.communicate(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130
    assert err.decode() == "memsearch: interrupted\n" and out == b""


def test_ctrl_c_during_an_import_stores_nothing(db: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    big.write_text("".join(json.dumps({"text": f"fact {n} about the deploy"}) + "\n" for n in range(20_000)))
    child = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "import", str(big), "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
        preexec_fn=_as_from_a_terminal,
    )
    # once the store is open: loading the model, parsing or embedding, each ends the same way
    _wait_holding_open(child, db)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err.decode()
    assert err.decode().splitlines()[-1] == "memsearch: interrupted" and "Traceback" not in err.decode()
    assert json.loads(run_cli("stats", "-f", "json", "--db", str(db)).stdout)["memories"] == 50
