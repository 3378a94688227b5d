"""`memsearch serve`: an HTTP JSON API over one warm `Memsearch` (Starlette on uvicorn).

Every endpoint parses, makes one library call on a worker thread and returns the CLI's JSON
document. The routes, their parameters and the OpenAPI description come from one table
(`ENDPOINTS`). Off loopback every request needs the bearer token.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from memsearch import __version__
from memsearch.config import config_path, configured_token
from memsearch.errors import (
    DuplicateKeyError,
    ImportLineError,
    InvalidInputError,
    MemoryNotFoundError,
    MemsearchError,
    ModelMismatchError,
    StoreNotFoundError,
)
from memsearch.retrieval.request import REQUEST_NAMES, request_from_fields
from memsearch.server.common import MAX_QUERY_CHARS, WarmService, check_text, new_memory, parse_ref

MAX_BODY_BYTES = 16 * 1024 * 1024  # an import of a large conversation file fits; a mistake does not
MAX_URL_BYTES = 8 * 1024
STATUS_OF_ERROR: dict[type[MemsearchError], int] = {
    InvalidInputError: 400,
    ImportLineError: 400,
    MemoryNotFoundError: 404,
    StoreNotFoundError: 404,
    DuplicateKeyError: 409,
    ModelMismatchError: 409,
}


class BadRequest(Exception):
    """A request the API refuses before any library call (400 unless told otherwise)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def error_response(message: str, status: int, *, kind: str = "BadRequest", field_name: str | None = None) -> Response:
    return JSONResponse({"error": message, "type": kind, "field": field_name}, status_code=status)


# -- request parsing -------------------------------------------------------------------------


async def read_json(request: Request, *, limit: int = MAX_BODY_BYTES) -> Any:
    return _decode_json(await read_body(request, limit=limit))


async def read_body(request: Request, *, limit: int = MAX_BODY_BYTES) -> bytes:
    """The body, refused with a 400 as soon as it passes `limit` (whatever Content-Length says)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(f"request body is {int(declared)} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _decode_json(body: bytes) -> Any:
    if not body.strip():
        raise BadRequest("request body is empty; send a JSON object")
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise BadRequest(f"request body is not valid JSON ({error})") from None


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequest("request body must be a JSON object")
    return value


def _known(body: dict[str, Any], names: set[str]) -> None:
    unknown = sorted(set(body) - names)
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r} (known: {', '.join(sorted(names))})")


def _int_param(request: Request, name: str) -> int | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise InvalidInputError(f"must be a whole number, not {value!r}", field=name) from None


def _bool_param(request: Request, name: str) -> bool:
    value = request.query_params.get(name, "").lower()
    if value in ("", "0", "false", "no"):
        return False
    if value in ("1", "true", "yes"):
        return True
    raise InvalidInputError(f"must be true or false, not {value!r}", field=name)


# -- endpoints -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """One route: its handler and what the OpenAPI description says about it."""

    method: str
    path: str
    handler: Callable[[Service, Request], Awaitable[Any]]
    summary: str
    parameters: tuple[tuple[str, str, str, str], ...] = ()  # (name, in, type, description)
    body: dict[str, Any] | None = None  # a JSON schema, or {"text": description} for a text body
    responses: dict[str, str] = field(default_factory=lambda: {"200": "the CLI's JSON document"})


class Service:
    """The warm library and the handlers' one way to call it (off the event loop)."""

    def __init__(self, warm: WarmService) -> None:
        self.warm = warm
        self.ms = warm.ms

    async def call(self, function: Callable[[], Any]) -> Any:
        return await anyio.to_thread.run_sync(function)


