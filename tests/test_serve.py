"""`memsearch serve` as a real subprocess on loopback, driven by a real HTTP client."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from memsearch.discovery import discovery_path
from memsearch.embedding import Encoder
from memsearch.operations import MAX_QUERY_CHARS
from memsearch.server.http import ENDPOINTS, MAX_BODY_BYTES
from tests.serving import AS_SERVED, Served, server_env, start_server

NOTES: list[dict[str, Any]] = [
    {"text": "The deploy key lives in 1Password", "tags": ["ops"], "key": "deploy-key"},
    {"text": "parseConfig crashes on an empty YAML file", "project": "cli"},
    {"text": "Alice prefers dark roast coffee", "namespace": "personal"},
]
JSONL = {"Content-Type": "application/x-ndjson"}
JSON = {"Content-Type": "application/json"}


def _fill(server: Served, token: str | None = AS_SERVED) -> list[int]:
    ids = []
    for note in NOTES:
        reply = server.request("POST", "/add", note, token=token)
        assert reply.status == 200, reply.body
        ids.append(reply.json()["id"])
    return ids


def test_every_endpoint_returns_the_clis_documents(served: Served) -> None:
    assert _fill(served) == [1, 2, 3]
    found = served.request("GET", "/search?q=deploy+key&k=2")
    assert found.status == 200
    document = found.json()
    assert document["schema_version"] == 1 and document["results"][0]["key"] == "deploy-key"
    assert "explain" not in document["results"][0]  # only when asked for: it is long
    explained = served.request("GET", "/search?q=deploy+key&k=2&explain=true").json()
    assert "legs" in explained["results"][0]["explain"]
    posted = served.request("POST", "/search", {"query": "deploy key", "k": 2, "raw": True}).json()
    assert posted["results"][0]["id"] == 1 and "candidates" in posted

    cems = served.request("POST", "/api/memory/search", {"query": "coffee", "limit": 5, "scope": "personal"}).json()
    assert cems["profile"] == "cems" and [r["id"] for r in cems["results"]] == [3]

    assert served.request("GET", "/memories/deploy-key").json()["id"] == 1
    assert served.request("GET", "/memories/2").json()["project"] == "cli"
    timeline = served.request("GET", "/timeline/2?before=1&after=1").json()
    assert timeline["current"] == 2  # as the CLI's JSON and MCP's mem_timeline
    assert [(m["id"], m["current"]) for m in timeline["memories"]] == [(1, False), (2, True), (3, False)]

    imported = served.request(
        "POST",
        "/import?source=notes.jsonl",
        '{"text": "imported one"}\n\n{"text": "imported two", "tags": ["t"]}\n',
        headers=JSONL,
    )
    assert imported.status == 200 and imported.json()["counts"]["note"] == 2
    chat = "\n".join(
        json.dumps({"session": "s1", "role": role, "text": text, "created_at": f"2024-05-01T12:0{n}:00Z"})
        for n, (role, text) in enumerate([("user", "I moved to Lisbon"), ("assistant", "Nice city!")])
    )
    imported = served.request("POST", "/import?format=chat&source=chat", chat, headers=JSONL)
    assert imported.status == 200, imported.body
    assert imported.json()["counts"]["turn"] == 2

    assert served.request("DELETE", "/memories/deploy-key").json() == {"deleted": [1]}
    missing = served.request("GET", "/memories/1")
    assert missing.status == 404 and missing.json()["type"] == "MemoryNotFoundError"
    stats = served.request("GET", "/stats").json()
    assert stats["memories"] == 2 + 2 + 2 + 1  # 2 notes left, 2 imported, 2 turns and their session
    health = served.request("GET", "/health").json()
    assert health["status"] == "ok" and health["pid"] == served.process.pid
    assert discovery_path(served.db).stat().st_mode & 0o777 == 0o600  # owner-only


def test_openapi_describes_every_route_of_the_table(served: Served) -> None:
    document = served.request("GET", "/openapi.json").json()
    described = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    assert described == {(endpoint.method, endpoint.path) for endpoint in ENDPOINTS}
    search = document["paths"]["/api/memory/search"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {"query", "limit", "mode", "max_tokens", "project", "scope"} <= set(search["properties"])


def test_bad_requests_get_a_clear_400_and_store_nothing(served: Served) -> None:
    _fill(served)
    too_big = served.request("POST", "/add", b"{" + b" " * (MAX_BODY_BYTES + 10) + b"}", headers=JSON)
    assert too_big.status == 400 and "limit" in too_big.json()["error"]
    long_query = served.request("POST", "/search", {"query": "x" * (MAX_QUERY_CHARS + 1)})
    assert long_query.status == 400 and long_query.json()["field"] == "query"
    long_url = served.request("GET", "/search?q=" + "y" * 9000)
    assert long_url.status == 400 and "URL" in long_url.json()["error"]
    for body, field in (({"query": "x", "k": 0}, "k"), ({"query": "x", "max_tokens": 0}, "max_tokens")):
        reply = served.request("POST", "/search", body)
        assert reply.status == 400 and reply.json()["field"] == field, reply.body
    assert served.request("POST", "/add", b"not json", headers=JSON).status == 400
    assert served.request("POST", "/add", {"text": ""}).status == 400
    unknown = served.request("POST", "/add", {"text": "x", "colour": "red"}).json()
    assert unknown["field"] == "colour" and "is not a field of add" in unknown["error"]
    bad_import = served.request("POST", "/import", '{"text": "fine"}\n{"text": 3}\n', headers=JSONL)
    assert bad_import.status == 400 and "line 2" in bad_import.json()["error"]
    assert served.request("GET", "/stats").json()["memories"] == len(NOTES)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("localhost", True), ("0.0.0.0", False),
     ("::", False), ("192.168.1.5", False), ("memsearch.example", False)],
)  # fmt: skip
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    from memsearch.server.http_transport import is_loopback

    assert is_loopback(host) is loopback


def test_accepted_connections_send_without_waiting_for_acks() -> None:
    """asyncio turns Nagle off only on sockets made as TCP; with it on, every response on a
    kept-alive connection waited ~40 ms for the client's delayed ACK."""
    import asyncio
    import socket

    from memsearch.server.http_transport import listening_socket

    async def nodelay_of_an_accepted_connection() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def on_connect(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        listener = listening_socket("127.0.0.1", 0)
        server = await asyncio.start_server(on_connect, sock=listener)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", listener.getsockname()[1])
            value = await asyncio.wait_for(accepted, 10)
            writer.close()
        return value

    assert asyncio.run(nodelay_of_an_accepted_connection()) != 0


def test_off_loopback_refuses_to_start_without_a_token(tmp_path: Path, encoder: Encoder) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "memsearch",
            "serve",
            "--db",
            str(tmp_path / "m.db"),
            "--host",
            "0.0.0.0",
            "--port",
            "0",
        ],
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0 without a bearer token" in result.stderr
    assert not discovery_path(tmp_path / "m.db").exists()


