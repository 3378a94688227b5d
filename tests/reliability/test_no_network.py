"""memsearch opens no network connection (issue 9, item 1).

onnxruntime's official builds upload telemetry from a background thread whose first DNS lookup
comes about 10 s after start, and write a device id under ~/.cache/Microsoft. A child process
that adds and searches for longer than that runs under `strace -f -e trace=network`; any socket
other than a unix one, or any connect to something other than a unix socket, fails the test.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memsearch.embedding import Encoder
from tests.reliability.helpers import child_env

RUN_SECONDS = 13  # onnxruntime's uploader makes its first lookup about 10 s in

_WORKLOAD = """
import sys, time
from memsearch.api import Memsearch
from memsearch.models import NewMemory
from memsearch.retrieval.request import SearchRequest
with Memsearch(sys.argv[1]) as ms:
    ms.add(NewMemory(text="the deploy script lives in tools/deploy.sh"))
    end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:
        ms.search(SearchRequest("where is the deploy script"))
        time.sleep(0.2)
print("ok")
"""

_SOCKET = re.compile(r"\bsocket\((\w+)")
_CONNECT = re.compile(r"\b(?:connect|sendto|sendmsg|bind)\(\d+, \{sa_family=(\w+)")
_LOCAL = {"AF_UNIX", "AF_LOCAL"}


def _strace_works() -> str | None:
    if shutil.which("strace") is None:
        return "strace is not installed (apt-get install strace)"
    probe = subprocess.run(
        ["strace", "-f", "-e", "trace=network", "true"], capture_output=True, check=False, timeout=60
    )
    if probe.returncode != 0:
        return f"strace cannot trace here: {probe.stderr.decode(errors='replace').strip()[:200]}"
    return None


def network_calls(trace: str) -> list[str]:
    """Lines of an strace log that reach beyond this machine's unix sockets."""
    bad = []
    for line in trace.splitlines():
        socket = _SOCKET.search(line)
        if socket and socket.group(1) not in _LOCAL:
            bad.append(line)
            continue
        connect = _CONNECT.search(line)
        if connect and connect.group(1) not in _LOCAL:
            bad.append(line)
    return bad


def test_the_detector_sees_a_lookup() -> None:
    """The check itself can fail: a resolver lookup is caught."""
    trace = "12 socket(AF_INET, SOCK_DGRAM|SOCK_CLOEXEC|SOCK_NONBLOCK, IPPROTO_IP) = 8\n"
    trace += '12 connect(8, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.0.0.53")}, 16) = 0\n'
    trace += "12 socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0) = 3\n"
    assert len(network_calls(trace)) == 2


@pytest.mark.timeout(600)  # a child that runs RUN_SECONDS under strace -f, which slows it several times
def test_a_long_running_process_makes_no_network_call_and_writes_no_telemetry(tmp_path: Path, encoder: Encoder) -> None:
    reason = _strace_works()
    if reason:
        pytest.skip(reason)
    home = tmp_path / "user-home"
    home.mkdir()
    log = tmp_path / "strace.log"
    done = subprocess.run(
        ["strace", "-f", "-e", "trace=network", "-o", str(log), sys.executable, "-c", _WORKLOAD,
         str(tmp_path / "store" / "m.db"), str(RUN_SECONDS)],
        capture_output=True,
        env=child_env(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache")),
        timeout=RUN_SECONDS + 120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    assert done.stdout.strip() == b"ok"
    assert network_calls(log.read_text(errors="replace")) == []
    assert not (home / ".cache" / "Microsoft").exists()
    assert list(home.rglob("*")) == []
