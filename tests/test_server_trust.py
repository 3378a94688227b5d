"""What the CLI trusts of a running `memsearch serve`, and that a server never locks local use out.

Real `memsearch serve` subprocesses (tests/serving.py); a discovery file planted by "another user"
names a tiny real HTTP server on loopback that records whatever it receives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsearch.discovery import discovery_path, discovery_paths, health
from memsearch.embedding import Encoder
from memsearch.models import NewMemory
from memsearch.timeutil import EARLIEST, LATEST
from tests.conftest import T0
from tests.serving import server_env, start_server

TOKEN = "s3cret-token-of-this-user"
PR_CAPBSET_DROP = 24


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private runtime dir per test (servers started here inherit it)."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    monkeypatch.delenv("MEMSEARCH_READ_ONLY", raising=False)
    return folder


# -- a recording HTTP server ----------------------------------------------------------------------


@dataclass
class Recorder:
    """A loopback HTTP server that answers /health as `health` says and records every request."""

    health: dict[str, Any]
    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> Recorder:
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                recorder.requests.append((self.command, self.path, dict(self.headers), body))
                document = recorder.health if self.path == "/health" else {"id": 99, "stored": True}
                payload = json.dumps(document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()

    def leaked(self) -> list[str]:
        """What went to it beyond a /health without our token."""
        return [
            f"{method} {path}"
            for method, path, headers, body in self.requests
            if (method, path) != ("GET", "/health") or TOKEN in headers.get("Authorization", "") or body
        ]


@pytest.fixture
def recorder(db_path: Path) -> Iterator[Recorder]:
    """Answers /health exactly as the real server of `db_path` would, with this process's pid."""
    started = Recorder({"status": "ok", "db": str(db_path), "pid": os.getpid()}).start()
    yield started
    started.stop()


def _plant(path: Path, url: str, pid: int, mode: int = 0o600, token: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"url": url, "pid": pid, "db": "x", "authenticated": token is not None, "token": token}))
    path.chmod(mode)
    return path