SEARCH_FIELDS = {
    "query": ("string", "What to search for."),
    "k": ("integer", "How many results (default: the profile's)."),
    "mode": ("string", "auto, vector, hybrid or lexical."),
    "profile": ("string", "Ranking profile."),
    "project": ("string", "Only this project (a boost instead, for profiles that boost projects)."),
    "namespace": ("string", "Only this namespace."),
    "tags": ("array", "Only memories with all these tags."),
    "since": ("string", "Only memories created at or after this time: ISO-8601, or 7d, 2w, 3h, 30m, today."),
    "until": ("string", "Only memories created at or before this time: ISO-8601, or 7d, 2w, 3h, 30m, yesterday."),
    "kinds": ("array", "Only these kinds: note, turn, session."),
    "conversation": ("string", "Only this conversation's memories."),
    "roles": ("array", "Only memories of these roles (speakers)."),
    "sessions": ("array", "Only memories of these sessions."),
    "granularity": ("string", "turn or session."),
    "max_tokens": ("integer", "Token budget for the results."),
    "as_of": ("string", "The 'now' for time decay, ISO-8601 (such a search changes nothing)."),
    "touch": ("boolean", "Record the search as an access of its results (default true)."),
    "tau_days": ("number", "Time-decay constant in days."),
    "raw": ("boolean", "Also return every candidate before filtering."),
    "explain": ("boolean", "Keep each result's score breakdown."),
    "boost": ("array", "Score multipliers: tag:NAME[=FACTOR] or project:NAME[=FACTOR] (default 1.5)."),
    "rerank": ("string", "off, deterministic or llm (default: the profile's)."),
    "max_ms": ("integer", "Latency budget in ms: LLM stages that would not fit are skipped."),
}
# CEMS's body (POST /api/memory/search): its names for ours, and fields accepted for compatibility
# that have no counterpart here (LLM query synthesis, graph traversal).
CEMS_FIELDS = {
    "query": ("string", "What to search for."),
    "mode": ("string", "auto, vector, hybrid or lexical."),
    "limit": ("integer", "Maximum results."),
    "max_tokens": ("integer", "Token budget for the results."),
    "scope": ("string", "personal or shared (a namespace), or both."),
    "project": ("string", "Project id to boost (the cems profile) or filter by."),
    "raw": ("boolean", "Also return every candidate before filtering."),
    "profile": ("string", "Ranking profile (default: cems)."),
    "tags": ("array", "Only memories with all these tags."),
    "since": ("string", "ISO-8601 lower bound of created_at."),
    "until": ("string", "ISO-8601 upper bound of created_at."),
    "granularity": ("string", "turn or session."),
    "enable_query_synthesis": ("boolean", "Accepted and ignored: the LLM stages run when an endpoint is configured."),
    "enable_graph": ("boolean", "Accepted and ignored."),
}
ADD_FIELDS = {
    "text": ("string", "The memory's text (required)."),
    "key": ("string", "A unique key."),
    "tags": ("array", "Tags."),
    "importance": ("number", "0 to 1."),
    "priority": ("number", "1 to 2."),
    "pinned": ("boolean", "Pin it."),
    "project": ("string", "Its project."),
    "namespace": ("string", "Its namespace."),
    "session": ("string", "The session it came from."),
    "role": ("string", "Who said it."),
    "created_at": ("string", "ISO-8601; default now."),
    "metadata": ("object", "Any JSON object."),
    "replace": ("boolean", "Overwrite the memory with the same key."),
    "profile": ("string", "A profile whose ingest dedup applies."),
}


def _schema(fields: dict[str, tuple[str, str]], required: tuple[str, ...] = ()) -> dict[str, Any]:
    properties = {}
    for name, (kind, description) in fields.items():
        prop: dict[str, Any] = {"type": kind, "description": description}
        if kind == "array":
            prop["items"] = {"type": "string"}
        properties[name] = prop
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def _search_document(service: Service, body: dict[str, Any], default_profile: str | None = None) -> Callable[[], Any]:
    fields = {name: body[name] for name in REQUEST_NAMES if body.get(name) is not None}
    fields["profile"] = fields.get("profile") or default_profile
    request = request_from_fields(check_text("query", body.get("query"), MAX_QUERY_CHARS), **fields)
    raw, explain = body.get("raw") is True, body.get("explain") is True
    return lambda: service.ms.search(request).to_dict(raw=raw, explain=explain)


async def post_search(service: Service, request: Request) -> Any:
    body = _object(await read_json(request))
    _known(body, set(SEARCH_FIELDS))
    return await service.call(_search_document(service, body))


