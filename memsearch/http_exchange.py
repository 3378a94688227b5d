"""One HTTP/1.1 request and its reply over a socket: what `memsearch.Client` and discovery's
`/health` check send a running `memsearch serve` (plain http on a loopback address or the URL a
user gave).

Stdlib `socket` only. `http.client` did the same, and its import (email's header parser, ssl) was
about a tenth of a CLI call's start through a warm server, for one request on one connection that
is closed after the reply (`Connection: close`). Replies with a Content-Length, chunked ones and
ones that end with the connection are read.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Final

_HEAD_LIMIT: Final = 65536  # bytes of status line and headers a reply may have
_CHUNK: Final = 65536


class ReplyError(Exception):
    """The reply could not be read as HTTP: malformed, cut short, or over a limit."""


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]  # names in lower case; a repeated header keeps its last value
    body: bytes


def connect(host: str, port: int, timeout: float) -> socket.socket:
    """A connection to `host`:`port`, made within `timeout` seconds (OSError when it is not)."""
    return socket.create_connection((host, port), timeout=timeout)


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
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity", "Connection: close"]
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body or b'')}")
    if " " in target or any(char in line for line in lines for char in "\0\r\n"):
        raise ValueError("a request header or target holds a line break or a space")
    head = "\r\n".join(lines)
    connection.settimeout(timeout)
    connection.sendall(head.encode("latin-1") + b"\r\n\r\n" + (body or b""))
    return _read_reply(_Reader(connection), body_limit)


class _Reader:
    def __init__(self, connection: socket.socket) -> None:
        self._connection = connection
        self._buffer = b""
        self.ended = False

    def _fill(self) -> bool:
        if self.ended:
            return False
        data = self._connection.recv(_CHUNK)
        if not data:
            self.ended = True
            return False
        self._buffer += data
        return True

    def line(self, limit: int) -> bytes:
        """Up to and without the next CRLF."""
        while (end := self._buffer.find(b"\r\n")) < 0:
            if len(self._buffer) > limit or not self._fill():
                raise ReplyError("the reply's head was cut short or is too long")
        line, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
        return line

    def exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            if not self._fill():
                raise ReplyError("the reply was cut short")
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def rest(self, limit: int | None) -> bytes:
        while (limit is None or len(self._buffer) < limit) and self._fill():
            pass
        return self._buffer if limit is None else self._buffer[:limit]


def _read_reply(reader: _Reader, body_limit: int | None) -> Reply:
    status_line = reader.line(_HEAD_LIMIT).decode("latin-1")
    version, _, rest = status_line.partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit() or rest[3:4] not in ("", " "):
        raise ReplyError(f"not an HTTP reply: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    size = len(status_line)
    while line := reader.line(_HEAD_LIMIT):
        size += len(line)
        if size > _HEAD_LIMIT:
            raise ReplyError("the reply's headers are too long")
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon:
            raise ReplyError("a reply header without a colon")
        headers[name.strip().lower()] = value.strip()
    status = int(code)
    if _no_body(status):
        return Reply(status, headers, b"")
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = _chunked(reader, body_limit)
    elif "content-length" in headers:
        length = headers["content-length"]
        if not length.isdigit():
            raise ReplyError(f"a reply with Content-Length {length[:20]!r}")
        wanted = int(length)
        body = reader.exactly(wanted if body_limit is None else min(wanted, body_limit))
    else:
        body = reader.rest(body_limit)
    return Reply(status, headers, body)


def _no_body(status: int) -> bool:
    """1xx, 204 and 304 replies have no body (HTTP/1.1)."""
    return 100 <= status < 200 or status in (204, 304)


def _chunked(reader: _Reader, body_limit: int | None) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size_text = reader.line(_HEAD_LIMIT).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ReplyError("a malformed chunk size in the reply") from None
        if size == 0:
            return b"".join(parts)
        parts.append(reader.exactly(size))
        total += size
        if reader.line(_HEAD_LIMIT):
            raise ReplyError("a chunk of the reply does not end where its size says")
        if body_limit is not None and total >= body_limit:
            return b"".join(parts)[:body_limit]