def test_off_loopback_every_request_needs_the_token(db_path: Path, encoder: Encoder) -> None:
    token = "s3cret-token-of-the-test"
    server = start_server(db_path, "--host", "0.0.0.0", env=server_env(MEMSEARCH_API_KEY=token))
    try:
        for endpoint in ENDPOINTS:
            if endpoint.path == "/health":  # answered, but with nothing more than {"status": "ok"}
                continue
            path = endpoint.path.replace("{ref}", "1")
            for given in (None, "wrong", token + "x", token[:-1]):
                reply = server.request(endpoint.method, path, {"query": "x", "text": "x"}, token=given)
                assert reply.status == 401, (endpoint.path, given, reply.body)
                assert reply.headers.get("www-authenticate") == "Bearer"
        assert server.request("GET", "/openapi.json").status == 401
        assert server.request("GET", "/stats", headers={"Authorization": token}).status == 401  # no scheme
        assert server.request("GET", "/health").json() == {"status": "ok"}
        _fill(server, token)
        assert server.request("GET", "/search?q=coffee", token=token).json()["results"][0]["id"] == 3
        assert server.request("GET", "/stats", token=token).json()["memories"] == len(NOTES)
    finally:
        assert server.stop() == 0
    assert token not in server.stderr()


def test_concurrent_clients_lose_nothing(served: Served) -> None:
    clients, each = 8, 6

    def work(client: int) -> list[int]:
        statuses = []
        for n in range(each):
            added = served.request("POST", "/add", {"text": f"client {client} note {n} about topic {n % 3}"})
            statuses.append(added.status)
            found = served.request("GET", f"/search?q=client+{client}+note&k=3")
            statuses.append(found.status)
            assert found.json()["results"], found.body
        return statuses

    with ThreadPoolExecutor(clients) as pool:
        statuses = [status for result in pool.map(work, range(clients)) for status in result]
    assert statuses == [200] * (2 * clients * each)
    texts = {m["text"] for m in served.request("GET", "/search?q=client+note&k=1000&mode=lexical").json()["results"]}
    assert len(texts) == clients * each
    assert served.request("GET", "/stats").json()["memories"] == clients * each


