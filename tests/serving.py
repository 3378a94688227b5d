"""Helpers of the server tests: `memsearch serve` (or `memsearch mcp --http`) as a real
subprocess, and a plain HTTP client that sends the server's token unless told otherwise."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

START_TIMEOUT_S = 90
AS_SERVED = "as served"  # a request's default token: the one the server made at start, if it made one


@dataclass
class Reply:
    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    url: str
    db: Path
    stderr_path: Path
    token: str | None = None  # the token the server made at start (from its discovery file)

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 80

    def request(
        self,
        method: str,
        path: str,
        body: bytes | str | dict[str, Any] | None = None,
        *,
        token: str | None = AS_SERVED,
        host: str = "127.0.0.1",
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """`token`: the server's own by default; None sends none (nor does a given Authorization header)."""
        return self.reply(self.send(method, path, body, token=token, host=host, headers=headers))

    def send(
        self,
        method: str,
        path: str,
        body: bytes | str | dict[str, Any] | None = None,
        *,
        token: str | None = AS_SERVED,
        host: str = "127.0.0.1",
        headers: dict[str, str] | None = None,
    ) -> http.client.HTTPConnection:
        """The first half of `request`: the request sent, its connection open for `reply`."""
        connection = http.client.HTTPConnection(host, self.port, timeout=60)
        sent = dict(headers or {})
        if token == AS_SERVED:
            token = None if "Authorization" in sent else self.token
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        if isinstance(body, dict):
            body = json.dumps(body)
            sent["Content-Type"] = "application/json"
        try:
            connection.request(method, path, body=body.encode() if isinstance(body, str) else body, headers=sent)
        except BaseException:
            connection.close()
            raise
        return connection

    @staticmethod
    def reply(connection: http.client.HTTPConnection) -> Reply:
        """The reply on a connection from `send`, which it closes."""
        try:
            response = connection.getresponse()
            return Reply(response.status, response.read(), dict(response.getheaders()))
        finally:
            connection.close()

    def wait_read(self, connection: http.client.HTTPConnection, timeout: float = 60) -> None:
        """Until the server has read every byte sent on `connection` (a request from `send`): the
        request is then in flight, its headers parsed. Linux's /proc/net/tcp shows both ends of
        the connection: ours with nothing left to send, the server's with nothing left unread."""
        table = Path("/proc/net/tcp")
        if not table.exists():
            pytest.skip("no /proc/net/tcp here")
        assert connection.sock is not None
        ours = connection.sock.getsockname()[1]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            queues = {}  # (local port, remote port): (bytes to send, bytes unread)
            for line in table.read_text().splitlines()[1:]:
                fields = line.split()
                local, remote, (to_send, unread) = fields[1], fields[2], fields[4].split(":")
                queues[int(local.split(":")[1], 16), int(remote.split(":")[1], 16)] = (
                    int(to_send, 16),
                    int(unread, 16),
                )
            if queues.get((ours, self.port), (1, 0))[0] == 0 and queues.get((self.port, ours), (0, 1))[1] == 0:
                return
            assert self.process.poll() is None, f"the server exited: {self.stderr()}"
            time.sleep(0.01)
        raise AssertionError(f"the server did not read the request in {timeout} s")

    def stop(self, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(timeout=timeout)

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


def server_env(**extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name != "MEMSEARCH_API_KEY"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


COMMANDS = {"serve": ["serve"], "mcp": ["mcp", "--http"]}


def start_server(db: Path, *args: str, env: dict[str, str] | None = None, kind: str = "serve", **popen: Any) -> Served:
    """`memsearch serve --port 0` (`kind="mcp"`: `memsearch mcp --http --port 0`) on the store;
    returns once its discovery file (beside the store, or in the runtime dir) names its URL (and
    the token it made). `popen` goes to the child's Popen (a `preexec_fn` that sets a resource
    limit or a signal's disposition)."""
    from memsearch.discovery import discovery_paths

    db.parent.mkdir(parents=True, exist_ok=True)
    discoveries = discovery_paths(db, kind)
    for discovery in discoveries:
        discovery.unlink(missing_ok=True)
    stderr_path = db.parent / f"{kind}.stderr"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "memsearch", *COMMANDS[kind], "--db", str(db), "--port", "0", *args],
            env=env or server_env(),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            **popen,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"serve exited with {process.returncode}: {stderr_path.read_text()}")
        for discovery in discoveries:
            try:
                document = json.loads(discovery.read_text())
                return Served(process, document["url"], db, stderr_path, document.get("token"))
            except (OSError, ValueError, KeyError):
                pass
        time.sleep(0.05)
    process.kill()
    raise AssertionError(f"serve did not start in {START_TIMEOUT_S} s: {stderr_path.read_text()}")
