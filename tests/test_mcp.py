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
from memsearch.operations import ADD, DELETE, GET, SEARCH, STATS, TIMELINE
from tests.serving import server_env

TOOLS = {"mem_search", "mem_add", "mem_get", "mem_timeline", "mem_delete", "mem_stats"}
OPERATIONS = {
    "mem_search": SEARCH, "mem_add": ADD, "mem_get": GET,
    "mem_timeline": TIMELINE, "mem_delete": DELETE, "mem_stats": STATS,
}  # fmt: skip


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
            seen["unknown_argument"] = await call("mem_search", query="port", limit=3)
            seen["bool_k"] = await call("mem_search", query="port", k=True)
            seen["string_k"] = await call("mem_search", query="port", k="2")
            seen["float_k"] = await call("mem_search", query="port", k=1.5)
            seen["huge_k"] = await call("mem_search", query="port", k=10**400)
            seen["bad_mode"] = await call("mem_search", query="port", mode="fuzzy")
            seen["no_query"] = await call("mem_search", k=2)
            seen["bad_importance"] = await call("mem_add", text="x", importance="high")
            seen["bool_ref"] = await call("mem_get", ref=False)
            seen["unknown_stats_argument"] = await call("mem_stats", verbose=True)
            seen["wide_timeline"] = await call("mem_timeline", ref=2, before=5000, after=5)
            seen["too_wide_timeline"] = await call("mem_timeline", ref=2, before=10_001)
            seen["as_of"] = await call(
                "mem_search", query="port", as_of="2030-01-01T00:00:00Z", touch=False, tau_days=0, profile="default"
            )
            seen["boosted"] = await call(
                "mem_search", query="coffee", boost=["project:home=2"], rerank="deterministic", max_ms=5000
            )
    return seen


def test_an_agent_stores_and_recalls_through_every_tool(tmp_path: Path, encoder: Encoder) -> None:
    seen = anyio.run(_session_calls, tmp_path / "store" / "memsearch.db")

    assert set(seen["tools"]) == TOOLS
    for tool in seen["tools"].values():
        assert tool.description and tool.input_schema["type"] == "object"
    for name, operation in OPERATIONS.items():  # every field, as memsearch/operations.py describes it
        schema = seen["tools"][name].input_schema
        assert schema == operation.json_schema() and schema["additionalProperties"] is False, name
        assert all(property_.get("description") for property_ in schema["properties"].values())
    search_schema = seen["tools"]["mem_search"].input_schema
    assert {"profile", "tau_days", "as_of", "touch", "boost", "rerank", "max_ms", "raw", "explain"} <= set(
        search_schema["properties"]
    )
    assert search_schema["required"] == ["query"]
    assert seen["tools"]["mem_timeline"].input_schema["properties"]["before"]["maximum"] == 10_000
    hints = {name: tool.annotations for name, tool in seen["tools"].items()}
    assert all(hints[name].read_only_hint for name in ("mem_get", "mem_stats", "mem_timeline"))
    assert hints["mem_delete"].destructive_hint and not hints["mem_add"].destructive_hint

    assert [r.structured_content["id"] for r in seen["add"]] == [1, 2, 3]
    assert seen["add"][0].structured_content == {  # AddOutcome.to_dict()
        "id": 1, "stored": True, "duplicate_of": None, "similarity": None, "threshold": None,
    }  # fmt: skip
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

    assert len(seen["wide_timeline"].structured_content["memories"]) == 2  # before may exceed 100
    assert seen["as_of"].structured_content["as_of"].startswith("2030-01-01")
    assert seen["boosted"].structured_content["results"][0]["id"] == 2

    for name, wanted in (
        ("bad_tokens", "argument 'max_tokens' must be at least 1, not 0"),
        ("bad_get", "no memory with id 99"),
        ("bad_since", "is neither an ISO-8601 date"),
        ("bad_add", "memory text is empty"),
        ("unknown_argument", "argument 'limit' is not a field of search (known: query, k, mode,"),
        ("bool_k", "argument 'k' must be a whole number, not True"),
        ("string_k", "argument 'k' must be a whole number, not '2'"),
        ("float_k", "argument 'k' must be a whole number, not 1.5"),
        ("huge_k", "argument 'k' must be from 1 to 1000, not a 1329-bit number"),
        ("bad_mode", "argument 'mode' must be one of auto, vector, hybrid, lexical, not 'fuzzy'"),
        ("no_query", "argument 'query' is missing"),
        ("bad_importance", "argument 'importance' must be a number, not 'high'"),
        ("bool_ref", "argument 'ref' must be a memory id or key, not False"),
        ("unknown_stats_argument", "argument 'verbose' is not a field of stats"),
        ("too_wide_timeline", "argument 'before' must be from 0 to 10000, not 10001"),
    ):
        result = seen[name]
        assert result.is_error, name
        text = result.content[0].text
        assert wanted in text and "\n" not in text and "pydantic" not in text, text


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_tool_has_an_actionable_description(tool: str) -> None:
    from memsearch.server.mcp import TOOL_BY_NAME

    assert len(TOOL_BY_NAME[tool].listing().description or "") > 30