def test_sigterm_finishes_the_request_in_flight_and_exits_cleanly(served: Served) -> None:
    lines = "\n".join(json.dumps({"text": f"memory number {n} of a long import"}) for n in range(600))
    connection = served.send("POST", "/import", lines, headers=JSONL)
    served.wait_read(connection)  # the body is on the server and being embedded
    served.process.send_signal(signal.SIGTERM)
    reply = served.reply(connection)
    assert served.process.wait(timeout=60) == 0
    assert reply.status == 200 and reply.json()["counts"]["note"] == 600
    assert not discovery_path(served.db).exists()


def _cli(*args: str, input: str | None = None) -> tuple[str, str]:
    from typer.testing import CliRunner

    from memsearch.cli.app import app

    result = CliRunner().invoke(app, list(args), input=input)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout, result.stderr


SEARCHES = [
    ("deploy key", "--explain", "--raw"),
    ("coffee", "--format", "json", "--raw"),
    ("YAML crash", "--format", "csv", "-m", "lexical"),
    ("where do the keys live", "--format", "jsonl", "-p", "cems", "--project", "cli", "-k", "2"),
    ("Alice", "-g", "session", "--explain", "--tag", "people", "--since", "2024-01-01"),
    ("deploy key", "--kind", "note", "--since", "3000d", "--until", "today", "-f", "ndjson"),
    ("coffee", "--role", "nobody", "--session", "s", "--conversation", "c", "-f", "json"),
]


def test_cli_output_is_byte_identical_with_and_without_the_server(db_path: Path, encoder: Encoder) -> None:
    notes = "\n".join(json.dumps(note) for note in [*NOTES, {"text": "Alice likes the mountains", "tags": ["people"]}])
    _cli("import", "-", "--db", str(db_path), input=notes)
    pinned = ("--db", str(db_path), "--as-of", "2030-01-01")  # --as-of: searches change nothing, scores are stable
    alone = [_cli("--debug", "search", *search, *pinned) for search in SEARCHES]
    assert not any("through the server" in stderr for _, stderr in alone)

    server = start_server(db_path)
    try:
        served = [_cli("--debug", "search", *search, *pinned) for search in SEARCHES]
        for (alone_out, _), (served_out, served_err) in zip(alone, served, strict=True):
            assert "POST /search through the server" in served_err
            assert served_out == alone_out
        explicit = _cli("--debug", "search", *SEARCHES[1], "--server", server.url, *pinned)
        assert explicit[0] == alone[1][0] and "through the server" in explicit[1]

        out, err = _cli("--debug", "add", "Bob fixes bikes on Sundays", "--tag", "people", "--db", str(db_path))
        assert out == "5\n" and "POST /add through the server" in err
        out, err = _cli("--debug", "import", "-", "--db", str(db_path), input='{"text": "one more"}\n')
        assert "POST /import?format=jsonl&source=stdin through the server" in err
        assert "imported 1 memory from stdin" in err
        failing = _failing_cli("search", "x", "--db", str(db_path), "--profile", "nonesuch")
        assert "nonesuch" in failing
    finally:
        assert server.stop() == 0
    assert _cli("get", "5", "--db", str(db_path), "--format", "json")[0].count("Bob fixes bikes") == 1
    assert _failing_cli("search", "x", "--db", str(db_path), "--profile", "nonesuch") == failing  # same words


