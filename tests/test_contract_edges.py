"""The edges of the contract (issue 30), on every front end: a JSON number of thousands of digits
is a one-line field error (never a 500 or an internal error), an MCP line over the message limit
is refused with bounded memory, no path answers a redirect, and a query may be a whole document
(a search by example) up to one bound shared by every front end.

The servers are real subprocesses (`memsearch serve` on loopback, `memsearch mcp` on stdio fed
raw lines or driven by the MCP SDK's client), the CLI runs through Typer's runner, and the
library is called as a program would."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.embedding import Encoder
from memsearch.errors import MemsearchError
from memsearch.models import NewMemory
from memsearch.operations import MAX_QUERY_CHARS
from memsearch.retrieval.query import distinctive_words, parse_query
from memsearch.retrieval.request import SearchRequest
from memsearch.retrieval.routing import ROUTE_CHARS
from memsearch.server.mcp_stdio import MAX_LINE_BYTES, OverLimit, bounded_lines, refusal_of
from tests.serving import Served, server_env, start_server
from tests.test_mcp_wire import RawMcp, _request

BIG = "1" + "0" * 5000  # a JSON number of 5,001 digits (Python will not even print one: its limit is 4,300)
TOO_LONG = "is a number of 5,001 digits; the limit is 4,300"
README = Path(__file__).resolve().parents[1] / "README.md"

runner = CliRunner()


@pytest.fixture(scope="module")
def child_env(tmp_path_factory: pytest.TempPathFactory, model_cache: Path, encoder: Encoder) -> dict[str, str]:
    """The servers' environment (their own home; the session's model export, made by `encoder`)."""
    home = tmp_path_factory.mktemp("home")
    return server_env(MEMSEARCH_HOME=str(home), MEMSEARCH_CACHE_DIR=str(model_cache))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, child_env: dict[str, str]) -> Iterator[Served]:
    server = start_server(tmp_path_factory.mktemp("served") / "memsearch.db", env=child_env)
    try:
        reply = server.request("POST", "/add", {"text": "the deploy key lives in the vault", "tags": ["x"]})
        assert reply.status == 200, reply.body
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def raw_mcp(tmp_path_factory: pytest.TempPathFactory, child_env: dict[str, str]) -> Iterator[RawMcp]:
    folder = tmp_path_factory.mktemp("mcp")
    with pytest.MonkeyPatch.context() as patch:
        for name in ("MEMSEARCH_HOME", "MEMSEARCH_CACHE_DIR"):
            patch.setenv(name, child_env[name])
        server = RawMcp(folder / "memsearch.db", folder / "mcp.stderr")
    try:
        yield server
    finally:
        server.close()


def _memories(served: Served) -> int:
    return int(served.request("GET", "/stats").json()["memories"])


def _sdk_call(db: Path, env: dict[str, str], tool: str, arguments: dict[str, Any]) -> Any:
    """One tool call through the MCP SDK's own client over stdio: its result, or the MCPError."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "memsearch", "mcp", "--db", str(db)], env=env)

    async def call() -> Any:
        with anyio.fail_after(240):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                try:
                    return await session.call_tool(tool, arguments)
                except MCPError as error:
                    return error

    return anyio.run(call)


# -- a number of too many digits -------------------------------------------------------------------

HTTP_BODIES = {  # path, body, the field at fault
    "search": ("/search", '{"query": "key", "k": %s}', "k"),
    "cems-search": ("/api/memory/search", '{"query": "key", "limit": %s}', "limit"),
    "add": ("/add", '{"text": "x", "importance": %s}', "importance"),
    "add-metadata": ("/add", '{"text": "x", "metadata": {"n": [1, -%s]}}', "metadata.n[1]"),
}


@pytest.mark.parametrize("case", sorted(HTTP_BODIES))
def test_http_refuses_a_number_of_too_many_digits_naming_its_field(served: Served, case: str) -> None:
    path, body, field = HTTP_BODIES[case]
    before = _memories(served)
    reply = served.request("POST", path, (body % BIG).encode(), headers={"Content-Type": "application/json"})
    assert reply.status == 400, reply.body
    assert reply.json() == {"error": f"{field} {TOO_LONG}", "type": "NumberTooLongError", "field": field}
    assert _memories(served) == before


