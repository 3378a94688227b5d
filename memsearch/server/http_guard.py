"""The HTTP API's trust boundary: what a request must show before any route sees it.

Outermost first:
1. `HostCheck`: the Host header names this server (a loopback name, the bound host or an
   `--allowed-host`), else 421, so a page whose name was re-bound to 127.0.0.1 (DNS rebinding)
   cannot talk to it. Starlette's `TrustedHostMiddleware` decides; its plain-text refusal is
   answered in JSON with the MCP SDK's status.
2. `OriginCheck`: a request sent by a web page carries `Origin`; one from any origin other than
   the server's own (or an `--cors-origin`) is refused with 403, the MCP SDK's status, so a page
   cannot send even a "simple" cross-site request (one a browser sends without asking first).
3. Starlette's `CORSMiddleware`, only with `--cors-origin`: answers those origins' preflights.
4. `TokenCheck`: over-long URLs (400), and requests without the bearer token when one is set (401,
   compared in constant time); `/health` answers a bare liveness document without it.

Each refusal is the API's JSON error document `{error, type, field}`.

Which token (`server_token`): the one the user gave (MEMSEARCH_API_KEY or api_key), else one made
at start and kept in the owner-only discovery file, so every other user of the machine, who can
connect to 127.0.0.1 as well, is refused; only `--no-token` serves without one, on loopback only.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
MAX_URL_BYTES = 8 * 1024
AUTHENTICATED = "memsearch.authenticated"  # scope key: the request showed the token (or none is needed)
PUBLIC_PATHS = ("/health",)  # answered without the token, with less in them


@dataclass(frozen=True)
class ServerToken:
    """The bearer token a server requires (None: none), and whether it made it at start."""

    value: str | None
    made: bool = False


def server_token(host: str, *, no_token: bool, loopback: bool) -> ServerToken:
    """The token to require (see the module's docstring); InvalidInputError off loopback without
    one the user gave (a token made at start is for the user's own clients on this machine)."""
    from memsearch.config import config_path, configured_token
    from memsearch.errors import InvalidInputError

    given = None if no_token else configured_token()
    if given is None and not loopback:
        raise InvalidInputError(
            f"refusing to listen on {host} without a bearer token: set MEMSEARCH_API_KEY or api_key in "
            f"{config_path()} (or bind to 127.0.0.1)"
        )
    if given is not None:
        return ServerToken(given)
    return ServerToken(None) if no_token else ServerToken(secrets.token_urlsafe(32), made=True)


def error_response(message: str, status: int, *, kind: str = "BadRequest", field_name: str | None = None) -> Response:
    return JSONResponse({"error": message, "type": kind, "field": field_name}, status_code=status)


def host_names(bound_host: str, extra: Sequence[str] = ()) -> list[str]:
    """The names the Host header may carry, as Starlette matches them (lower case, IPv6 in brackets)."""
    names: list[str] = []
    for name in (*LOOPBACK_NAMES, bound_host, *extra):
        name = name.strip().lower()
        if name.count(":") == 1:  # name:port; the port is the socket's, not checked here
            name = name.partition(":")[0]
        elif ":" in name and not name.startswith("["):
            name = f"[{name}]"
        if name and name not in names:
            names.append(name)
    return names


def own_origins(hosts: Sequence[str], port: int) -> list[str]:
    """The origins of pages this server would serve itself: http://HOST:PORT for each allowed name."""
    origins = [f"http://{host}:{port}" for host in hosts]
    if port == 80:  # a browser leaves the default port out
        origins += [f"http://{host}" for host in hosts]
    return origins


class HostCheck:
    """Refuses (421) a request whose Host header is not one of `hosts`, missing or empty included."""

    def __init__(self, app: ASGIApp, hosts: Sequence[str]) -> None:
        async def admitted(scope: Scope, receive: Receive, send: Send) -> None:
            scope["memsearch.host_admitted"] = True
            await app(scope, receive, send)

        self.hosts = list(hosts)
        self.trusted = TrustedHostMiddleware(admitted, allowed_hosts=self.hosts, www_redirect=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.trusted(scope, receive, send)
            return
        refused = False

        async def send_or_refuse(message: Message) -> None:
            nonlocal refused
            if scope.get("memsearch.host_admitted"):
                await send(message)
            elif not refused:  # TrustedHostMiddleware's own refusal: ours instead, its body dropped
                refused = True
                given = Headers(scope=scope).get("host")
                await error_response(
                    f"the Host header {given!r} does not name this server; "
                    "start it with --allowed-host NAME to accept that name",
                    421,
                    kind="MisdirectedRequest",
                    field_name="Host",
                )(scope, receive, send)

        await self.trusted(scope, receive, send_or_refuse)


class OriginCheck:
    """Refuses (403) a request whose Origin header is not one of `origins` ("null" included)."""

    def __init__(self, app: ASGIApp, origins: Sequence[str]) -> None:
        self.app = app
        self.origins = frozenset(origin.lower() for origin in origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            origin = Headers(scope=scope).get("origin")
            if origin is not None and origin.lower() not in self.origins:
                response = error_response(
                    f"requests from the web origin {origin!r} are refused; "
                    "start the server with --cors-origin ORIGIN to accept that origin",
                    403,
                    kind="Forbidden",
                    field_name="Origin",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class TokenCheck:
    """Refuses over-long URLs (400), and requests without the bearer token when one is set (401)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        # Digests of equal length, so the comparison's time says nothing about the token's length either.
        self._expected = _digest(token.encode()) if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if len(scope.get("raw_path", b"")) + len(scope.get("query_string", b"")) > MAX_URL_BYTES:
            await error_response(f"the URL is over the limit of {MAX_URL_BYTES} bytes", 400)(scope, receive, send)
            return
        authenticated = self._expected is None or self._shows_token(Headers(scope=scope).get("authorization", ""))
        if not authenticated and scope["path"] not in PUBLIC_PATHS:
            response = error_response("a valid bearer token is required", 401, kind="Unauthorized")
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        scope[AUTHENTICATED] = authenticated
        await self.app(scope, receive, send)

    def _shows_token(self, authorization: str) -> bool:
        scheme, _, credentials = authorization.partition(" ")
        given = credentials.strip().encode() if scheme.lower() == "bearer" else b""  # the scheme is case-insensitive
        assert self._expected is not None
        return hmac.compare_digest(_digest(given), self._expected)


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


def guarded(
    app: ASGIApp, *, token: str | None, hosts: Sequence[str], port: int, cors_origins: Sequence[str] = ()
) -> ASGIApp:
    """`app` behind the whole boundary (see the module's docstring)."""
    inner = TokenCheck(app, token)
    if cors_origins:
        inner = CORSMiddleware(  # type: ignore[assignment]
            inner,
            allow_origins=list(cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
        )
    return HostCheck(OriginCheck(inner, [*own_origins(hosts, port), *cors_origins]), hosts)
