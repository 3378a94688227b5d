"""The HTTP servers' transport, one for `memsearch serve` and `memsearch mcp --http`: the socket,
uvicorn's settings and what bounds a slow, idle or oversized client, and the run until a signal.

uvicorn (0.54, h11) gives `limit_concurrency` (past it, a quick 503), `backlog`,
`timeout_keep_alive` (a connection idle after a response) and h11's bound on an *incomplete*
request head. What it lacks is written here, in `BoundedH11Protocol`:
- a deadline for the request head from the connection's opening (not reset by each byte), so a
  client that sends nothing, or its head a byte at a time, is closed after HEAD_TIMEOUT_S;
- the head size limit on a head that arrives whole in one read (h11 bounds only the part it
  still waits on), answered 431;
- a deadline for the body: it must keep arriving at MIN_BODY_RATE after a grace period, so a body
  sent a byte every few seconds does not hold a connection without bound.
Each such connection holds a file descriptor, and once the process has none left it accepts
nothing: the descriptor limit is also raised to what the system allows, and `limit_concurrency`
keeps connections below it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import time
from collections.abc import Callable
from typing import Any, Literal

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from memsearch.errors import InvalidInputError

HEAD_TIMEOUT_S = 5  # from a connection's opening (or its last response) to the end of a request's head
BODY_GRACE_S = 5  # a body's first bytes may take this long; then it must keep to MIN_BODY_RATE
MIN_BODY_RATE = 64 * 1024  # bytes a second, on average: a 16 MiB body may take 5 + 256 s, a byte a second 5 s
BACKLOG = 128
MAX_HEAD_BYTES = 16 * 1024  # a request's line and headers (h11's default, said here)
RESERVED_DESCRIPTORS = 64  # for the store, the model, logs: never given to connections


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the bounds its settings lack (see the module's docstring)."""

    _head_deadline: float
    _head_seen: bytes = b""  # the part of a request head received so far
    _body_started: float | None = None
    _body_bytes = 0
    _body_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # uvicorn's keep-alive timer, armed from the opening too, until a request's head has arrived.
        self._head_deadline = self.loop.time() + self.timeout_keep_alive
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # arms the keep-alive timer for the next request
        self._head_deadline = self.loop.time() + self.timeout_keep_alive

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state in (h11.IDLE, h11.DONE) and not self._head_fits(data):
            return
        super().data_received(data)  # any byte cancels the keep-alive timer
        if self.transport.is_closing():
            return
        if self.conn.their_state is h11.IDLE and self.timeout_keep_alive_task is None:
            left = max(0.0, self._head_deadline - self.loop.time())  # the head is not complete yet
            self.timeout_keep_alive_task = self.loop.call_later(left, self.timeout_keep_alive_handler)
        elif self.conn.their_state is h11.SEND_BODY:
            if self._body_started is None:
                self._body_started, self._body_bytes = self.loop.time(), 0
                self._arm_body_timer()
            self._body_bytes += len(data)

    def _head_fits(self, data: bytes) -> bool:
        """Whether the request head that `data` carries (on from what came before) is within
        MAX_HEAD_BYTES; else it is answered 431 and the connection closed. (Of requests pipelined
        in one read, the first head is measured here; h11 bounds the rest while incomplete.)"""
        seen = self._head_seen + data[: MAX_HEAD_BYTES + 4]
        end = seen.find(b"\r\n\r\n")
        if (len(seen) if end < 0 else end + 4) <= MAX_HEAD_BYTES:
            self._head_seen = seen if end < 0 else b""
            self._body_started = None  # a new request
            return True
        message = f"the request head is over the limit of {MAX_HEAD_BYTES} bytes"
        body = json.dumps({"error": message, "type": "RequestHeaderFieldsTooLarge", "field": None}).encode()
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
            b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
        )
        self.transport.close()
        return False

    def _arm_body_timer(self) -> None:
        assert self._body_started is not None
        deadline = self._body_started + BODY_GRACE_S + self._body_bytes / MIN_BODY_RATE
        self._body_timer = self.loop.call_at(deadline, self._body_timeout)

    def _body_timeout(self) -> None:
        self._body_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY or self._body_started is None:
            return
        deadline = self._body_started + BODY_GRACE_S + self._body_bytes / MIN_BODY_RATE
        if self.loop.time() < deadline or self.flow.read_paused:  # on time, or the app is not reading yet
            self._arm_body_timer()
            return
        self.transport.close()  # the app's next read of the body sees the client gone

    def connection_lost(self, exc: Exception | None) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
        super().connection_lost(exc)


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
        "http": BoundedH11Protocol,
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


class IdleWatch:
    """An ASGI app's wrapper that knows when it was last used: `expired` once no HTTP request has
    been in flight for `seconds` (from the start, or from the end of the last request)."""

    def __init__(self, app: Any, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.app = app
        self.seconds = seconds
        self.clock = clock
        self.in_flight = 0
        self.last = clock()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.in_flight += 1  # every call runs on the event loop's thread: no lock needed
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            self.last = self.clock()

    def expired(self) -> bool:
        return self.in_flight == 0 and self.clock() - self.last >= self.seconds


def serve_app(
    app: Any,
    listener: socket.socket,
    *,
    lifespan: Literal["on", "off"] = "off",
    on_stop: Callable[[], None] | None = None,
    idle_exit: float | None = None,
) -> None:
    """Run `app` on `listener` with the bounds above until SIGTERM or Ctrl-C, which finish the
    requests in flight (at most 30 s) and return normally (exit 0), after `on_stop`. With
    `idle_exit`, also once no request has come for that many seconds (the same clean way out)."""
    import signal

    import uvicorn

    watch = IdleWatch(app, idle_exit) if idle_exit is not None else None

    class Server(uvicorn.Server):
        async def on_tick(self, counter: int) -> bool:  # every 0.1 s
            return await super().on_tick(counter) or (watch is not None and watch.expired())

    config = uvicorn.Config(
        watch or app,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=30,
        lifespan=lifespan,
        **uvicorn_settings(raise_descriptor_limit()),
    )
    server = Server(config)
    # uvicorn re-raises the signal that stopped it once it has shut down; with handlers of ours in
    # place that is a no-op, so SIGTERM and Ctrl-C (SIGINT) both end in a clean exit 0.
    previous = {number: signal.signal(number, lambda *_: None) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.run(sockets=[listener])
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if on_stop is not None:
            on_stop()
        listener.close()
