"""MCP over stdio, answering every request: the SDK's own `stdio_server`, fed through a guard.

The SDK's stdio reader drops silently a line it cannot read (not JSON, not a JSON-RPC message,
nested past its parser's ~200 levels, a lone surrogate escape like `\\ud800`, a number too long
for it): a client that sent a request waits forever. And it reads a line whole, however long. So
stdin is read here first, in chunks, a line at a time up to MAX_LINE_BYTES (a longer line is
dropped as it arrives, its first bytes kept to find its id); the lines the SDK reads go on to it
unchanged, and each other line is answered here with one JSON-RPC error: -32700 (not JSON),
-32600 (not a request the server can take, or over the limit) or -32602 (its params nest too
deeply, hold a lone surrogate or a number of too many digits), under the request's id when one
can be read, else `null`. A notification is never answered.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from memsearch.errors import NumberTooLongError
from memsearch.jsonl import TOO_DEEP, decode_json
from memsearch.operations import MAX_MESSAGE_BYTES

MAX_DEPTH = 200  # about what the SDK's JSON parser (jiter) reads: objects and arrays inside one another
MAX_LINE_BYTES = MAX_MESSAGE_BYTES  # one message, as an HTTP body
READ_BYTES = 1 << 16  # read from stdin at a time
ID_SCAN_CHARS = 1 << 16  # how much of a line the search for its "id" reads (it comes first, as clients write it)

# A JSON string (or one left open at the end of the text, so no start inside it is tried again)
# or a bracket: enough to find the top-level "id" of a line too deep or too broken to parse.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)|[{}\[\]]', re.DOTALL)


@dataclass
class OverLimit:
    """A line longer than the limit: its first bytes (to find its id) and how long it was."""

    head: bytes
    size: int


async def bounded_lines(read: Callable[[], Awaitable[bytes]], limit: int) -> AsyncIterator[bytes | OverLimit]:
    """The lines of a byte stream (`read` gives its next chunk, b"" at its end), without their
    line breaks; a line past `limit` bytes as an OverLimit, not held: memory stays bounded."""
    line = bytearray()
    over: OverLimit | None = None
    while chunk := await read():
        start = 0
        while start <= len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if over is not None:
                over.size += len(piece)
            else:
                line += piece
                if len(line) > limit:
                    over, line = OverLimit(bytes(line[:ID_SCAN_CHARS]), len(line)), bytearray()
            if end < 0:
                break
            yield over if over is not None else bytes(line)
            over, line, start = None, bytearray(), end + 1
    if over is not None or line:
        yield over if over is not None else bytes(line)


async def _stdin_chunk() -> bytes:
    return await anyio.to_thread.run_sync(os.read, sys.stdin.fileno(), READ_BYTES)


async def serve_stdio(server: Server[Any], read: Callable[[], Awaitable[bytes]] = _stdin_chunk) -> None:
    """Serve `server` on the process's stdin (or what `read` gives) and stdout until stdin closes."""
    refusals_in, refusals_out = anyio.create_memory_object_stream[JSONRPCError](max_buffer_size=64)

    async def readable() -> AsyncIterator[str]:
        async with refusals_in:
            async for raw in bounded_lines(read, MAX_LINE_BYTES):
                if isinstance(raw, OverLimit):
                    await refusals_in.send(over_limit(raw))
                    continue
                line = raw.decode("utf-8", errors="replace")
                if not line.strip():
                    continue
                if _sdk_reads(line):
                    yield line
                elif (refusal := refusal_of(line)) is not None:
                    await refusals_in.send(refusal)

    async with stdio_server(stdin=readable()) as (read_stream, write_stream):  # type: ignore[arg-type]

        async def answer_refusals() -> None:
            async with refusals_out:
                async for refusal in refusals_out:
                    try:
                        await write_stream.send(SessionMessage(refusal))
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return  # the server is closing: stdout is gone

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(answer_refusals)
            await server.run(read_stream, write_stream, server.create_initialization_options())
            tasks.cancel_scope.cancel()


def _sdk_reads(line: str) -> bool:
    """Whether the SDK reads the line as what it is: a request with an id it cannot read (true,
    null, 1.5) passes its parser as a notification, never answered."""
    try:
        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError:
        return False
    if isinstance(message, JSONRPCNotification) and '"id"' in line:
        try:
            return "id" not in json.loads(line)
        except (ValueError, RecursionError):
            return False
    return True


