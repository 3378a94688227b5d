"""`memsearch mcp --http`: it names its URL on stderr once listening, and the SDK's client reaches it there."""

from __future__ import annotations

import json
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memsearch.discovery import discovery_path
from memsearch.embedding import Encoder
from tests.serving import server_env, start_server

URL = re.compile(r"http://127\.0\.0\.1:[0-9]+/mcp\b")


def _announced_url(process: subprocess.Popen[bytes], timeout: float) -> tuple[str, str]:
    """The URL the server prints on stderr, and all it printed until then."""
    assert process.stderr is not None
    deadline, seen = time.monotonic() + timeout, b""
    while (found := URL.search(seen.decode(errors="replace"))) is None:
        ready, _, _ = select.select([process.stderr], [], [], max(deadline - time.monotonic(), 0))
        chunk = process.stderr.read1(4096) if ready else b""  # type: ignore[attr-defined]
        assert chunk, f"no URL on stderr: {seen.decode(errors='replace')}"
        seen += chunk
    return found.group(), seen.decode(errors="replace")


async def _stats_over_http(url: str, token: str) -> tuple[set[str], int]:
    with anyio.fail_after(60):
        client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
        async with (
            client,
            streamable_http_client(url, http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            stats = await session.call_tool("mem_stats", {})
            return tools, stats.structured_content["memories"]


def test_mcp_over_http_prints_its_url_and_serves_there(tmp_path: Path, encoder: Encoder) -> None:
    db = tmp_path / "store" / "memsearch.db"
    command = [sys.executable, "-m", "memsearch", "mcp", "--http", "--port", "0", "--db", str(db)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=server_env())
    try:
        url, printed = _announced_url(process, timeout=120)
        assert "Traceback" not in printed
        assert printed.strip().endswith(f"at {url} (bearer token required: `memsearch token --mcp` prints it)")
        token = json.loads(discovery_path(db, "mcp").read_text())["token"]
        assert token not in printed
        tools, memories = anyio.run(_stats_over_http, url, token)
        assert "mem_search" in tools and memories == 0
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_a_second_mcp_http_server_of_the_same_store_is_refused(tmp_path: Path, encoder: Encoder) -> None:
    """Like `serve`: one advertises the store (STORE.mcp.json, with its token); a second would
    replace the first's file and remove it on exit."""
    db = tmp_path / "store" / "memsearch.db"
    first = start_server(db, kind="mcp")
    try:
        second = subprocess.run(
            [sys.executable, "-m", "memsearch", "mcp", "--http", "--port", "0", "--db", str(db)],
            capture_output=True, text=True, env=server_env(), timeout=120,
        )  # fmt: skip
        served_already = f"{db} is served already at {first.url} (pid {first.process.pid})"
        assert second.returncode == 1
        assert second.stderr.strip().splitlines() == [f"memsearch: {served_already}; use that server, or stop it first"]
    finally:
        assert first.stop() == 0
    assert not discovery_path(db, "mcp").exists()
