"""`memsearch mcp`: the library as MCP tools, on stdio (or streamable HTTP on loopback).

Every tool makes one library call on a `Memsearch` that stays warm for the life of the process.
Library errors come back as tool errors with the library's message, the field named as the tool
argument; anything else is a bug and the SDK reports it without a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from memsearch import __version__
from memsearch.errors import MemsearchError
from memsearch.retrieval.request import request_from_fields
from memsearch.server.common import MAX_QUERY_CHARS, WarmService, check_text, new_memory, parse_ref

# The tool argument for each library field whose name differs from it.
ARGUMENT_OF_FIELD = {"tau_days": "tau_days", "fmt": "format"}

T = TypeVar("T")

INSTRUCTIONS = (
    "memsearch is a long-term memory. Call mem_search before answering anything that may depend on "
    "what was said or decided earlier; call mem_add to remember a fact, decision or preference worth "
    "keeping (one self-contained statement per memory). Results are ranked; each has an id to pass "
    "to mem_get, mem_timeline or mem_delete."
)


def tool_message(error: MemsearchError) -> str:
    """The library's message, its field worded as the tool argument."""
    if error.field is None:
        return str(error)
    return f"argument {ARGUMENT_OF_FIELD.get(error.field, error.field)!r} {error.problem}"


def _call(action: Callable[[], T]) -> T:
    try:
        return action()
    except MemsearchError as error:
        raise ToolError(tool_message(error)) from None


Ref = Annotated[int | str, Field(description="The memory's id (a number) or its key (a string).")]
Mode = Literal["auto", "vector", "hybrid", "lexical"]