def test_cli_works_in_process_when_the_server_is_gone(db_path: Path, encoder: Encoder) -> None:
    _cli("add", "The deploy key lives in 1Password", "--db", str(db_path))
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, timeout=60
    )
    document = {"url": "http://127.0.0.1:9", "pid": int(dead.stdout), "authenticated": False}
    discovery_path(db_path).write_text(json.dumps(document))
    out, err = _cli("--debug", "search", "deploy", "--db", str(db_path), "--format", "json")
    assert json.loads(out)["results"][0]["id"] == 1 and "through the server" not in err
    # Nothing listens there: an explicit --server is an error (tests/test_server_trust.py).
    assert "http://127.0.0.1:9 does not answer" in _failing_cli("search", "x", "--server", "http://127.0.0.1:9")


def _failing_cli(*args: str) -> str:
    from typer.testing import CliRunner

    from memsearch.cli.app import app

    result = CliRunner().invoke(app, list(args))
    assert result.exit_code != 0
    return result.stderr


def test_http_search_takes_the_same_filters_as_the_cli(served: Served) -> None:
    _fill(served)
    notes_only = served.request("POST", "/search", {"query": "deploy key", "kinds": ["note"], "since": "1d"}).json()
    assert notes_only["results"][0]["key"] == "deploy-key"
    assert served.request("POST", "/search", {"query": "deploy key", "kinds": ["turn"]}).json()["results"] == []
    got = served.request("GET", "/search?q=deploy+key&kind=turn&kind=session&role=user&session=s&conversation=c")
    assert got.status == 200 and got.json()["results"] == []
    bad = served.request("POST", "/search", {"query": "x", "since": "3x"})
    assert bad.status == 400 and bad.json()["field"] == "since" and "relative time" in bad.json()["error"]
    wrong = served.request("POST", "/search", {"query": "x", "kinds": "fact"})
    assert wrong.status == 400 and wrong.json()["field"] == "kinds"