def _cli(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`memsearch ARGS` through Typer's runner, in this process (so with its uid and pid)."""
    from typer.testing import CliRunner

    from memsearch.cli.app import app

    result = CliRunner(env=env).invoke(app, list(args), input=input)
    return result.exit_code, result.stdout, result.stderr


def _run(*args: str, stdin: bytes = b"", **env: str) -> subprocess.CompletedProcess[bytes]:
    """`python -m memsearch ARGS` as a real process."""
    return subprocess.run(
        [sys.executable, "-m", "memsearch", *args], input=stdin, capture_output=True, env=server_env(**env), timeout=120
    )


def _texts(db: Path) -> list[str]:
    from memsearch.store import open_store

    store = open_store(db)
    try:
        return [memory.text for memory in store.list(limit=None)]
    finally:
        store.close()


# -- 1. what a discovery file must be to be trusted ---------------------------------------------


def _chown_to_another_user(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a file of another user needs root")
    os.chown(path, 65534, 65534)


PLANTED: dict[str, Callable[[Path], object]] = {
    "group-writable": lambda path: path.chmod(0o620),
    "world-writable": lambda path: path.chmod(0o606),
    "another user's": _chown_to_another_user,
    "in a folder others may write": lambda path: path.parent.chmod(0o777),
}


@pytest.mark.parametrize("case", PLANTED)
def test_a_discovery_file_others_could_have_written_is_ignored(
    case: str, db_path: Path, recorder: Recorder, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSEARCH_API_KEY", TOKEN)
    planted = _plant(discovery_path(db_path), recorder.url, os.getpid())
    PLANTED[case](planted)
    code, out, err = _cli("--debug", "add", "The payroll password is hunter2", "--db", str(db_path))
    assert code == 0, err
    assert recorder.requests == []  # neither the token nor the text, not even a /health
    assert _texts(db_path) == ["The payroll password is hunter2"] and out == "1\n"
    assert "not using a server" in err and "through the server" not in err


@pytest.mark.parametrize(
    "url",
    ["http://0.0.0.0:{port}", "https://127.0.0.1:{port}", "http://127.0.0.1", "http://example.invalid:{port}"],
)
def test_a_discovery_file_naming_no_loopback_http_url_is_ignored(
    url: str, db_path: Path, recorder: Recorder, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSEARCH_API_KEY", TOKEN)
    port = recorder.server.server_address[1]  # type: ignore[union-attr]
    _plant(discovery_path(db_path), url.format(port=port), os.getpid())
    code, out, err = _cli("--debug", "add", "The payroll password is hunter2", "--db", str(db_path))
    assert code == 0, err
    assert recorder.requests == [] and out == "1\n"
    assert "not an http:// URL on a loopback address" in err


def test_a_discovery_file_of_a_dead_process_is_ignored(
    db_path: Path, recorder: Recorder, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSEARCH_API_KEY", TOKEN)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, timeout=60
    )
    recorder.health["pid"] = int(dead.stdout)
    _plant(discovery_path(db_path), recorder.url, int(dead.stdout))
    code, _, err = _cli("--debug", "add", "one", "--db", str(db_path))
    assert code == 0 and recorder.requests == [] and "is gone" in err


CAP_KILL = 5


def _without_cap_kill() -> None:
    """In the child before exec: root that may not signal other users' processes (as any user)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_CAPBSET_DROP, CAP_KILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot drop CAP_KILL")


def test_a_discovery_file_naming_another_users_process_is_ignored(
    db_path: Path, recorder: Recorder, ms: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill(pid, 0) fails with EPERM for another user's process: alive, but not ours to trust."""
    ms.add(NewMemory("The deploy key lives in 1Password", created_at=T0))
    monkeypatch.setenv("MEMSEARCH_API_KEY", TOKEN)
    root = os.geteuid() == 0
    other = subprocess.Popen(["sleep", "60"], user=65534) if root else None
    pid = other.pid if other is not None else 1  # pid 1 is root's, another user's to a non-root user
    recorder.health["pid"] = pid
    _plant(discovery_path(db_path), recorder.url, pid)
    try:
        searched = subprocess.run(
            [sys.executable, "-m", "memsearch", "--debug", "search", "deploy", "-m", "lexical", "--db", str(db_path)],
            capture_output=True,
            text=True,
            env=server_env(MEMSEARCH_API_KEY=TOKEN),
            preexec_fn=_without_cap_kill if root else None,
            timeout=120,
        )
    finally:
        if other is not None:
            other.kill()
            other.wait(timeout=30)
    assert searched.returncode == 0, searched.stderr
    assert recorder.requests == [] and "1Password" in searched.stdout
    assert f"names pid {pid}, another user's process" in searched.stderr


@pytest.mark.parametrize(
    "health",
    [
        {"status": "ok"},  # says nothing of its store (as /health without the token may)
        {"status": "ok", "db": "/elsewhere/memsearch.db", "pid": "PID"},
        {"status": "ok", "db": "DB", "pid": 1},
    ],
)
def test_a_server_that_does_not_answer_for_this_store_is_not_used(
    health: dict[str, Any], db_path: Path, recorder: Recorder, encoder: Encoder
) -> None:
    recorder.health = {
        name: {"PID": os.getpid(), "DB": str(db_path)}.get(value, value) for name, value in health.items()
    }
    _plant(discovery_path(db_path), recorder.url, os.getpid())
    code, out, err = _cli("--debug", "add", "The payroll password is hunter2", "--db", str(db_path))
    assert code == 0, err
    assert [(method, path) for method, path, *_ in recorder.requests] == [("GET", "/health")]
    assert out == "1\n" and _texts(db_path) == ["The payroll password is hunter2"]


def test_another_stores_server_named_beside_this_store_is_not_used(tmp_path: Path, encoder: Encoder) -> None:
    """A discovery file of ours, beside store A, naming the live server of store B and its token
    (a copied folder, say): A's memories must not land in B."""
    a, b = tmp_path / "a" / "memsearch.db", tmp_path / "b" / "memsearch.db"
    served = start_server(b)
    try:
        _plant(discovery_path(a), served.url, served.process.pid, token=served.token)
        code, _, err = _cli("--debug", "add", "belongs to A", "--db", str(a))
        assert code == 0, err
        assert "serves" in err and "another store" in err and "through the server" not in err
        assert served.request("GET", "/stats").json()["memories"] == 0
    finally:
        assert served.stop() == 0
    assert _texts(a) == ["belongs to A"]


def test_a_real_server_of_the_store_is_used(db_path: Path, encoder: Encoder) -> None:
    served = start_server(db_path)
    try:
        code, out, err = _cli("--debug", "add", "through the server, please", "--db", str(db_path))
        assert code == 0 and out == "1\n" and "POST /add through the server" in err, err
    finally:
        assert served.stop() == 0


# -- 2. read-only refuses writes before any server call -----------------------------------------


def test_read_only_refuses_writes_even_with_a_server(db_path: Path, encoder: Encoder) -> None:
    served = start_server(db_path)
    try:
        assert served.request("POST", "/add", {"text": "already here"}).status == 200
        added = _run("--debug", "add", "must not be stored", "--db", str(db_path), MEMSEARCH_READ_ONLY="1")
        imported = _run(
            "--debug", "import", "-", "--db", str(db_path), stdin=b'{"text": "nor this"}\n', MEMSEARCH_READ_ONLY="1"
        )
        for refused in (added, imported):
            assert refused.returncode == 1, refused.stderr
            assert b"read-only" in refused.stderr and b"through the server" not in refused.stderr
        searched = _run("--debug", "search", "already", "--db", str(db_path), MEMSEARCH_READ_ONLY="1")
        assert searched.returncode == 0 and b"POST /search through the server" in searched.stderr
        assert served.request("GET", "/stats").json()["memories"] == 1
    finally:
        assert served.stop() == 0
    assert _texts(db_path) == ["already here"]


# -- 3. a token-protected server does not lock local use out ------------------------------------


def test_a_server_that_wants_a_token_leaves_local_use_in_process(db_path: Path, encoder: Encoder) -> None:
    served = start_server(db_path, env=server_env(MEMSEARCH_API_KEY=TOKEN))
    try:
        assert served.request("POST", "/add", {"text": "The deploy key lives in 1Password"}, token=TOKEN).status == 200
        code, out, err = _cli("search", "deploy key", "--db", str(db_path), "-f", "json")
        assert code == 0, err
        assert json.loads(out)["results"][0]["id"] == 1
        assert err.count("\n") == 1 and "wants a bearer token" in err and "in-process" in err
        for opt_out in (["--no-server"], ["--server", ""]):
            code, out, err = _cli("--debug", "search", "deploy key", "--db", str(db_path), "-f", "json", *opt_out)
            assert code == 0 and json.loads(out)["results"][0]["id"] == 1 and "server" not in err, err
        code, out, err = _cli("add", "a local note", "--db", str(db_path))
        assert code == 0 and out == "2\n" and "wants a bearer token" in err
        code, out, err = _cli("search", "local note", "--db", str(db_path), env={"MEMSEARCH_API_KEY": "another"})
        assert code == 0 and "a local note" in out and "wants a bearer token" in err  # a wrong key: the same
        # With the key, the same call goes through the server.
        code, out, err = _cli("--debug", "search", "deploy key", "--db", str(db_path), env={"MEMSEARCH_API_KEY": TOKEN})
        assert code == 0 and "POST /search through the server" in err, err
        # An explicit --server without the key is still an error: the user asked for that server.
        code, _, err = _cli("search", "deploy key", "--server", served.url)
        assert code == 1 and "bearer token" in err
    finally:
        assert served.stop() == 0


# -- 4. a server that does not answer -----------------------------------------------------------


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_explicit_server_that_does_not_answer_is_an_error(db_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    for command in (["search", "x"], ["add", "x"]):
        code, out, err = _cli("--debug", *command, "--db", str(db_path), "--server", url)
        assert code == 1 and out == "", err
        assert err.splitlines()[-1].startswith(f"memsearch: the server at {url} does not answer")
        assert "through the server" not in err
    assert not db_path.exists()  # nothing was done in-process either


def test_a_discovered_server_that_does_not_answer_is_passed_over_truthfully(db_path: Path, encoder: Encoder) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    _plant(discovery_path(db_path), url, os.getpid())  # ours, live (this process), but nothing listens
    code, out, err = _cli("add", "quietly in-process", "--db", str(db_path))
    assert (code, out, err) == (0, "1\n", "")
    code, out, err = _cli("--debug", "search", "quietly", "--db", str(db_path), "-f", "json")
    assert code == 0 and json.loads(out)["results"][0]["id"] == 1
    assert f"the server at {url} does not answer" in err and "working in-process" in err
    assert "through the server" not in err


# -- 5. a store in a folder the server cannot write ---------------------------------------------

ROOT_OVERRIDES = (1, 2, 3)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER


def _without_root_overrides() -> None:
    """In the child before exec: root without the capabilities that let it ignore file modes."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in ROOT_OVERRIDES:
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "cannot drop a capability")


def test_serve_on_a_read_only_folder_advertises_in_the_runtime_dir(
    db_path: Path, runtime_dir: Path, ms: Any, encoder: Encoder
) -> None:
    ms.add(NewMemory("The deploy key lives in 1Password", created_at=T0))
    ms.close()
    db_path.chmod(0o444)
    db_path.parent.chmod(0o555)
    try:
        served = start_server(db_path, preexec_fn=_without_root_overrides if os.geteuid() == 0 else None)
        try:
            beside, in_runtime = discovery_paths(db_path)
            assert not beside.exists() and in_runtime.parent.parent == runtime_dir
            assert in_runtime.stat().st_mode & 0o777 == 0o600 and in_runtime.parent.stat().st_mode & 0o777 == 0o700
            code, out, err = _cli("--debug", "search", "deploy key", "--db", str(db_path), "-f", "json")
            assert code == 0 and "POST /search through the server" in err, err
            assert json.loads(out)["results"][0]["id"] == 1
        finally:
            assert served.stop() == 0
        assert not in_runtime.exists()
    finally:
        db_path.parent.chmod(0o700)


# -- 6. one server per store --------------------------------------------------------------------


def test_a_second_server_on_the_same_store_is_refused(db_path: Path, encoder: Encoder) -> None:
    first = start_server(db_path)
    try:
        second = subprocess.run(
            [sys.executable, "-m", "memsearch", "serve", "--db", str(db_path), "--port", "0"],
            capture_output=True,
            text=True,
            env=server_env(),
            timeout=60,
        )
        assert second.returncode == 1
        assert second.stderr.strip().splitlines() == [
            f"memsearch: {db_path} is served already at {first.url} (pid {first.process.pid}); "
            "use that server, or stop it first"
        ]
        assert json.loads(discovery_path(db_path).read_text())["pid"] == first.process.pid
        code, _, err = _cli("--debug", "search", "anything", "--db", str(db_path))
        assert code == 0 and "through the server" in err
    finally:
        assert first.stop() == 0
    assert not discovery_path(db_path).exists()


def test_a_stale_discovery_file_does_not_stop_a_server(db_path: Path, encoder: Encoder) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, timeout=60
    )
    stale = {"url": f"http://127.0.0.1:{_closed_port()}", "pid": int(dead.stdout), "authenticated": False}
    db_path.parent.mkdir(parents=True)
    discovery_path(db_path).write_text(json.dumps(stale))
    process = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "serve", "--db", str(db_path), "--port", "0"],
        env=server_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 90
        while json.loads(discovery_path(db_path).read_text())["pid"] != process.pid:
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        document = json.loads(discovery_path(db_path).read_text())
        assert health(document["url"], document["token"], timeout=30)["pid"] == process.pid  # SIGTERM handled from here
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0, process.stderr.read() if process.stderr else ""
    assert not discovery_path(db_path).exists()


# -- 7. invalid UTF-8 gives the same words through the server as in-process ---------------------


def test_invalid_utf8_gets_the_same_message_with_and_without_the_server(db_path: Path, encoder: Encoder) -> None:
    inputs = [("add", "-"), ("import", "-")]
    stdins = [b"\xff", b'{"text": "caf\xe9"}\n']
    alone = [_run(*command, "--db", str(db_path), stdin=stdin) for command in inputs for stdin in stdins]
    served = start_server(db_path)
    try:
        through = [_run(*command, "--db", str(db_path), stdin=stdin) for command in inputs for stdin in stdins]
    finally:
        assert served.stop() == 0
    for before, after in zip(alone, through, strict=True):
        assert after.returncode == before.returncode != 0
        assert after.stderr == before.stderr and b"internal error" not in after.stderr
    assert not db_path.exists() or _texts(db_path) == []


# -- request bodies from the schema -------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=30).filter(str.strip)


@given(
    text=_text,
    key=st.none() | _text,
    tags=st.lists(_text, max_size=3),
    importance=st.floats(0, 1),
    priority=st.floats(1, 2),
    pinned=st.booleans(),
    role=st.none() | _text,
    created_at=st.none()
    | st.datetimes(EARLIEST.replace(tzinfo=None), LATEST.replace(tzinfo=None), timezones=st.just(UTC)),
    metadata=st.dictionaries(_text, st.integers() | _text, max_size=3),
)
def test_new_memory_fields_round_trip(
    text: str,
    key: str | None,
    tags: list[str],
    importance: float,
    priority: float,
    pinned: bool,
    role: str | None,
    created_at: Any,
    metadata: dict[str, Any],
) -> None:
    from memsearch.operations import ADD

    memory = NewMemory(
        text,
        key=key,
        tags=tuple(tags),
        importance=importance,
        priority=priority,
        pinned=pinned,
        role=role,
        created_at=created_at,
        metadata=metadata,
    )
    fields = memory.to_fields()
    assert ADD.check(fields) == fields  # the add request's own schema takes it as it is
    assert NewMemory.from_json(json.loads(json.dumps(fields))) == memory


def test_import_sends_the_schemas_query_names(db_path: Path, encoder: Encoder) -> None:
    served = start_server(db_path)
    try:
        code, _, err = _cli("--debug", "import", "-", "--db", str(db_path), "--replace", input='{"text": "one"}\n')
        assert code == 0 and "POST /import?format=jsonl&source=stdin&replace=true through the server" in err, err
    finally:
        assert served.stop() == 0


# -- 8. the token a server makes at start -------------------------------------------------------


def test_the_token_a_server_made_reaches_the_cli_and_memsearch_token(db_path: Path, encoder: Encoder) -> None:
    code, _, err = _cli("token", "--db", str(db_path))
    assert code == 1 and err == f"memsearch: no `memsearch serve` of {db_path} runs\n"
    served = start_server(db_path)
    try:
        assert served.token and served.request("GET", "/stats", token=None).status == 401
        code, out, _ = _cli("token", "--db", str(db_path))
        assert (code, out) == (0, f"{served.token}\n")
        code, out, err = _cli("--debug", "add", "through the server", "--db", str(db_path))
        assert code == 0 and "POST /add through the server" in err, err
        code, out, err = _cli("--debug", "search", "server", "--server", served.url, "--db", str(db_path))
        assert code == 0 and "POST /search through the server" in err and "through the server" in out, err
        code, _, err = _cli("token", "--mcp", "--db", str(db_path))
        assert code == 1 and "no `memsearch mcp --http`" in err
    finally:
        assert served.stop() == 0


def test_no_token_opts_into_an_open_server_on_loopback_only(db_path: Path, encoder: Encoder) -> None:
    served = start_server(db_path, "--no-token")
    try:
        assert served.token is None and served.request("GET", "/stats").status == 200
        assert "no token: every user of this machine can use it" in served.stderr()
        code, _, err = _cli("token", "--db", str(db_path))
        assert code == 1 and "takes no token (started with --no-token)" in err
    finally:
        assert served.stop() == 0
    refused = _run("serve", "--no-token", "--host", "0.0.0.0", "--port", "0", "--db", str(db_path))
    assert refused.returncode == 2 and b"refusing to listen on 0.0.0.0 without a bearer token" in refused.stderr