def build_server(service: WarmService) -> MCPServer:
    ms = service.ms
    server = MCPServer("memsearch", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False))
    def mem_search(
        query: Annotated[str, Field(description="What to look for, in natural language or keywords.")],
        k: Annotated[int | None, Field(description="How many results (1-1000); default: the profile's.")] = None,
        mode: Annotated[
            Mode, Field(description="auto picks vector or hybrid per query; lexical is keyword-only (BM25).")
        ] = "auto",
        profile: Annotated[
            str | None, Field(description="Ranking profile (default, cems, siftcoder, …); default: default.")
        ] = None,
        project: Annotated[str | None, Field(description="Only memories of this project.")] = None,
        namespace: Annotated[str | None, Field(description="Only memories of this namespace.")] = None,
        tags: Annotated[list[str] | None, Field(description="Only memories that have all these tags.")] = None,
        since: Annotated[
            str | None, Field(description="Only memories created at or after this time: ISO-8601, or 7d, 2w, today.")
        ] = None,
        until: Annotated[
            str | None, Field(description="Only memories created at or before this time: ISO-8601, or 7d, yesterday.")
        ] = None,
        kinds: Annotated[list[str] | None, Field(description="Only these kinds: note, turn, session.")] = None,
        conversation: Annotated[str | None, Field(description="Only this conversation's memories.")] = None,
        roles: Annotated[list[str] | None, Field(description="Only memories of these roles (speakers).")] = None,
        sessions: Annotated[list[str] | None, Field(description="Only memories of these sessions.")] = None,
        granularity: Annotated[
            Literal["turn", "session"],
            Field(description="turn: turns and notes; session: whole conversation sessions."),
        ] = "turn",
        max_tokens: Annotated[int | None, Field(description="Token budget for all results' text.")] = None,
        boost: Annotated[
            list[str] | None,
            Field(description="Score multipliers: tag:NAME[=FACTOR] or project:NAME[=FACTOR] (default 1.5)."),
        ] = None,
        rerank: Annotated[
            Literal["off", "deterministic", "llm"] | None,
            Field(description="Re-rank the top fused candidates (default: the profile's)."),
        ] = None,
        max_ms: Annotated[
            int | None, Field(description="Latency budget in ms: LLM stages that would not fit are skipped.")
        ] = None,
        explain: Annotated[
            bool, Field(description="Keep each result's score breakdown (legs, fusion, factors).")
        ] = False,
        raw: Annotated[
            bool, Field(description="Also return every candidate before filtering, with why it was dropped.")
        ] = False,
    ) -> dict[str, Any]:
        """Search the memories. Returns the same JSON document as `memsearch search --format json`:
        results ranked best first, each with id, text, score, created_at, tags and scope fields
        (without the per-result `explain` breakdown unless explain is true)."""

        def run() -> dict[str, Any]:
            request = request_from_fields(
                check_text("query", query, MAX_QUERY_CHARS),
                k=k,
                mode=mode,
                project=project,
                namespace=namespace,
                tags=tags,
                since=since,
                until=until,
                kinds=kinds,
                conversation=conversation,
                roles=roles,
                sessions=sessions,
                granularity=granularity,
                max_tokens=max_tokens,
                boost=boost,
                rerank=rerank,
                max_ms=max_ms,
                profile=profile,
            )
            return ms.search(request).to_dict(raw=raw, explain=explain)

        return _call(run)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False))
    def mem_add(
        text: Annotated[str, Field(description="The memory: one self-contained statement.")],
        key: Annotated[str | None, Field(description="A unique key to find or replace it by.")] = None,
        tags: Annotated[list[str] | None, Field(description="Tags.")] = None,
        importance: Annotated[float, Field(description="0 to 1.")] = 0.5,
        priority: Annotated[float, Field(description="1 to 2; ranking boost.")] = 1.0,
        pinned: Annotated[bool, Field(description="Pinned memories are boosted and never superseded.")] = False,
        project: Annotated[str | None, Field(description="The project it belongs to.")] = None,
        namespace: Annotated[str | None, Field(description="Its namespace.")] = None,
        session: Annotated[str | None, Field(description="The session it came from.")] = None,
        role: Annotated[str | None, Field(description="Who said it (user, assistant, …).")] = None,
        created_at: Annotated[str | None, Field(description="When, ISO-8601; default: now.")] = None,
        metadata: Annotated[dict[str, Any] | None, Field(description="Any JSON object to keep with it.")] = None,
        replace: Annotated[bool, Field(description="Overwrite the memory that has the same key.")] = False,
        profile: Annotated[
            str | None, Field(description="A profile whose ingest dedup may find it a near-duplicate.")
        ] = None,
    ) -> dict[str, Any]:
        """Store one memory. Returns its id; with a deduplicating profile, a near-duplicate is not
        stored and the existing memory's id is returned with stored=false."""
        fields = {
            "text": text,
            "key": key,
            "tags": tags,
            "importance": importance,
            "priority": priority,
            "pinned": pinned,
            "project": project,
            "namespace": namespace,
            "session": session,
            "role": role,
            "created_at": created_at,
            "metadata": metadata,
        }

        def run() -> dict[str, Any]:
            memory = new_memory({name: value for name, value in fields.items() if value is not None})
            outcome = ms.add(memory, replace=replace, profile=profile)
            return add_document(outcome)

        return _call(run)

    @server.tool(annotations=read_only)
    def mem_get(ref: Ref) -> dict[str, Any]:
        """One memory with every field, by id or key."""
        return _call(lambda: ms.get(parse_ref(ref)).to_dict())

    @server.tool(annotations=read_only)
    def mem_timeline(
        ref: Ref,
        before: Annotated[int, Field(description="How many memories before it.", ge=0, le=100)] = 5,
        after: Annotated[int, Field(description="How many memories after it.", ge=0, le=100)] = 5,
    ) -> dict[str, Any]:
        """The memories around one in order: for a conversation turn, the turns around it in its
        session; for a note, the memories around it in time. `current` marks the one asked for."""

        def timeline() -> dict[str, Any]:
            return ms.timeline(parse_ref(ref), before=before, after=after).to_dict()

        return _call(timeline)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False))
    def mem_delete(
        refs: Annotated[list[int | str], Field(description="Ids or keys of the memories to delete.", min_length=1)],
    ) -> dict[str, Any]:
        """Delete memories: all of them, or none if any is not found. Returns the deleted ids."""
        return _call(lambda: {"deleted": ms.delete([parse_ref(ref) for ref in refs])})

    @server.tool(annotations=read_only)
    def mem_stats() -> dict[str, Any]:
        """What the store holds: counts of memories by kind, project and namespace, the model, the file."""
        return _call(ms.stats)

    return server


def add_document(outcome: Any) -> dict[str, Any]:
    return {
        "id": outcome.id,
        "stored": outcome.stored,
        "duplicate_of": outcome.duplicate_of,
        "similarity": outcome.similarity,
    }


def run_mcp(
    db: str | os.PathLike[str] | None,
    model: str | None,
    *,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = 8766,
) -> None:
    """Serve until stdin closes (stdio) or until interrupted (HTTP)."""
    service = WarmService(db, model)
    server = build_server(service)
    try:
        if http:
            server.run("streamable-http", host=host, port=port)
        else:
            server.run("stdio")
    finally:
        service.close()