def test_http_import_refuses_a_number_of_too_many_digits_naming_its_line(served: Served) -> None:
    before = _memories(served)
    body = f'{{"text": "fine"}}\n{{"text": "x", "importance": {BIG}}}\n'.encode()
    reply = served.request("POST", "/import", body, headers={"Content-Type": "application/x-ndjson"})
    assert reply.status == 400, reply.body
    assert reply.json()["error"] == f"request body, line 2: importance {TOO_LONG}; nothing from this file was stored"
    assert _memories(served) == before


def test_mcp_stdio_refuses_a_number_of_too_many_digits_naming_the_argument(raw_mcp: RawMcp) -> None:
    for request_id, tool, arguments, named in (
        (41, "mem_search", f'{{"query": "key", "k": {BIG}}}', "k"),
        ("add-42", "mem_add", f'{{"text": "x", "metadata": {{"n": {BIG}}}}}', "metadata.n"),
    ):
        raw_mcp.send(_request(request_id, arguments, tool))
        error = raw_mcp.answer(request_id)["error"]
        assert error == {"code": -32602, "message": f"Invalid params: argument {named!r} {TOO_LONG}"}
    assert raw_mcp.call(43, "mem_stats", {})["result"]["structuredContent"]["memories"] == 0


def test_the_mcp_sdk_client_gets_the_same_refusal(tmp_path: Path, child_env: dict[str, str]) -> None:
    found = _sdk_call(tmp_path / "memsearch.db", child_env, "mem_search", {"query": "key", "k": 10**5000})
    assert isinstance(found, MCPError), found
    assert str(found) == f"Invalid params: argument 'k' {TOO_LONG}"


def test_the_cli_refuses_a_number_of_too_many_digits_naming_the_line(db_path: Path, encoder: Encoder) -> None:
    imported = runner.invoke(
        app, ["import", "-", "--db", str(db_path)], input=f'{{"text": "x", "importance": {BIG}}}\n'
    )
    assert imported.exit_code == 1, imported.stderr
    assert imported.stderr.strip() == (
        f"memsearch: stdin, line 1: importance {TOO_LONG}; nothing from this file was stored"
    )
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.add(NewMemory("the deploy key lives in the vault"))
    queries = f'{{"query": "key"}}\n{{"query": "key", "k": {BIG}}}\n'
    searched = runner.invoke(app, ["search", "--queries", "-", "--db", str(db_path)], input=queries)
    assert searched.exit_code == 1, searched.stderr
    assert searched.stderr.strip() == f"memsearch: stdin, line 2: k {TOO_LONG}; nothing from this file was stored"


def test_the_library_refuses_a_number_of_too_many_digits_in_every_reader(ms: Memsearch) -> None:
    ms.add(NewMemory("the deploy key lives in the vault"))
    readers: list[tuple[Callable[[], object], str]] = [
        (lambda: ms.import_text(f'{{"text": "x", "importance": {BIG}}}', source="notes.jsonl"), "line 1: importance"),
        (lambda: ms.import_text(f'[\n{{"text": "x", "importance": {BIG}}}\n]', source="doc.json"), "[0].importance"),
        (lambda: ms.parse_queries(f'{{"query": "x", "k": {BIG}}}', source="q.jsonl"), "line 1: k"),
        (
            lambda: ms.import_text(f'{{"session": {BIG}, "role": "a", "text": "t"}}', source="c.jsonl", fmt="chat"),
            "line 1: session",
        ),
        (lambda: ms.import_text(f'{{"sample_id": {BIG}}}', source="l.json", fmt="locomo"), "sample_id"),
    ]
    for read, where in readers:
        with pytest.raises(MemsearchError) as refused:
            read()
        assert where in str(refused.value) and TOO_LONG in str(refused.value), str(refused.value)
    assert ms.count() == 1


# -- no redirects, JSON for every answer ---------------------------------------------------------