# -- no input gives a 500 --------------------------------------------------------------------

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("method", "path", "body", "headers", "status", "field"),
    [
        ("POST", "/search", b'{"query": "x", "tau_days": "abc"}', JSON, 400, "tau_days"),
        ("POST", "/search", b'{"query": "x", "tau_days": -1}', JSON, 400, "tau_days"),
        ("POST", "/search", b'{"query": "x", "k": true}', JSON, 400, "k"),
        ("POST", "/search", b'["query"]', JSON, 400, None),
        ("POST", "/search", DEEP, JSON, 400, None),
        ("POST", "/add", DEEP, JSON, 400, None),
        ("POST", "/api/memory/search", DEEP, JSON, 400, None),
        ("POST", "/api/memory/search", b'{"query": "x", "limit": "ten"}', JSON, 400, "limit"),
        ("POST", "/import", b'{"text": ' + DEEP + b"}\n", JSONL, 400, None),
        ("POST", "/import?format=chat", b'{"role": "user"}\n', JSONL, 400, None),
        ("POST", "/import?format=chat", b"[1, 2]\n", JSONL, 400, None),
        ("POST", "/import?format=locomo", b'{"conversation": 3}', JSONL, 400, None),
        ("POST", "/import?format=locomo", b"[{}]", JSONL, 400, None),
        ("POST", "/import?format=longmemeval", b'[{"haystack_sessions": "x"}]', JSONL, 400, None),
        ("POST", "/import?format=longmemeval", b"[1]", JSONL, 400, None),
        ("POST", "/import?format=yaml", b"", JSONL, 400, "format"),
        ("POST", "/import?colour=red", b'{"text": "x"}\n', JSONL, 400, "colour"),
        ("GET", "/memories/%C2%B2", None, {}, 404, None),
        ("GET", "/memories/%EF%BC%92", None, {}, 404, None),
        ("DELETE", "/memories/%C2%B2", None, {}, 404, None),
        ("GET", "/timeline/%C2%B2", None, {}, 404, None),
        ("GET", "/timeline/1?before=-1", None, {}, 400, "before"),
        ("GET", "/timeline/1?after=10001", None, {}, 400, "after"),
        ("GET", "/timeline/1?ref=2", None, {}, 400, "ref"),
        ("GET", "/search?q=x&colour=red", None, {}, 400, "colour"),
        ("GET", "/search?q=x&k=1&k=2", None, {}, 400, "k"),
        ("GET", "/stats?verbose=1", None, {}, 400, "verbose"),
        ("GET", "/nonesuch", None, {}, 404, None),
        ("PUT", "/search", b"{}", JSON, 405, None),
        ("DELETE", "/stats", None, {}, 405, None),
    ],
)  # fmt: skip
def test_no_input_gives_a_500(
    served: Served, method: str, path: str, body: bytes | None, headers: dict[str, str], status: int, field: str | None
) -> None:
    reply = served.request(method, path, body, headers=headers)
    assert reply.status == status, reply.body[:300]
    document = reply.json()
    assert set(document) == {"error", "type", "field"} and document["field"] == field, document
    assert "Traceback" not in served.stderr() and "internal error" not in served.stderr()
    assert served.request("GET", "/stats").json()["memories"] == 0


def test_dataset_errors_carry_the_librarys_message(served: Served) -> None:
    reply = served.request("POST", "/import?format=locomo&source=conv.json", b'{"conversation": 3}', headers=JSONL)
    assert reply.status == 400 and reply.json()["type"] == "DatasetError"
    assert reply.json()["error"].startswith("conv.json")


def test_timeline_takes_the_librarys_bounds(served: Served) -> None:
    _fill(served)
    reply = served.request("GET", "/timeline/2?before=10000&after=5000")
    assert reply.status == 200, reply.body
    assert [m["id"] for m in reply.json()["memories"]] == [1, 2, 3]


# -- the operations' fields: one source for parameters, bodies and the OpenAPI document --------


def test_openapi_describes_every_field_of_the_operations(served: Served) -> None:
    from memsearch.operations import ADD, IMPORT, SEARCH, TIMELINE

    paths = served.request("GET", "/openapi.json").json()["paths"]

    def body(path: str) -> dict[str, Any]:
        schema: dict[str, Any] = paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        return schema

    def params(path: str, method: str = "get") -> dict[str, dict[str, Any]]:
        return {p["name"]: p for p in paths[path][method]["parameters"]}

    assert body("/search") == SEARCH.json_schema() and body("/add") == ADD.json_schema()
    assert set(paths["/import"]["post"]["requestBody"]["content"]) == {
        "application/json",
        "application/x-ndjson",
        "application/jsonl",
    }
    for operation, parameters in (
        (SEARCH, params("/search")),
        (IMPORT, params("/import", "post")),
        (TIMELINE, params("/timeline/{ref}")),
    ):
        for f in operation.fields:
            described = parameters[f.query_name]
            assert described["schema"] == f.json_schema(), f.name
            assert described["in"] == ("path" if f.name == "ref" else "query")
            assert described["required"] == f.required
    assert params("/timeline/{ref}")["before"]["schema"]["maximum"] == 10_000
    assert {"q", "tag", "kind", "role", "session", "tau_days", "profile", "raw", "explain"} <= set(params("/search"))
    cems = body("/api/memory/search")["properties"]
    assert cems["limit"]["maximum"] == SEARCH.field("k").json_schema()["maximum"]
    assert {"query", "limit", "mode", "max_tokens", "project", "scope"} <= set(cems)


