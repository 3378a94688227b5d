"""The HTTP front ends' trust boundary, each against a real server on loopback: `memsearch serve`
and `memsearch mcp --http` as subprocesses. What a web page in the user's browser could do (DNS
rebinding, cross-site simple requests), what a peer without the token gets, and slow clients."""

from __future__ import annotations

import http.client
import json
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.embedding import Encoder
from tests.serving import Served, server_env, start_server

FOREIGN_HOSTS = ["evil.example", "127.0.0.1.nip.io:{port}", "", "localhost.evil.example:{port}", "127.0.0.2:{port}"]
LOOPBACK_HOSTS = ["127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}", "LOCALHOST", "127.0.0.1"]


def _stored(server: Served) -> int:
    reply = server.request("GET", "/stats")
    assert reply.status == 200, reply.body
    return int(reply.json()["memories"])


def _refusal(reply: object, status: int, field: str | None = None) -> None:
    assert getattr(reply, "status") == status, getattr(reply, "body")  # noqa: B009
    document = reply.json()  # type: ignore[attr-defined]
    assert set(document) == {"error", "type", "field"} and document["error"]
    if field is not None:
        assert document["field"] == field


# -- `memsearch serve` -----------------------------------------------------------------------


@pytest.mark.parametrize("host", FOREIGN_HOSTS)
def test_a_foreign_host_header_is_refused(served: Served, host: str) -> None:
    """DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1 sends its own Host."""
    served.request("POST", "/add", {"text": "the password is hunter2"})
    reply = served.request("GET", "/search?q=password", headers={"Host": host.format(port=served.port)})
    _refusal(reply, 421, "Host")
    assert b"hunter2" not in reply.body
    assert served.request("GET", "/health", headers={"Host": host.format(port=served.port)}).status == 421
    posted = served.request("POST", "/add", {"text": "planted"}, headers={"Host": host.format(port=served.port)})
    assert posted.status == 421 and _stored(served) == 1


@pytest.mark.parametrize("host", LOOPBACK_HOSTS)
def test_loopback_names_are_accepted(served: Served, host: str) -> None:
    reply = served.request("GET", "/search?q=password", headers={"Host": host.format(port=served.port)})
    assert reply.status == 200, reply.body


def test_allowed_host_adds_a_name(db_path: Path, encoder: Encoder) -> None:
    server = start_server(db_path, "--allowed-host", "memsearch.lan", "--allowed-host", "box.local")
    try:
        for host in ("memsearch.lan", f"box.local:{server.port}", f"127.0.0.1:{server.port}"):
            assert server.request("GET", "/health", headers={"Host": host}).status == 200, host
        assert server.request("GET", "/health", headers={"Host": "other.lan"}).status == 421
        own = server.request("POST", "/add", {"text": "x"}, headers={"Origin": f"http://memsearch.lan:{server.port}"})
        assert own.status == 200, own.body
    finally:
        assert server.stop() == 0


def _multipart(text: str) -> tuple[bytes, str]:
    boundary = "----memsearchboundary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="m.jsonl"\r\n'
        f"Content-Type: application/octet-stream\r\n\r\n{text}\r\n--{boundary}--\r\n"
    )
    return body.encode(), f"multipart/form-data; boundary={boundary}"


SIMPLE_TYPES = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None]


