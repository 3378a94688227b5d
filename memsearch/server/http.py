"""`memsearch serve`: an HTTP JSON API over one warm `Memsearch` (Starlette on uvicorn).

The routes are one table (`ENDPOINTS`): rows of (method, path, operation), made from each
operation's own route (`Operation.route`, which `memsearch.Client` reads too) plus this server's
extras (CEMS's search, GET /search, DELETE /memories/{ref}, /health), each answered by one
generic handler (`answer`): the operation's values from the path, query or JSON body, its request
(checked once, by the fields of `memsearch.operations`), its run on a worker thread and its JSON
document, the CLI's. The same fields describe the parameters and bodies in the OpenAPI document.
Before any route, the trust boundary of `memsearch.server.http_guard` (Host, Origin, token); the
socket and uvicorn's bounds on slow clients are in `memsearch.server.http_transport`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from memsearch.errors import (
    DuplicateKeyError,
    ImportLineError,
    InvalidInputError,
    MemoryNotFoundError,
    MemsearchError,
    ModelMismatchError,
    ModelVectorsMissingError,
    NoteSectionError,
    StoreNotFoundError,
)
from memsearch.fields import REF
from memsearch.ingest.readers import DatasetError
from memsearch.jsonl import TOO_DEEP, decode_json
from memsearch.operations import DELETE, MAX_MESSAGE_BYTES, OPERATIONS, SEARCH, Field, Operation
from memsearch.server.common import WarmService, health_document
from memsearch.server.http_guard import AUTHENTICATED, ServerToken, error_response, guarded, host_names, server_token
from memsearch.server.http_openapi import Endpoint, openapi_document
from memsearch.server.http_transport import is_loopback, listening_socket, serve_app

__all__ = ["ENDPOINTS", "MAX_BODY_BYTES", "Endpoint", "build_app", "is_loopback", "listening_socket", "run_serve"]

MAX_BODY_BYTES = MAX_MESSAGE_BYTES
JSON_TYPES = ("application/json",)
# The body types of /import: JSON Lines under its own names too. None is a type a web page may
# send without asking first (a CORS "simple" request), so a page of another origin cannot send one.
IMPORT_TYPES = ("application/json", "application/x-ndjson", "application/jsonl")
STATUS_OF_ERROR: dict[type[MemsearchError], int] = {
    InvalidInputError: 400,
    ImportLineError: 400,
    DatasetError: 400,
    MemoryNotFoundError: 404,
    StoreNotFoundError: 404,
    DuplicateKeyError: 409,
    ModelMismatchError: 409,
    ModelVectorsMissingError: 409,
    NoteSectionError: 409,
}


class BadRequest(Exception):
    """A request the API refuses before any library call (400 unless told otherwise)."""

    def __init__(self, message: str, status: int = 400, *, kind: str = "BadRequest", field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.field = status, kind, field


# -- request parsing -------------------------------------------------------------------------


async def read_json(request: Request) -> Any:
    return _decode_json(await read_body(request))


async def read_body(request: Request, *, limit: int = MAX_BODY_BYTES) -> bytes:
    """The body, refused with a 400 as soon as it passes `limit` (whatever Content-Length says)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
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
    """The body's JSON (a number too long for its field is the library's one-line refusal)."""
    if not body.strip():
        raise BadRequest("request body is empty; send a JSON object")
    try:
        return decode_json(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        if isinstance(error, json.JSONDecodeError) and error.msg == TOO_DEEP:
            raise BadRequest("request body nests JSON too deeply") from None
        raise BadRequest(f"request body is not valid JSON ({error})") from None


def check_content_type(request: Request, accepted: Sequence[str]) -> None:
    """415 unless the body is one of `accepted` (a charset, if given, must be UTF-8)."""
    given = request.headers.get("content-type", "")
    media, *options = (part.strip().lower() for part in given.split(";"))
    charsets = [
        value.strip('" ') for name, _, value in (o.partition("=") for o in options) if name.strip() == "charset"
    ]
    if media not in accepted or any(charset not in ("utf-8", "utf8") for charset in charsets):
        raise BadRequest(
            f"the body must be {' or '.join(accepted)} (UTF-8), not {given!r}"
            if given
            else f"the request states no Content-Type; send {' or '.join(accepted)}",
            415,
            kind="UnsupportedMediaType",
            field="Content-Type",
        )


def parameters(request: Request, **in_path: str) -> dict[str, list[str]]:
    """The URL's query parameters, each with all its values, and the path's (which the query may not repeat)."""
    params: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        params.setdefault(name, []).append(value)
    for name, value in in_path.items():
        if name in params:
            raise InvalidInputError("is given in the path already", field=name)
        params[name] = [value]
    return params


# -- endpoints -------------------------------------------------------------------------------


class Service:
    """The warm library and the handlers' one way to call it (off the event loop)."""

    def __init__(self, warm: WarmService) -> None:
        self.warm = warm
        self.ms = warm.ms

    async def call(self, function: Callable[[], Any]) -> Any:
        return await anyio.to_thread.run_sync(function)


# CEMS's body (POST /api/memory/search): its names for SEARCH's fields, and fields accepted for
# compatibility that have no counterpart here (LLM query synthesis, graph traversal).
CEMS_NAMES = {
    "query": "query",
    "mode": "mode",
    "limit": "k",
    "max_tokens": "max_tokens",
    "project": "project",
    "raw": "raw",
    "profile": "profile",
    "tags": "tags",
    "since": "since",
    "until": "until",
    "granularity": "granularity",
}
CEMS_DESCRIPTIONS = {"limit": "Maximum results.", "profile": "Ranking profile; default: cems."}
CEMS_SEARCH = Operation(
    "CEMS search",
    "Search with CEMS's request body",
    (
        *(
            replace(
                SEARCH.field(ours),
                name=theirs,
                parameter=None,
                description=CEMS_DESCRIPTIONS.get(theirs) or SEARCH.field(ours).description,
            )
            for theirs, ours in CEMS_NAMES.items()
        ),
        Field("scope", "string", "personal or shared (a namespace), or both.", choices=("personal", "shared", "both")),
        Field("enable_query_synthesis", "boolean", "Accepted and ignored: the LLM stages run when configured."),
        Field("enable_graph", "boolean", "Accepted and ignored."),
    ),
)


def cems_values(body: object) -> dict[str, Any]:
    """CEMS's body as SEARCH's values (checked by CEMS's names, so an error names CEMS's field)."""
    checked = CEMS_SEARCH.check(body)
    values = {CEMS_NAMES[name]: value for name, value in checked.items() if name in CEMS_NAMES}
    if checked.get("scope") in ("personal", "shared"):
        values["namespace"] = checked["scope"]
    values.setdefault("profile", "cems")
    return values


async def get_health(service: Service, request: Request) -> Any:
    return health_document(bool(request.scope.get(AUTHENTICATED)), service.ms.path)


async def answer(service: Service, endpoint: Endpoint, request: Request) -> Any:
    """The one handler of every operation's route: its values from the path and the query, or
    from the JSON body, the file's text for a text body; then the operation's answer, off the loop."""
    operation = endpoint.operation
    assert operation is not None
    inputs: dict[str, Any] = {}
    if endpoint.body is not None:
        body = await read_json(request)
        values = endpoint.translate(body) if endpoint.translate is not None else body
    else:
        in_path = {endpoint.into.get(name, name): value for name, value in request.path_params.items()}
        values = operation.from_query(parameters(request, **in_path))
        if endpoint.content_types:  # the body is a file's text
            try:
                inputs["content"] = (await read_body(request)).decode("utf-8")
            except UnicodeDecodeError:
                raise BadRequest("request body is not UTF-8 text") from None
    return await service.call(lambda: operation.answer(service.ms, values, **inputs))


# How a route's fields come: the body types each way of sending takes.
BODY_TYPES = {"body": JSON_TYPES, "content": IMPORT_TYPES, "query": ()}


def served(operation: Operation) -> Endpoint:
    """The endpoint of an operation's own route (`Operation.route`, which memsearch.Client reads too)."""
    route = operation.route
    assert route is not None, f"{operation.name} has no HTTP route"
    return Endpoint(
        route.method,
        route.path,
        operation,
        route.summary or operation.summary,
        route.operation_id or f"{route.method.lower()}_{operation.name}",
        query=operation if route.sends != "body" else None,
        body=operation if route.sends == "body" else None,
        content_types=BODY_TYPES[route.sends],
        path_fields=tuple(operation.field(name) for name in route.path_names),
        returns=route.returns,
    )


# The server's routes of an operation besides its own: before it and after it in the table.
EXTRA_BEFORE: dict[str, tuple[Endpoint, ...]] = {
    "search": (
        Endpoint(
            "POST", "/api/memory/search", SEARCH, CEMS_SEARCH.summary, "post_cems_search",
            body=CEMS_SEARCH, content_types=JSON_TYPES, translate=cems_values,
        ),
    ),
    "delete": (
        Endpoint(
            "DELETE", "/memories/{ref}", DELETE, "Delete one memory", "delete_memory",
            path_fields=(REF,), into={"ref": "refs"}, returns="{deleted: [id]}",
        ),
    ),
}  # fmt: skip
EXTRA_AFTER: dict[str, tuple[Endpoint, ...]] = {
    "search": (Endpoint("GET", "/search", SEARCH, SEARCH.summary, "get_search", query=SEARCH),),
}
HEALTH = Endpoint(
    "GET", "/health", None, "Liveness; with the token (or when none is set) also the version, store and pid",
    "get_health", handler=get_health,
)  # fmt: skip

# The routes: every operation's own (method, path, operation), the extras, and /health.
ENDPOINTS: tuple[Endpoint, ...] = (
    *(
        endpoint
        for operation in OPERATIONS
        if operation.route is not None
        for endpoint in (
            *EXTRA_BEFORE.get(operation.name, ()),
            served(operation),
            *EXTRA_AFTER.get(operation.name, ()),
        )
    ),
    HEALTH,
)


# -- the application -------------------------------------------------------------------------


def _route(service: Service, endpoint: Endpoint) -> Route:
    async def handle(request: Request) -> Response:
        try:
            if endpoint.content_types:
                check_content_type(request, endpoint.content_types)
            if endpoint.handler is not None:
                result = await endpoint.handler(service, request)
            else:
                result = await answer(service, endpoint, request)
        except BadRequest as error:
            return error_response(str(error), error.status, kind=error.kind, field_name=error.field)
        except MemsearchError as error:
            status = next((s for kind, s in STATUS_OF_ERROR.items() if isinstance(error, kind)), 500)
            return error_response(str(error), status, kind=type(error).__name__, field_name=error.field)
        except RecursionError:  # a JSON line nested thousands deep, parsed by the library
            return error_response("the request nests JSON too deeply", 400)
        except ClientDisconnect:  # gone before its body was whole (or closed for sending it too slowly)
            return error_response("the client went away before its request was whole", 400)
        except Exception as error:  # a bug: one JSON line for the client, the traceback in the server's log
            logging.getLogger("memsearch").exception("internal error in %s %s", endpoint.method, endpoint.path)
            return error_response(f"internal error: {type(error).__name__}: {error}", 500, kind="InternalError")
        return JSONResponse(result)

    return Route(endpoint.path, handle, methods=[endpoint.method])


async def _http_error(request: Request, error: Exception) -> Response:
    """Starlette's own refusals (no such route: 404; wrong method: 405) in the API's error document."""
    assert isinstance(error, HTTPException)
    if error.status_code == 404:
        message, kind = f"no route {request.method} {request.url.path}", "NotFound"
    elif error.status_code == 405:
        message, kind = f"{request.url.path} does not take {request.method}", "MethodNotAllowed"
    else:
        message, kind = error.detail, "HTTPError"
    response = error_response(message, error.status_code, kind=kind)
    response.headers.update(error.headers or {})
    return response


def json_answers_only(app: Starlette) -> Starlette:
    """`app` answering every path and method no route takes with a JSON 404 or 405, never a
    redirect: `/memories/%2F?tag=x` redirected to `/memories?tag=x`, which a client that follows
    redirects would send on as a delete by filter. Both servers' apps go through it."""
    app.router.redirect_slashes = False
    app.add_exception_handler(HTTPException, _http_error)
    return app


def build_app(
    warm: WarmService,
    *,
    token: str | None,
    host: str = "127.0.0.1",
    port: int = 8765,
    allowed_hosts: Sequence[str] = (),
    cors_origins: Sequence[str] = (),
) -> ASGIApp:
    service = Service(warm)
    routes = [_route(service, endpoint) for endpoint in ENDPOINTS]
    document = openapi_document(ENDPOINTS)
    routes.append(Route("/openapi.json", lambda request: JSONResponse(document), methods=["GET"]))
    app = json_answers_only(Starlette(routes=routes))
    return guarded(app, token=token, hosts=host_names(host, allowed_hosts), port=port, cors_origins=cors_origins)


# -- start-up --------------------------------------------------------------------------------


def run_serve(
    db: str | os.PathLike[str] | None,
    model: str | None,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    allowed_hosts: Sequence[str] = (),
    cors_origins: Sequence[str] = (),
    no_token: bool = False,
    announce: Callable[[str], None] = print,
    idle_exit: float | None = None,
) -> None:
    """Bind, warm the library, write the discovery file, serve until SIGTERM or Ctrl-C (in-flight
    requests finish) or, with `idle_exit`, until no request came for that many seconds, then
    remove the discovery file."""
    from memsearch.discovery import Advertisement

    token = server_token(host, no_token=no_token, loopback=is_loopback(host))
    advertisement = Advertisement.claim(db, token.value)  # one server per store, refused before binding
    listener = listening_socket(host, port)
    bound_port = listener.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    url = f"http://{shown_host}:{bound_port}"
    warm = WarmService(db, model)
    app = build_app(
        warm, token=token.value, host=host, port=bound_port, allowed_hosts=allowed_hosts, cors_origins=cors_origins
    )
    advertisement.publish(url, authenticated=token.value is not None, made_token=token.value if token.made else None)
    idle_note = f"; exits after {idle_exit:g} s without a request" if idle_exit is not None else ""
    announce(f"serving {warm.ms.path} at {url} ({token_note(token)}{idle_note})")

    def stop() -> None:
        advertisement.withdraw()
        warm.close()

    serve_app(app, listener, on_stop=stop, idle_exit=idle_exit)


def token_note(token: ServerToken, command: str = "memsearch token") -> str:
    """How a client gets in, for a server's start-up line (never the token itself)."""
    if token.value is None:
        return "no token: every user of this machine can use it"
    if token.made:
        return f"bearer token required: `{command}` prints it"
    return "bearer token required"