@pytest.mark.parametrize(
    ("query", "fields", "field"),
    [
        ("k=0", {"k": 0}, "k"),
        ("k=1001", {"k": 1001}, "k"),
        ("mode=fast", {"mode": "fast"}, "mode"),
        ("kind=fact", {"kinds": ["fact"]}, "kinds"),
        ("tau_days=-2", {"tau_days": -2}, "tau_days"),
        ("granularity=day", {"granularity": "day"}, "granularity"),
        ("max_tokens=0", {"max_tokens": 0}, "max_tokens"),
        ("since=3x", {"since": "3x"}, "since"),
        ("raw=maybe", {"raw": "maybe"}, "raw"),
        ("rerank=magic", {"rerank": "magic"}, "rerank"),
        ("max_ms=0", {"max_ms": 0}, "max_ms"),
        ("", {}, "query"),
    ],
)
def test_get_and_post_search_refuse_a_bad_value_alike(
    served: Served, query: str, fields: dict[str, Any], field: str
) -> None:
    with_query = query if query.startswith("q=") or not query else f"q=x&{query}"
    got = served.request("GET", f"/search?{with_query}")
    posted = served.request("POST", "/search", {"query": "x", **fields} if "query" not in fields and query else fields)
    assert got.status == posted.status == 400, (got.body, posted.body)
    assert got.json()["field"] == posted.json()["field"] == field
    assert got.json()["type"] == posted.json()["type"]


def test_get_search_takes_every_search_field(served: Served) -> None:
    _fill(served)
    got = served.request(
        "GET",
        "/search?q=deploy+key&k=2&mode=lexical&profile=default&tau_days=30&tag=ops&kind=note&granularity=turn"
        "&max_tokens=500&touch=false&boost=tag:ops&rerank=off&max_ms=5000&raw=true&explain=true&since=30d",
    )
    assert got.status == 200, got.body
    document = got.json()
    assert document["results"][0]["key"] == "deploy-key" and "explain" in document["results"][0]
    assert "candidates" in document


def test_import_names_the_conversation(served: Served) -> None:
    turn = {"session": "s1", "role": "user", "text": "I moved to Lisbon", "created_at": "2024-05-01T12:00:00Z"}
    chat = json.dumps(turn) + "\n"
    imported = served.request("POST", "/import?format=chat&conversation=trip", chat, headers=JSONL)
    assert imported.status == 200, imported.body
    found = served.request("GET", "/search?q=Lisbon&conversation=trip").json()["results"]
    assert found and served.request("GET", "/search?q=Lisbon&conversation=other").json()["results"] == []


# -- Ctrl-C ----------------------------------------------------------------------------------


def _ctrl_c_as_from_a_terminal() -> None:
    """SIGINT's default in the child: a suite started in the background inherits it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_finishes_the_request_in_flight_and_exits_0(db_path: Path, encoder: Encoder) -> None:
    server = start_server(db_path, preexec_fn=_ctrl_c_as_from_a_terminal)
    lines = "\n".join(json.dumps({"text": f"memory number {n} of a long import"}) for n in range(600))
    try:
        connection = server.send("POST", "/import", lines, headers=JSONL)
        server.wait_read(connection)  # the body is on the server and being embedded
        server.process.send_signal(signal.SIGINT)
        reply = server.reply(connection)
        assert server.process.wait(timeout=60) == 0, server.stderr()
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait(timeout=30)
    assert reply.status == 200 and reply.json()["counts"]["note"] == 600
    assert not discovery_path(server.db).exists() and "Traceback" not in server.stderr()