def test_cross_site_requests_are_refused_and_store_nothing(served: Served) -> None:
    """What a page of another site can send without a preflight: any Origin (or "null", from a
    sandboxed frame or a file), a body of a "simple" type, or one of no stated type (a Blob)."""
    note = json.dumps({"text": "planted by a web page"})
    line = note + "\n"
    multipart, multipart_type = _multipart(line)
    search = json.dumps({"query": "anything"})
    for origin in ("https://evil.example", "null", f"http://127.0.0.1:{served.port + 1}", "http://localhost"):
        for path, body, kind in (
            ("/add", note, "text/plain"),
            ("/add", note, "application/json"),
            ("/import", multipart, multipart_type),
            ("/import", line, "application/x-ndjson"),
            ("/api/memory/search", search, "text/plain"),
            ("/search", search, "application/json"),
        ):
            reply = served.request("POST", path, body, headers={"Origin": origin, "Content-Type": kind})
            _refusal(reply, 403, "Origin")
        assert served.request("DELETE", "/memories/1", headers={"Origin": origin}).status == 403
    for simple_type in SIMPLE_TYPES:  # no Origin (a client outside a browser): the type alone is refused
        headers = {"Content-Type": simple_type} if simple_type else {}
        for path, body in (("/add", note), ("/import", line), ("/api/memory/search", search), ("/search", search)):
            _refusal(served.request("POST", path, body, headers=headers), 415, "Content-Type")
    _refusal(served.request("POST", "/import", multipart, headers={"Content-Type": multipart_type}), 415)
    _refusal(served.request("POST", "/add", note, headers={"Content-Type": "application/json; charset=latin-1"}), 415)
    assert _stored(served) == 0

    own = {"Origin": f"http://127.0.0.1:{served.port}"}
    for kind in ("application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"):
        added = served.request("POST", "/add", json.dumps({"text": kind}), headers={**own, "Content-Type": kind})
        assert added.status == 200, (kind, added.body)
    for kind in ("application/x-ndjson", "application/jsonl", "application/json"):
        line = json.dumps({"text": f"imported as {kind}"}) + "\n"
        imported = served.request("POST", "/import", line, headers={**own, "Content-Type": kind})
        assert imported.status == 200, (kind, imported.body)
    assert _stored(served) == 6


def test_cors_origin_lets_that_page_in_with_a_preflight(db_path: Path, encoder: Encoder) -> None:
    app = "http://localhost:3000"
    server = start_server(db_path, "--cors-origin", app)
    try:
        asked = {
            "Origin": app,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        }
        preflight = server.request("OPTIONS", "/add", headers=asked)
        assert preflight.status == 200, preflight.body
        assert preflight.headers["access-control-allow-origin"] == app
        allowed = {name.strip().lower() for name in preflight.headers["access-control-allow-headers"].split(",")}
        assert {"authorization", "content-type"} <= allowed
        added = server.request("POST", "/add", {"text": "from the app"}, headers={"Origin": app})
        assert added.status == 200 and added.headers["access-control-allow-origin"] == app
        other = {**asked, "Origin": "https://evil.example"}
        assert server.request("OPTIONS", "/add", headers=other).status == 403
        _refusal(server.request("POST", "/add", {"text": "x"}, headers={"Origin": "https://evil.example"}), 403)
        assert _stored(server) == 1
    finally:
        assert server.stop() == 0


def test_bearer_scheme_is_case_insensitive_and_health_says_little_without_it(db_path: Path, encoder: Encoder) -> None:
    token = "s3cret-token-of-the-test"
    server = start_server(db_path, env=server_env(MEMSEARCH_API_KEY=token))
    try:
        for scheme in ("Bearer", "bearer", "BEARER", "bEaReR"):
            reply = server.request("GET", "/stats", headers={"Authorization": f"{scheme} {token}"})
            assert reply.status == 200, (scheme, reply.body)
        for given in (f"Basic {token}", token, f"Bearer {token}x", "Bearer", ""):
            assert server.request("GET", "/stats", headers={"Authorization": given}).status == 401, given
        assert server.request("GET", "/health").json() == {"status": "ok"}
        assert server.request("GET", "/health", token="wrong").json() == {"status": "ok"}
        full = server.request("GET", "/health", headers={"Authorization": f"bearer {token}"}).json()
        assert full["pid"] == server.process.pid and full["db"] and full["version"]
    finally:
        assert server.stop() == 0
    assert token not in server.stderr()