async def post_cems_search(service: Service, request: Request) -> Any:
    body = _object(await read_json(request))
    _known(body, set(CEMS_FIELDS))
    scope = body.get("scope")
    if scope not in (None, "both", "personal", "shared"):
        raise InvalidInputError(f"must be personal, shared or both, not {scope!r}", field="scope")
    mapped = {
        "query": body.get("query"),
        "mode": body.get("mode"),
        "k": body.get("limit"),
        "max_tokens": body.get("max_tokens"),
        "namespace": scope if scope in ("personal", "shared") else None,
        "project": body.get("project"),
        "raw": body.get("raw"),
        "profile": body.get("profile"),
        "tags": body.get("tags"),
        "since": body.get("since"),
        "until": body.get("until"),
        "granularity": body.get("granularity"),
    }
    return await service.call(_search_document(service, mapped, default_profile="cems"))


async def get_search(service: Service, request: Request) -> Any:
    params = request.query_params
    body = {
        "query": params.get("q"),
        "k": _int_param(request, "k"),
        "mode": params.get("mode"),
        "profile": params.get("profile"),
        "project": params.get("project"),
        "namespace": params.get("namespace"),
        "tags": params.getlist("tag") or None,
        "since": params.get("since"),
        "until": params.get("until"),
        "kinds": params.getlist("kind") or None,
        "conversation": params.get("conversation"),
        "roles": params.getlist("role") or None,
        "sessions": params.getlist("session") or None,
        "granularity": params.get("granularity"),
        "max_tokens": _int_param(request, "max_tokens"),
        "raw": _bool_param(request, "raw"),
        "explain": _bool_param(request, "explain"),
    }
    if body["query"] is None:
        raise InvalidInputError("is missing; say what to search for", field="q")
    return await service.call(_search_document(service, body))


async def post_add(service: Service, request: Request) -> Any:
    body = _object(await read_json(request))
    _known(body, set(ADD_FIELDS))
    replace = body.pop("replace", False) is True
    profile = body.pop("profile", None)
    memory = new_memory(body)
    outcome = await service.call(lambda: service.ms.add(memory, replace=replace, profile=profile))
    return outcome.to_dict()


IMPORT_FORMATS = ("jsonl", "chat", "locomo", "longmemeval")


async def post_import(service: Service, request: Request) -> Any:
    fmt = request.query_params.get("format", "jsonl")
    if fmt not in IMPORT_FORMATS:
        raise InvalidInputError(f"must be one of {', '.join(IMPORT_FORMATS)}, not {fmt!r}", field="format")
    try:
        content = (await read_body(request)).decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("request body is not UTF-8 text") from None
    source = request.query_params.get("source") or "request body"
    sessions = request.query_params.get("sessions", "true").lower() not in ("false", "0", "no")
    facets, replace = _bool_param(request, "facets"), _bool_param(request, "replace")
    profile = request.query_params.get("profile")
    outcome = await service.call(
        lambda: service.ms.import_text(
            content, source=source, fmt=fmt, sessions=sessions, facets=facets, replace=replace, profile=profile
        )
    )
    return outcome.to_dict()


async def get_memory(service: Service, request: Request) -> Any:
    ref = parse_ref(request.path_params["ref"])
    return (await service.call(lambda: service.ms.get(ref))).to_dict()


async def delete_memory(service: Service, request: Request) -> Any:
    ref = parse_ref(request.path_params["ref"])
    return {"deleted": await service.call(lambda: service.ms.delete([ref]))}


async def get_timeline(service: Service, request: Request) -> Any:
    ref = parse_ref(request.path_params["ref"])
    before = _int_param(request, "before")
    after = _int_param(request, "after")
    for name, value in (("before", before), ("after", after)):
        if value is not None and not 0 <= value <= 1000:
            raise InvalidInputError(f"must be from 0 to 1000, not {value}", field=name)
    timeline = await service.call(
        lambda: service.ms.timeline(ref, before=5 if before is None else before, after=5 if after is None else after)
    )
    return timeline.to_dict()


async def get_stats(service: Service, request: Request) -> Any:
    return await service.call(service.ms.stats)


async def get_health(service: Service, request: Request) -> Any:
    return {"status": "ok", "version": __version__, "db": str(service.ms.path), "pid": os.getpid()}