def over_limit(line: OverLimit) -> JSONRPCError:
    """The error that answers a line over MAX_LINE_BYTES (read only up to the limit)."""
    problem = f"Invalid request: the message is over the limit of {MAX_LINE_BYTES:,} bytes"
    return _error(top_level_id(line.head.decode("utf-8", errors="replace")), INVALID_REQUEST, problem)


def refusal_of(line: str) -> JSONRPCError | None:
    """The error that answers a line the SDK cannot read; None for a notification or a reply."""
    try:
        message = decode_json(line, parse_constant=_refuse_constant)
    except NumberTooLongError as error:  # refused as the HTTP API refuses it, naming the argument
        if error.path[:2] == ("params", "arguments") and len(error.path) > 2:
            argument = error.within(2)
            return _error(
                top_level_id(line), INVALID_PARAMS, f"Invalid params: argument {argument.field!r} {argument.problem}"
            )
        return _error(top_level_id(line), INVALID_REQUEST, f"Invalid request: {error}")
    except ValueError as error:  # not JSON (nested too deeply too), NaN
        if isinstance(error, json.JSONDecodeError) and error.msg == TOO_DEEP:
            return _error(
                top_level_id(line), INVALID_REQUEST, f"Invalid request: nested deeper than {MAX_DEPTH} levels"
            )
        return _error(top_level_id(line), PARSE_ERROR, f"Parse error: {error}")
    if not isinstance(message, dict):
        batch = " (batches are not supported)" if isinstance(message, list) else ""
        return _error(None, INVALID_REQUEST, f"Invalid request: a message must be a JSON object{batch}")
    if "method" not in message and ("result" in message or "error" in message):
        return None  # a reply to a request of ours: nothing to answer
    if "id" not in message and isinstance(message.get("method"), str):
        return None  # a notification: never answered, even when malformed
    request_id = message.get("id")
    if not _is_request_id(request_id):
        return _error(None, INVALID_REQUEST, "Invalid request: 'id' must be a string or a whole number")
    problem = _envelope_problem(message)
    if problem is not None:
        return _error(request_id, INVALID_REQUEST, f"Invalid request: {problem}")
    depth, has_surrogate = _inspect(message.get("params"))
    if has_surrogate:
        return _error(
            request_id,
            INVALID_PARAMS,
            "Invalid params: a string holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which is not text",
        )
    if depth + 1 > MAX_DEPTH:
        return _error(request_id, INVALID_PARAMS, f"Invalid params: nested deeper than {MAX_DEPTH} levels")
    return _error(request_id, INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 request")


def top_level_id(line: str) -> str | int | None:
    """The "id" member of the JSON object the line holds, found without parsing the rest (in its
    first ID_SCAN_CHARS characters, in time linear in them)."""
    line = line[:ID_SCAN_CHARS]
    if not line.lstrip().startswith("{"):
        return None
    depth = 0
    for token in _TOKEN.finditer(line):
        text = token.group()
        if text in "{[":
            depth += 1
        elif text in "}]":
            depth -= 1
        elif depth == 1 and text == '"id"':
            rest = line[token.end() :].lstrip()
            if not rest.startswith(":"):
                continue  # a value "id", not the key
            try:
                value, _ = json.JSONDecoder().raw_decode(rest[1:].lstrip())
            except (ValueError, RecursionError):
                return None
            return value if _is_request_id(value) else None
    return None


def _is_request_id(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, str) and _is_text(value))


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _envelope_problem(message: dict[str, Any]) -> str | None:
    if message.get("jsonrpc") != "2.0":
        return "'jsonrpc' must be \"2.0\""
    method = message.get("method")
    if not isinstance(method, str) or not _is_text(method):
        return "'method' must be a string"
    if message.get("params") is not None and not isinstance(message["params"], dict):
        return "'params' must be an object"
    return None


def _inspect(value: object) -> tuple[int, bool]:
    """How deep objects and arrays nest in `value`, and whether any string in it is not text."""
    deepest, has_surrogate = 0, False
    pending: list[tuple[object, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            deepest = max(deepest, depth + 1)
            has_surrogate = has_surrogate or not all(_is_text(key) for key in item)
            pending.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            deepest = max(deepest, depth + 1)
            pending.extend((child, depth + 1) for child in item)
        elif isinstance(item, str):
            has_surrogate = has_surrogate or not _is_text(item)
    return deepest, has_surrogate


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def _error(request_id: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