ODD_PATHS = [
    ("DELETE", "/memories/%2F?tag=x"),  # was a 307 to /memories?tag=x: a delete by id made a delete by filter
    ("DELETE", "/memories/%2f?everything=true"),
    ("DELETE", "/memories/?tag=x"),
    ("DELETE", "/memories//?tag=x"),
    ("DELETE", "//memories?tag=x"),
    ("DELETE", "/memories/./1"),
    ("GET", "/memories/../stats"),
    ("GET", "/memories/%2E%2E/stats"),
    ("GET", "/stats/"),
    ("GET", "/search/?q=key"),
    ("POST", "/add/"),
    ("PUT", "/memories/1"),
    ("DELETE", "/search"),
    ("GET", "/nowhere"),
]


@pytest.mark.parametrize(("method", "path"), ODD_PATHS)
def test_no_path_answers_a_redirect_and_every_answer_is_json(served: Served, method: str, path: str) -> None:
    before = _memories(served)
    reply = served.request(method, path, b'{"text": "x"}' if method == "POST" else None, headers={})
    assert reply.status in (404, 405), (reply.status, reply.headers)
    assert "location" not in {name.lower() for name in reply.headers}
    document = reply.json()
    assert set(document) == {"error", "type", "field"} and document["error"]
    assert _memories(served) == before


MCP_ODD_PATHS = [
    ("GET", "/mcp/"),  # the SDK's router redirected it to /mcp with a 307
    ("POST", "/mcp/"),
    ("DELETE", "//mcp"),
    ("GET", "/nowhere"),
    ("PUT", "/health"),
]


@pytest.fixture(scope="module")
def served_mcp(tmp_path_factory: pytest.TempPathFactory, child_env: dict[str, str]) -> Iterator[Served]:
    server = start_server(tmp_path_factory.mktemp("served-mcp") / "memsearch.db", env=child_env, kind="mcp")
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize(("method", "path"), MCP_ODD_PATHS)
def test_mcp_over_http_answers_no_redirect_and_only_json(served_mcp: Served, method: str, path: str) -> None:
    reply = served_mcp.request(method, path, b"{}" if method == "POST" else None, headers={})
    assert reply.status in (404, 405), (reply.status, reply.headers)
    assert "location" not in {name.lower() for name in reply.headers}
    document = reply.json()
    assert set(document) == {"error", "type", "field"} and document["error"]


# -- MCP over stdio reads a line only up to the message limit -------------------------------------


