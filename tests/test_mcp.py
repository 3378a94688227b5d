"""`memsearch mcp` as a subprocess, driven over stdio by the MCP SDK's own ClientSession."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from memsearch.embedding import Encoder
from tests.serving import server_env

TOOLS = {"mem_search", "mem_add", "mem_get", "mem_timeline", "mem_delete", "mem_stats"}


async def _session_calls(db: Path) -> dict[str, Any]:
    """Every tool, in the order an agent would use them; returns what came back."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memsearch", "mcp", "--db", str(db)], env=server_env()
    )
    seen: dict[str, Any] = {}
    with anyio.fail_after(180):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = (await session.list_tools()).tools
            seen["tools"] = {tool.name: tool for tool in listed}

            async def call(name: str, **arguments: Any) -> Any:
                return await session.call_tool(name, arguments)

            seen["add"] = [
                await call("mem_add", text="The deploy key lives in 1Password", tags=["ops"], key="deploy-key"),
                await call("mem_add", text="Alice prefers dark roast coffee", project="home"),
                await call("mem_add", text="The staging database listens on port 5433"),
            ]
            seen["search"] = await call("mem_search", query="which port does staging use", k=2)
            seen["search_explained"] = await call("mem_search", query="coffee", k=1, explain=True, raw=True)
            seen["scoped"] = await call("mem_search", query="coffee", project="elsewhere", mode="lexical")
            seen["turns_only"] = await call("mem_search", query="port", kinds=["turn"], roles=["user"])
            seen["recent"] = await call("mem_search", query="port", since="1d", k=1)
            seen["bad_since"] = await call("mem_search", query="x", since="3x")
            seen["get"] = await call("mem_get", ref="deploy-key")
            seen["timeline"] = await call("mem_timeline", ref=2, before=1, after=1)
            seen["delete"] = await call("mem_delete", refs=[1, "nope"])
            seen["delete_ok"] = await call("mem_delete", refs=["deploy-key"])
            seen["stats"] = await call("mem_stats")
            seen["bad_tokens"] = await call("mem_search", query="x", max_tokens=0)
            seen["bad_get"] = await call("mem_get", ref=99)
            seen["bad_add"] = await call("mem_add", text="   ")
    return seen


def test_an_agent_stores_and_recalls_through_every_tool(tmp_path: Path, encoder: Encoder) -> None:
    seen = anyio.run(_session_calls, tmp_path / "store" / "memsearch.db")

    assert set(seen["tools"]) == TOOLS
    for tool in seen["tools"].values():
        assert tool.description and tool.input_schema["type"] == "object"
    search_schema = seen["tools"]["mem_search"].input_schema
    assert {"query", "k", "mode", "profile", "project", "namespace", "tags", "since", "until"} <= set(
        search_schema["properties"]
    )
    assert {"granularity", "explain", "raw", "kinds", "conversation", "roles", "sessions"} <= set(
        search_schema["properties"]
    )
    assert search_schema["required"] == ["query"]
    assert all(property_.get("description") for property_ in search_schema["properties"].values())

    assert [r.structured_content["id"] for r in seen["add"]] == [1, 2, 3]
    found = seen["search"].structured_content
    assert not seen["search"].is_error and found["schema_version"] == 1
    assert found["results"][0]["id"] == 3 and "explain" not in found["results"][0]
    assert json.loads(seen["search"].content[0].text) == found  # the same document as text, for older clients
    explained = seen["search_explained"].structured_content
    assert "explain" in explained["results"][0] and "candidates" in explained
    assert seen["scoped"].structured_content["results"] == []
    assert seen["turns_only"].structured_content["results"] == []
    assert len(seen["recent"].structured_content["results"]) == 1

    assert seen["get"].structured_content["text"] == "The deploy key lives in 1Password"
    timeline = seen["timeline"].structured_content
    assert timeline["current"] == 2 and [m["id"] for m in timeline["memories"]] == [1, 2, 3]

    assert seen["delete"].is_error and "nope" in seen["delete"].content[0].text  # nothing deleted
    assert seen["delete_ok"].structured_content == {"deleted": [1]}
    assert seen["stats"].structured_content["memories"] == 2

    for name, wanted in (
        ("bad_tokens", "argument 'max_tokens' must be at least 1"),
        ("bad_get", "no memory with id 99"),
        ("bad_since", "is neither an ISO-8601 date"),
        ("bad_add", "memory text is empty"),
    ):
        result = seen[name]
        assert result.is_error, name
        text = result.content[0].text
        assert wanted in text and "Traceback" not in text, text


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_tool_has_an_actionable_description(tool: str) -> None:
    from memsearch.server.common import WarmService
    from memsearch.server.mcp import build_server

    server = build_server(WarmService(None, warm=False))
    listed = {t.name: t for t in anyio.run(server.list_tools)}
    assert len(listed[tool].description or "") > 30