def test_health_without_a_token_set_is_the_full_document(served: Served) -> None:
    assert served.request("GET", "/health").json()["pid"] == served.process.pid


# -- the transport of both servers: slow, idle and oversized clients ---------------------------

DESCRIPTORS = 256  # the server's limit on open files, soft and hard: fewer than the idle connections
KINDS = ["serve", "mcp"]  # `memsearch serve` and `memsearch mcp --http`: one transport, one matrix


def _few_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))


def _healthy(server: Served, timeout: float = 30) -> bool:
    """Whether the server answers a real request within `timeout` (past its connection limit it
    answers a quick 503: asked again until then)."""
    deadline = time.monotonic() + timeout
    while True:
        client = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
        try:
            client.request("GET", "/health", headers={"Authorization": f"Bearer {server.token}"})
            reply = client.getresponse()
            status, body = reply.status, reply.read()
        finally:
            client.close()
        if status != 503 or time.monotonic() > deadline:
            return status == 200 and json.loads(body)["pid"] == server.process.pid


@pytest.mark.parametrize("kind", KINDS)
def test_idle_connections_do_not_starve_a_real_request(kind: str, db_path: Path, encoder: Encoder) -> None:
    """More connections than the server has descriptors, each opened and left silent (or with half
    a request head): they are closed after the head timeout, and a real request gets its answer."""
    server = start_server(db_path, kind=kind, preexec_fn=_few_descriptors)
    idle: list[socket.socket] = []
    try:
        for n in range(300):
            connection = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            if n % 2:
                connection.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
            idle.append(connection)
        started = time.monotonic()
        assert _healthy(server)
        assert time.monotonic() - started < 20
    finally:
        for connection in idle:
            connection.close()
        assert server.stop() == 0


def _closed_by_server(connection: socket.socket, within: float, trickle: bytes = b"") -> float | None:
    """Seconds until the server closes `connection` while a byte of `trickle` is sent every second
    (None if it has not within `within` seconds)."""
    started = time.monotonic()
    connection.settimeout(1)
    for byte in (trickle or b"\0" * int(within + 1))[: int(within + 1)]:
        try:
            if trickle:
                connection.sendall(bytes([byte]))
            if connection.recv(65536) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - started
        if time.monotonic() - started > within:
            break
    return None


@pytest.mark.parametrize("kind", KINDS)
def test_a_body_sent_a_byte_at_a_time_is_cut_off(kind: str, db_path: Path, encoder: Encoder) -> None:
    """A request body that arrives a byte a second holds the connection for the grace period,
    not without bound; nothing of it is stored and the server answers others meanwhile."""
    server = start_server(db_path, kind=kind)
    try:
        path = "/add" if kind == "serve" else "/mcp"
        body = json.dumps({"text": "x" * 500}).encode()
        connection = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {server.token}\r\n"
            f"Content-Type: application/json\r\nAccept: {MCP_ACCEPT}\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        connection.sendall(head.encode())
        closed_after = _closed_by_server(connection, within=20, trickle=body)
        connection.close()
        assert closed_after is not None, "the connection was still open after 20 s"
        assert closed_after < 12
        assert _healthy(server)
    finally:
        assert server.stop() == 0
    with Memsearch(db_path) as ms:
        assert ms.stats()["memories"] == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_request_head_over_the_limit_is_refused_even_in_one_read(kind: str, db_path: Path, encoder: Encoder) -> None:
    server = start_server(db_path, kind=kind)
    try:
        for size, expected in ((15 * 1024, 200), (17 * 1024, 431), (64 * 1024, 431)):
            padding = "a" * (size - 200)
            head = (
                f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAuthorization: Bearer {server.token}\r\n"
                f"X-Padding: {padding}\r\n\r\n"
            ).encode()
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as connection:
                connection.sendall(head)  # one write: the whole head in (about) one read
                answer = b""
                while b"\r\n\r\n" not in answer and (chunk := connection.recv(65536)):
                    answer += chunk
            status = int(answer.split(b" ", 2)[1])
            assert status == expected, (size, answer[:200])
            if expected == 431:
                assert b"application/json" in answer.lower()
        assert _healthy(server)
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_request_without_the_token_is_refused(kind: str, db_path: Path, encoder: Encoder) -> None:
    """A server made its own token at start: a request without it (as any local user could send)
    reads and changes nothing; `/health` says only that it is up."""
    server = start_server(db_path, kind=kind)
    try:
        assert server.token
        for token in (None, "wrong", server.token[:-1]):
            if kind == "serve":
                refused = server.request("POST", "/add", {"text": "planted"}, token=token)
                assert server.request("GET", "/search?q=x", token=token).status == 401
            else:
                refused = server.request(
                    "POST", "/mcp", _mem_add("planted"), token=token, headers={"Accept": MCP_ACCEPT}
                )
            assert refused.status == 401, refused.body
            assert server.request("GET", "/health", token=token).json() == {"status": "ok"}
        assert _healthy(server)
    finally:
        assert server.stop() == 0
    with Memsearch(db_path) as ms:
        assert ms.stats()["memories"] == 0


