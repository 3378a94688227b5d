"""The HTTP API's socket and uvicorn's settings: what bounds a slow or idle client.

uvicorn (0.54, h11) times out a connection only once it is idle after a response
(`timeout_keep_alive`); nothing bounds a connection that opens and never sends a request, or
sends its head a byte at a time, and the token is read only from a complete head. Each such
connection holds a file descriptor, and once the process has none left it accepts nothing: every
request waits. So here the request head gets a deadline (`RequestHeadTimeout`), the descriptor
limit is raised to what the system allows, and past `limit_concurrency` connections uvicorn
answers 503 at once instead of the process running out of descriptors.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from memsearch.errors import InvalidInputError

HEAD_TIMEOUT_S = 5  # from a connection's opening (or its last response) to the end of a request's head
BACKLOG = 128
MAX_HEAD_BYTES = 16 * 1024  # a request's line and headers (h11's default, said here)
RESERVED_DESCRIPTORS = 64  # for the store, the model, logs: never given to connections


class RequestHeadTimeout(H11Protocol):
    """uvicorn's h11 protocol, with its keep-alive timer also running from the connection's opening
    until a request's head has arrived (not reset by each byte), so a client that sends nothing,
    or a head too slowly, is closed after `timeout_keep_alive` seconds."""

    _head_deadline: float

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_deadline = self.loop.time() + self.timeout_keep_alive
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # arms the keep-alive timer for the next request
        self._head_deadline = self.loop.time() + self.timeout_keep_alive

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # any byte cancels the timer
        waiting_for_head = self.conn.their_state is h11.IDLE and not self.transport.is_closing()
        if waiting_for_head and self.timeout_keep_alive_task is None:
            left = max(0.0, self._head_deadline - self.loop.time())  # the head is not complete yet
            self.timeout_keep_alive_task = self.loop.call_later(left, self.timeout_keep_alive_handler)


def raise_descriptor_limit() -> int:
    """The soft limit on open files raised to the hard one (each connection holds one); returns it."""
    try:
        import resource
    except ImportError:  # Windows: no such limit to raise
        return 8192
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 65536)
    if soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return 65536 if soft == resource.RLIM_INFINITY else soft


def uvicorn_settings(descriptors: int) -> dict[str, Any]:
    """What uvicorn.Config gets for the bounds above."""
    return {
        "http": RequestHeadTimeout,
        "timeout_keep_alive": HEAD_TIMEOUT_S,
        "limit_concurrency": max(16, descriptors - RESERVED_DESCRIPTORS),
        "backlog": BACKLOG,
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
    }


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
    listener.listen(BACKLOG)
    return listener