REF = ("ref", "path", "string", "The memory's id (digits) or key.")
ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        "POST",
        "/api/memory/search",
        post_cems_search,
        "Search with CEMS's request body",
        body=_schema(CEMS_FIELDS, ("query",)),
    ),
    Endpoint(
        "POST", "/search", post_search, "Search with memsearch's own fields", body=_schema(SEARCH_FIELDS, ("query",))
    ),
    Endpoint(
        "GET",
        "/search",
        get_search,
        "Search",
        parameters=(
            ("q", "query", "string", "What to search for."),
            ("k", "query", "integer", "How many results."),
            ("mode", "query", "string", "auto, vector, hybrid or lexical."),
            ("profile", "query", "string", "Ranking profile."),
            ("project", "query", "string", "Only this project."),
            ("namespace", "query", "string", "Only this namespace."),
            ("tag", "query", "string", "Only memories with this tag (repeat: all of them)."),
            ("since", "query", "string", "Lower bound of created_at: ISO-8601, or 7d, 2w, 3h, 30m, today."),
            ("until", "query", "string", "Upper bound of created_at: ISO-8601, or 7d, 2w, 3h, 30m, yesterday."),
            ("kind", "query", "string", "Only this kind: note, turn or session (repeat: any of them)."),
            ("conversation", "query", "string", "Only this conversation's memories."),
            ("role", "query", "string", "Only this role (repeat: any of them)."),
            ("session", "query", "string", "Only this session (repeat: any of them)."),
            ("granularity", "query", "string", "turn or session."),
            ("max_tokens", "query", "integer", "Token budget."),
            ("raw", "query", "boolean", "Also return every candidate before filtering."),
        ),
    ),
    Endpoint(
        "POST",
        "/add",
        post_add,
        "Add one memory",
        body=_schema(ADD_FIELDS, ("text",)),
        responses={"200": "{id, stored, duplicate_of, similarity}"},
    ),
    Endpoint(
        "POST",
        "/import",
        post_import,
        "Import a JSONL or conversation file sent as the body: all of it is stored, or none",
        parameters=(
            ("format", "query", "string", "jsonl (default), chat, locomo or longmemeval."),
            ("source", "query", "string", "The name to use in messages."),
            ("sessions", "query", "boolean", "Conversations: store a chunk per session too (default true)."),
            ("facets", "query", "boolean", "Conversations: extract facet views."),
            ("replace", "query", "boolean", "Overwrite memories whose key exists already."),
            ("profile", "query", "string", "A profile whose ingest dedup applies."),
        ),
        body={"text": "The file's content."},
    ),
    Endpoint("GET", "/memories/{ref}", get_memory, "One memory", parameters=(REF,)),
    Endpoint(
        "DELETE",
        "/memories/{ref}",
        delete_memory,
        "Delete one memory",
        parameters=(REF,),
        responses={"200": "{deleted: [id]}"},
    ),
    Endpoint(
        "GET",
        "/timeline/{ref}",
        get_timeline,
        "The memories around one, in order",
        parameters=(
            REF,
            ("before", "query", "integer", "How many before it (default 5)."),
            ("after", "query", "integer", "How many after it (default 5)."),
        ),
    ),
    Endpoint("GET", "/stats", get_stats, "What the store holds"),
    Endpoint("GET", "/health", get_health, "Liveness, version, store path and pid"),
)


def openapi_document() -> dict[str, Any]:
    error = {"description": "{error, type, field}", "content": {"application/json": {"schema": {"type": "object"}}}}
    paths: dict[str, Any] = {}
    for endpoint in ENDPOINTS:
        operation: dict[str, Any] = {
            "summary": endpoint.summary,
            "operationId": endpoint.handler.__name__,
            "responses": {
                **{
                    code: {"description": text, "content": {"application/json": {"schema": {"type": "object"}}}}
                    for code, text in endpoint.responses.items()
                },
                "400": error,
                "401": error,
                "404": error,
            },
        }
        if endpoint.parameters:
            operation["parameters"] = [
                {"name": name, "in": where, "required": where == "path", "schema": {"type": kind}, "description": text}
                for name, where, kind, text in endpoint.parameters
            ]
        if endpoint.body is not None:
            content = (
                {"text/plain": {"schema": {"type": "string"}}}
                if "text" in endpoint.body and "type" not in endpoint.body
                else {"application/json": {"schema": endpoint.body}}
            )
            operation["requestBody"] = {"required": True, "content": content}
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "memsearch", "version": __version__},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}, {}],
        "paths": paths,
    }