# -- `memsearch mcp --http` ------------------------------------------------------------------

MCP_ACCEPT = "application/json, text/event-stream"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def mcp_http(db_path: Path, encoder: Encoder) -> Iterator[Served]:
    """`memsearch mcp --http` on a free loopback port, once it has advertised itself."""
    server = start_server(db_path, kind="mcp")
    try:
        yield server
    finally:
        server.stop()


def _mcp_post(port: int, message: dict[str, object], headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST", "/mcp", body=json.dumps(message).encode(), headers=headers)
        response = connection.getresponse()
        return response.status, response.read(), {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()


def _mcp_session(port: int, token: str | None) -> dict[str, str]:
    """The headers of an initialized session (the legitimate client's)."""
    base = {"Host": f"127.0.0.1:{port}", "Content-Type": "application/json", "Accept": MCP_ACCEPT}
    if token is not None:
        base["Authorization"] = f"Bearer {token}"
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    status, body, headers = _mcp_post(port, initialize, base)
    assert status == 200, body
    session = {**base, "mcp-session-id": headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    status, body, _ = _mcp_post(port, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    assert status == 202, body
    return session


def _mem_add(text: str) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "mem_add", "arguments": {"text": text}},
    }


def test_mcp_http_refuses_foreign_hosts_and_origins(mcp_http: Served, db_path: Path) -> None:
    port = mcp_http.port
    session = _mcp_session(port, mcp_http.token)
    for host in ("127.0.0.1:{port}", "localhost:{port}", "[::1]:{port}"):
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        status, body, _ = _mcp_post(port, initialize, {**session, "Host": host.format(port=port)})
        assert status == 200, (host, body)
    for host in FOREIGN_HOSTS:
        status, _, _ = _mcp_post(port, _mem_add("planted by rebinding"), {**session, "Host": host.format(port=port)})
        assert status == 421, host
    for origin in ("https://evil.example", "null", "http://localhost.evil.example"):
        status, _, _ = _mcp_post(port, _mem_add("planted cross-site"), {**session, "Origin": origin})
        assert status == 403, origin
    for kind in SIMPLE_TYPES:
        headers = {**session, "Origin": f"http://127.0.0.1:{port}"}
        headers.pop("Content-Type")
        if kind:
            headers["Content-Type"] = kind
        status, _, _ = _mcp_post(port, _mem_add("planted as a simple request"), headers)
        assert status == 400, kind  # the MCP SDK's status for a body that is not JSON (serve: 415)
    status, body, _ = _mcp_post(port, _mem_add("the real one"), session)
    assert status == 200 and b'isError":false' in body.replace(b" ", b""), body
    with Memsearch(db_path) as ms:
        assert ms.stats()["memories"] == 1