def _lines_of(chunks: list[bytes], limit: int) -> list[bytes | OverLimit]:
    pending = list(chunks)

    async def read() -> bytes:
        return pending.pop(0) if pending else b""

    async def collect() -> list[bytes | OverLimit]:
        return [line async for line in bounded_lines(read, limit)]

    return anyio.run(collect)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=8),
    st.lists(st.integers(1, 30), min_size=1, max_size=12),
    st.integers(1, 25),
    st.booleans(),
)
def test_bounded_lines_are_the_lines_with_the_long_ones_refused(
    lines: list[bytes], cuts: list[int], limit: int, final_break: bool
) -> None:
    """Whatever the chunking, the lines come out as `split` gives them; one past `limit` comes as
    an OverLimit with its first bytes and its length."""
    stream = b"\n".join(lines) + (b"\n" if final_break and lines else b"")
    chunks, at = [], 0
    for size in cuts * (len(stream) // max(sum(cuts), 1) + 1):
        if at >= len(stream):
            break
        chunks.append(stream[at : at + size])
        at += size
    found = _lines_of(chunks, limit)
    expected = lines if final_break or not lines or lines[-1] else lines[:-1]
    assert len(found) == len(expected)
    for line, got in zip(expected, found, strict=True):
        if len(line) > limit:
            assert isinstance(got, OverLimit) and got.size == len(line) and line.startswith(got.head)
        else:
            assert got == line


@pytest.mark.timeout(120)
def test_the_id_of_a_broken_line_is_found_in_linear_time() -> None:
    """A line that opens a string full of escaped quotes and never closes it, with no id before
    it: each quote started a scan to the end of the line (quadratic: 20,000 of them took 6 s, a
    line of megabytes never got its answer)."""
    broken = '{"jsonrpc": "2.0", "method": "tools/call", "params": {"q": "' + '\\"' * 4_000_000
    refusal = refusal_of(broken)
    assert refusal is not None and refusal.id is None and refusal.error.code == -32700


def _peak_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak memory is read from /proc")
def test_an_mcp_line_over_the_limit_is_refused_without_holding_it(raw_mcp: RawMcp) -> None:
    """A request line of three times the limit gets one -32600 under its id; the server's peak
    memory grows by less than the line (it held it whole: 187 → 524 MB for 100 MB), and it
    answers the next request."""
    pid = raw_mcp.process.pid
    before = _peak_kib(pid)
    line = 3 * MAX_LINE_BYTES
    head = b'{"jsonrpc": "2.0", "id": 51, "method": "tools/call", "params": {"name": "mem_search", "arguments": '
    raw_mcp.send(head + b'{"query": "' + b"x" * line + b'"}}}')
    assert raw_mcp.answer(51, timeout=120)["error"] == {
        "code": -32600,
        "message": f"Invalid request: the message is over the limit of {MAX_LINE_BYTES:,} bytes",
    }
    assert (_peak_kib(pid) - before) * 1024 < line
    raw_mcp.send(b'{"jsonrpc": "2.0", "method": "tools/call", "params": {"x": "' + b"y" * line + b'"}, "id": 52}')
    assert raw_mcp.answer(None, timeout=120)["error"]["code"] == -32600  # its id was past the part kept
    assert "result" in raw_mcp.call(53, "mem_stats", {})


def test_the_mcp_sdk_client_gets_an_answer_to_a_message_over_the_limit(
    tmp_path: Path, child_env: dict[str, str]
) -> None:
    found = _sdk_call(tmp_path / "memsearch.db", child_env, "mem_search", {"query": "x" * MAX_LINE_BYTES})
    assert isinstance(found, MCPError), found
    assert str(found) == f"Invalid request: the message is over the limit of {MAX_LINE_BYTES:,} bytes"


# -- a long query is a search by example ------------------------------------------------------------


def _sections() -> list[str]:
    """The README's sections: real prose of many lengths."""
    text = README.read_text(encoding="utf-8")
    return [section.strip() for section in re.split(r"\n(?=#+ )", text) if len(section.strip()) > 200]


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Iterator[tuple[Memsearch, int, str]]:
    """The README's sections as memories; the id and text of the longest."""
    sections = _sections()
    longest = max(sections, key=len)
    assert len(longest) > 6000, "the README's longest section makes the example query"
    with Memsearch(tmp_path_factory.mktemp("readme") / "memsearch.db", encoder=encoder) as ms:
        added = ms.add_many([NewMemory(section[:20_000]) for section in sections])
        yield ms, added[sections.index(longest)].id, longest[:20_000]


@pytest.mark.parametrize(("mode", "within"), [("auto", 1), ("hybrid", 1), ("vector", 3), ("lexical", 3)])
def test_a_paragraph_copied_from_a_memory_finds_it_first(
    documents: tuple[Memsearch, int, str], mode: str, within: int
) -> None:
    """Fused (the default), the memory a query was copied from comes first. Each leg alone is
    near: the vector leg reads only the model's window of the query (here shell commands, which
    the Commands section is about too), and BM25 may rank a short section that shares the query's
    commonest words above a memory three times as long (its length normalisation)."""
    ms, wanted, text = documents
    query = text[1000:6500]  # longer than the old bound of 4,000 characters, from the middle
    assert len(query) > 4000
    found = ms.search(SearchRequest(query, mode=mode, touch=False, k=3))
    assert wanted in [c.id for c in found.results][:within], [c.memory.text[:60] for c in found.results]


def test_the_lexical_legs_search_a_long_querys_most_distinctive_words(
    store_location: Path | str, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """80 words every memory holds, then one only the wanted memory holds: the first 64 words
    (what the lexical legs searched) would tell nothing apart. On both stores, and on a store
    opened read-only (SQLite's word counts are read through a table of the connection's own)."""
    common = [f"word{n}" for n in range(80)]
    query = " ".join(common) + " zirconium"
    with Memsearch(store_location, encoder=encoder) as ms:
        ms.add_many([NewMemory(" ".join(common) + f" filler{n}") for n in range(12)])
        wanted = ms.add(NewMemory(" ".join(common) + " zirconium")).id
        found = ms.search(SearchRequest(query, mode="lexical", touch=False, k=1))
        assert [c.id for c in found.results] == [wanted]
        assert "zirconium" in found.lexical.words and len(found.lexical.words) == 64
    monkeypatch.setenv("MEMSEARCH_READ_ONLY", "1")
    with Memsearch(store_location, encoder=encoder) as ms:
        assert [c.id for c in ms.search(SearchRequest(query, mode="lexical", touch=False, k=1)).results] == [wanted]


def test_distinctive_words_weigh_repeats_by_rarity() -> None:
    counts = [("the", 9), ("deploy", 1), ("key", 3), ("nowhere", 5), ("vault", 1)]
    documents = [900, 10, 50, 0, 10]  # "nowhere" no memory holds: it matches nothing
    assert distinctive_words(counts, documents, 1000, limit=3) == ("deploy", "key", "vault")
    assert distinctive_words(counts, documents, 1000, limit=1) == ("key",)  # 3 × idf(50) beats 1 × idf(10)
    assert distinctive_words(counts, [0] * 5, 1000) == ()


def test_a_long_query_is_read_as_a_question_only_in_its_head() -> None:
    """Dates, names and intents past the first ROUTE_CHARS characters of a document are its
    content, not what it asks: the time leg searches no date named only there."""
    head = "what did we decide on 11 May 2023 "
    query = parse_query(head + "lorem ipsum " * (ROUTE_CHARS // 6) + " and on 14 June 2024 and when was Ana there")
    assert query.date_ranges(None) == parse_query(head).date_ranges(None)
    assert query.names(["Ana"]) == () and parse_query("when was Ana there").names(["Ana"]) == ("Ana",)


def _long_query(length: int) -> str:
    prose = " ".join(_sections())
    return (prose * (length // len(prose) + 1))[:length]


def test_every_front_end_answers_a_long_query_and_refuses_past_one_bound(
    served: Served, tmp_path: Path, child_env: dict[str, str], encoder: Encoder
) -> None:
    """100,000 characters are searched by the library, the CLI, HTTP and MCP; one more than
    MAX_QUERY_CHARS is refused by each, in the same words."""
    long, past = _long_query(100_000), "x " * (MAX_QUERY_CHARS // 2) + "y"
    refusal = f"{len(past):,} characters long; the limit is {MAX_QUERY_CHARS:,}"
    db = tmp_path / "cli.db"
    with Memsearch(db, encoder=encoder) as ms:
        ms.add(NewMemory("the deploy key lives in the vault"))
        assert ms.search(SearchRequest(long, touch=False)).results
        with pytest.raises(MemsearchError, match=refusal):
            ms.search(SearchRequest(past, touch=False))

    shown = runner.invoke(app, ["search", long, "--db", str(db)], env={"TTY_COMPATIBLE": "1", "COLUMNS": "100"})
    assert shown.exit_code == 0, shown.stderr
    assert "deploy key" in shown.stdout and len(shown.stdout) < 5000  # the title shows the query's start only
    refused = runner.invoke(app, ["search", past, "--db", str(db)])
    assert refused.exit_code == 2 and refusal in refused.stderr

    reply = served.request("POST", "/search", {"query": long})
    assert reply.status == 200 and reply.json()["results"], reply.body[:200]
    reply = served.request("POST", "/search", {"query": past})
    assert reply.status == 400 and reply.json()["field"] == "query" and refusal in reply.json()["error"]

    answered = _sdk_call(db, child_env, "mem_search", {"query": long})
    assert not answered.is_error and answered.structured_content["results"]
    answered = _sdk_call(db, child_env, "mem_search", {"query": past})
    assert answered.is_error and refusal in answered.content[0].text