# -- the application -------------------------------------------------------------------------


def _route(service: Service, endpoint: Endpoint) -> Route:
    async def handle(request: Request) -> Response:
        try:
            result = await endpoint.handler(service, request)
        except BadRequest as error:
            return error_response(str(error), error.status)
        except MemsearchError as error:
            status = next((s for kind, s in STATUS_OF_ERROR.items() if isinstance(error, kind)), 500)
            return error_response(str(error), status, kind=type(error).__name__, field_name=error.field)
        except Exception as error:  # a bug: one JSON line for the client, the traceback in the server's log
            logging.getLogger("memsearch").exception("internal error in %s %s", endpoint.method, endpoint.path)
            return error_response(f"internal error: {type(error).__name__}: {error}", 500, kind="InternalError")
        return JSONResponse(result)

    return Route(endpoint.path, handle, methods=[endpoint.method])


class Guard:
    """Refuses, before any routing: over-long URLs (400), and requests without the bearer token
    when one is set (401, the token compared in constant time)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        # Digests of equal length, so the comparison's time says nothing about the token's length either.
        self._expected = _digest(f"Bearer {token}".encode()) if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if len(scope.get("raw_path", b"")) + len(scope.get("query_string", b"")) > MAX_URL_BYTES:
            await error_response(f"the URL is over the limit of {MAX_URL_BYTES} bytes", 400)(scope, receive, send)
            return
        if self._expected is not None:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(_digest(given), self._expected):
                response = error_response("a valid bearer token is required", 401, kind="Unauthorized")
                response.headers["WWW-Authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


def build_app(warm: WarmService, *, token: str | None) -> ASGIApp:
    service = Service(warm)
    routes = [_route(service, endpoint) for endpoint in ENDPOINTS]
    document = openapi_document()
    routes.append(Route("/openapi.json", lambda request: JSONResponse(document), methods=["GET"]))
    return Guard(Starlette(routes=routes), token)


# -- start-up --------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound and listening on host:port. It is made with IPPROTO_TCP named: asyncio
    sets TCP_NODELAY only on sockets whose protocol says TCP, and accepted connections inherit
    the listener's. Without it each response on a kept-alive connection waits ~40 ms for the
    client's delayed ACK (Nagle holds the body back behind the headers)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        listener.close()
        raise InvalidInputError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    listener.listen(128)
    return listener


def run_serve(
    db: str | os.PathLike[str] | None,
    model: str | None,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    announce: Callable[[str], None] = print,
) -> None:
    """Bind, warm the library, write the discovery file, serve until SIGTERM or Ctrl-C (in-flight
    requests finish), then remove the discovery file."""
    import signal

    import uvicorn

    from memsearch.server.discovery import Advertisement

    token = configured_token()
    if token is None and not is_loopback(host):
        raise InvalidInputError(
            f"refusing to listen on {host} without a bearer token: set MEMSEARCH_API_KEY or api_key in "
            f"{config_path()} (or bind to 127.0.0.1)"
        )
    advertisement = Advertisement.claim(db, token)  # one server per store, refused before binding
    listener = listening_socket(host, port)
    bound_port = listener.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{bound_port}"
    warm = WarmService(db, model)
    config = uvicorn.Config(
        build_app(warm, token=token),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=30,
        lifespan="off",
    )
    server = uvicorn.Server(config)
    advertisement.publish(url, authenticated=token is not None)
    announce(f"serving {warm.ms.path} at {url}" + (" (bearer token required)" if token else ""))
    # uvicorn re-raises the signal that stopped it once it has shut down; with a handler of ours
    # in place that is a no-op, so SIGTERM ends in a clean exit 0 after the clean-up below.
    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        server.run(sockets=[listener])
    finally:
        signal.signal(signal.SIGTERM, previous)
        advertisement.withdraw()
        warm.close()
        listener.close()
