"""One HTTP/1.1 request and its reply over a socket: what `memsearch.Client` and discovery's
`/health` check send a running `memsearch serve` (plain http on a loopback address or the URL a
user gave).

The protocol is h11's (the sans-IO HTTP/1.1 library uvicorn itself serves with, a declared
dependency): it writes the request, validates every header name and value and the target (a line
break, NUL or space is refused before a byte is sent), and parses the reply's status line, headers
and framing (Content-Length, chunked, or to the end of the connection; 1xx, 204 and 304 without a
body). This module only moves the bytes between h11 and the socket, with the limits and timeouts.
Why not `http.client`: its import (email's header parser, ssl) was about a tenth of a CLI call's
start through a warm server, for one request on one connection that is closed after the reply
(`Connection: close`); h11 imports in about a third of that (issue 32).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Final

import h11

# Bytes of status line and headers (or one chunk-size line) a reply may have: h11 checks it after each
# read, so a head is refused once it is over the limit by up to one read.
_HEAD_LIMIT: Final = 65536
_CHUNK: Final = 65536  # bytes a read asks for


class ReplyError(Exception):
    """The reply could not be read as HTTP: malformed, cut short, or over a limit."""


class NotConnected(OSError):
    """No connection could be made to the server (the OSError's errno, strerror and text kept)."""


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class Reply:
    status: int
    headers: dict[str, str]  # names in lower case; a repeated header keeps its last value
    body: bytes


def ask(
    host: str,
    port: int,
    method: str,
    target: str,
    *,
    connect_timeout: float,
    timeout: float | None = None,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    body_limit: int | None = None,
) -> Reply:
    """Connect to `host`:`port` within `connect_timeout` seconds, send one request (its Host header
    made from the same `host` and `port`) and read its reply, as `exchange` does. NotConnected when
    the connection is not made; otherwise the errors of `exchange`."""
    # An ASCII name or address goes as bytes: as a str, getaddrinfo would import the IDNA codec
    # (encodings.idna, stringprep, unicodedata) to encode it, the same bytes. (getaddrinfo takes
    # bytes; typeshed's create_connection says str.)
    address = host.encode("ascii") if host.isascii() else host
    try:
        connection = socket.create_connection((address, port), timeout=connect_timeout)  # type: ignore[arg-type]
    except OSError as error:
        raise NotConnected(*error.args) from error
    with connection:
        return exchange(
            connection,
            method,
            target,
            host=host_header(host, port),
            headers=headers,
            body=body,
            timeout=timeout,
            body_limit=body_limit,
        )


def host_header(host: str, port: int) -> str:
    """The Host header's value for `host`:`port` (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def exchange(
    connection: socket.socket,
    method: str,
    target: str,
    *,
    host: str,
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
    timeout: float | None = None,
    body_limit: int | None = None,
) -> Reply:
    """Send one request on `connection` and read its reply (each read within `timeout` seconds);
    the body cut to `body_limit` bytes when given. OSError when the connection fails, ReplyError
    when the reply is not HTTP; ValueError for a header or target that would split the request."""
    fields = [("Host", host), ("Accept-Encoding", "identity"), ("Connection", "close"), *(headers or {}).items()]
    if body is not None or method in ("POST", "PUT", "PATCH"):
        fields.append(("Content-Length", str(len(body or b""))))
    protocol = h11.Connection(h11.CLIENT, max_incomplete_event_size=_HEAD_LIMIT)
    try:
        request = protocol.send(h11.Request(method=method, target=target, headers=fields)) or b""
        if body:
            request += protocol.send(h11.Data(data=body)) or b""
        request += protocol.send(h11.EndOfMessage()) or b""
    except h11.LocalProtocolError as error:
        raise ValueError(f"a request header or target h11 refuses: {error}") from None
    connection.settimeout(timeout)
    connection.sendall(request)
    try:
        return _read_reply(protocol, connection, body_limit)
    except h11.RemoteProtocolError as error:
        raise ReplyError(f"not an HTTP reply, or cut short: {error}") from None


def _read_reply(protocol: h11.Connection, connection: socket.socket, body_limit: int | None) -> Reply:
    response: h11.Response | None = None
    parts: list[bytes] = []
    size = 0
    while True:
        event = protocol.next_event()
        if event is h11.NEED_DATA:
            protocol.receive_data(connection.recv(_CHUNK))  # b"" at the end of the connection
        elif isinstance(event, h11.Response):
            response = event
        elif isinstance(event, h11.Data):
            parts.append(bytes(event.data))
            size += len(event.data)
            if body_limit is not None and size >= body_limit:
                break
        elif isinstance(event, h11.EndOfMessage):
            break
        elif isinstance(event, h11.ConnectionClosed):
            raise ReplyError("the connection ended before a reply")
        # an InformationalResponse (1xx) is followed by the real reply: read on
    if response is None:  # pragma: no cover - h11 gives the Response before any Data or EndOfMessage
        raise ReplyError("no reply")
    names = {bytes(name).decode("latin-1"): bytes(value).decode("latin-1") for name, value in response.headers}
    body = b"".join(parts)
    return Reply(response.status_code, names, body if body_limit is None else body[:body_limit])
