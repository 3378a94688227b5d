"""`memsearch mcp`: the library as MCP tools, on stdio (or streamable HTTP on loopback).

Each tool is one operation of `memsearch.operations` (`TOOLS`: rows of name, operation, description,
annotations): its input schema is the operation's JSON schema (unknown arguments refused), and one
generic call answers every tool: the operation's request from the arguments (strict JSON types,
checked once, in the HTTP API's wording), its run on a `Memsearch` that stays warm for the life of
the process, and its JSON document. Library errors come back as one-line tool errors naming the
argument; anything else is a bug, logged on stderr and reported without a traceback.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)
from pydantic_core import PydanticSerializationError

from memsearch import __version__
from memsearch.errors import MemsearchError
from memsearch.operations import ADD, DELETE, GET, SEARCH, STATS, TIMELINE, Operation
from memsearch.server.common import WarmService

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from memsearch.api import Memsearch

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "memsearch is a long-term memory. Call mem_search before answering anything that may depend on "
    "what was said or decided earlier; call mem_add to remember a fact, decision or preference worth "
    "keeping (one self-contained statement per memory). Results are ranked; each has an id to pass "
    "to mem_get, mem_timeline or mem_delete."
)

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
# Every tool answers with one JSON object, as structured content and as its text.
OUTPUT_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": True}


@dataclass(frozen=True)
class McpTool:
    """An operation as an MCP tool: its name, what the agent reads, and its hints; the one
    generic call (`run`) is the operation's answer to the arguments."""

    name: str
    operation: Operation
    description: str
    annotations: ToolAnnotations

    def listing(self) -> Tool:
        return Tool(
            name=self.name,
            description=self.description,
            input_schema=self.operation.json_schema(),
            output_schema=OUTPUT_SCHEMA,
            annotations=self.annotations,
        )

    def run(self, ms: Memsearch, arguments: dict[str, Any]) -> dict[str, Any]:
        document: dict[str, Any] = self.operation.answer(ms, arguments)
        return document


# The tools: (name, operation, description, annotations).
TOOLS: tuple[McpTool, ...] = (
    McpTool(
        "mem_search",
        SEARCH,
        "Search the memories. Returns the same JSON document as `memsearch search --format json`: "
        "results ranked best first, each with id, text, score, created_at, tags and scope fields "
        "(without the per-result `explain` breakdown unless explain is true).",
        WRITES,  # a search records an access of its results (unless touch is false or as_of is given)
    ),
    McpTool(
        "mem_add",
        ADD,
        "Store one memory. Returns its id; with a deduplicating profile, a near-duplicate is not "
        "stored and the existing memory's id is returned with stored=false.",
        WRITES,
    ),
    McpTool("mem_get", GET, "One memory with every field, by id or key.", READ_ONLY),
    McpTool(
        "mem_timeline",
        TIMELINE,
        "The memories around one in order: for a conversation turn, the turns around it in its "
        "session; for a note, the memories around it in time. `current` marks the one asked for.",
        READ_ONLY,
    ),
    McpTool(
        "mem_delete",
        DELETE,
        "Delete memories by id or key (all of them, or none if any is not found), or every memory the "
        "filters match (as mem_search's filters; every memory only with everything=true). Returns the "
        "deleted ids; with dry_run=true, the ids that would be deleted (would_delete), deleting nothing.",
        DESTRUCTIVE,
    ),
    McpTool(
        "mem_stats",
        STATS,
        "What the store holds: counts of memories by kind, project and namespace, the model, the file.",
        READ_ONLY,
    ),
)
TOOL_BY_NAME = {tool.name: tool for tool in TOOLS}


def tool_message(error: MemsearchError) -> str:
    """The library's message, its field worded as the tool argument (they have the same names)."""
    return str(error) if error.field is None else f"argument {error.field!r} {error.problem}"


def _text_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def build_server(service: WarmService) -> Server[Any]:
    ms = service.ms

    async def list_tools(ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[tool.listing() for tool in TOOLS])

    async def call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        tool = TOOL_BY_NAME.get(params.name)
        if tool is None:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name} (known: {', '.join(TOOL_BY_NAME)})")
        try:
            document = await anyio.to_thread.run_sync(partial(tool.run, ms, dict(params.arguments or {})))
        except MemsearchError as error:
            return _text_result(tool_message(error))
        except Exception as error:  # a bug: its traceback goes to stderr, never to the agent
            logger.exception("tool %s failed", tool.name)
            return _text_result(f"{tool.name} failed: internal error ({type(error).__name__}); see the server's log")
        try:
            text = json.dumps(document, indent=2, ensure_ascii=False)
            result = CallToolResult(content=[TextContent(type="text", text=text)], structured_content=document)
            result.model_dump(by_alias=True, mode="json")  # as the SDK will: it fails on nesting past ~250 levels
        except (PydanticSerializationError, ValueError, RecursionError) as error:  # a memory's deep metadata
            return _text_result(f"{tool.name}: the answer cannot be encoded as JSON ({error})")
        return result

    return Server(
        "memsearch",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def run_mcp(
    db: str | os.PathLike[str] | None,
    model: str | None,
    *,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = 8766,
    no_token: bool = False,
) -> None:
    """Serve until stdin closes (stdio) or until interrupted (HTTP)."""
    if not http:
        from memsearch.server.mcp_stdio import serve_stdio

        service = WarmService(db, model)
        try:
            anyio.run(serve_stdio, build_server(service))
        finally:
            service.close()
        return
    _serve_http(db, model, host, port, no_token=no_token)


def _serve_http(db: str | os.PathLike[str] | None, model: str | None, host: str, port: int, *, no_token: bool) -> None:
    """Streamable HTTP at http://HOST:PORT/mcp behind the HTTP API's boundary and transport
    (memsearch.server.http_guard and http_transport: Host, Origin and bearer token; deadlines,
    size and connection limits), advertised like `memsearch serve` (in STORE.mcp.json, with the
    token it made) and announced on stderr once the port is bound."""
    from memsearch.discovery import Advertisement
    from memsearch.server.http import json_answers_only, token_note
    from memsearch.server.http_guard import guarded, host_names, server_token
    from memsearch.server.http_transport import is_loopback, listening_socket, serve_app

    token = server_token(host, no_token=no_token, loopback=is_loopback(host))
    advertisement = Advertisement.claim(db, token.value, kind="mcp")
    listener = listening_socket(host, port)
    bound_port = listener.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{bound_port}/mcp"
    service = WarmService(db, model)
    app = guarded(
        _with_health(json_answers_only(build_server(service).streamable_http_app(host=host)), service),
        token=token.value,
        hosts=host_names(host),
        port=bound_port,
    )
    advertisement.publish(url, authenticated=token.value is not None, made_token=token.value if token.made else None)
    note = token_note(token, "memsearch token --mcp")
    print(f"memsearch mcp: serving MCP (streamable HTTP) at {url} ({note})", file=sys.stderr, flush=True)

    def stop() -> None:
        advertisement.withdraw()
        service.close()

    serve_app(app, listener, lifespan="on", on_stop=stop)


def _with_health(app: ASGIApp, service: WarmService) -> ASGIApp:
    """`app` with `/health` as `memsearch serve` answers it (how a second server of the same
    store finds this one running)."""
    from starlette.responses import JSONResponse

    from memsearch.server.common import health_document
    from memsearch.server.http_guard import AUTHENTICATED

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/health" and scope["method"] in ("GET", "HEAD"):
            document = health_document(bool(scope.get(AUTHENTICATED)), service.ms.path)
            await JSONResponse(document)(scope, receive, send)
            return
        await app(scope, receive, send)

    return route
