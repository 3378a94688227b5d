"""memsearch.http_exchange: the one request and reply the client and discovery send a server
(issue 32: a CLI call through a warm server no longer imports http.client; h11 does the protocol)."""

from __future__ import annotations

import socket
import threading

import pytest

from memsearch.http_exchange import NotConnected, ReplyError, ask, exchange, host_header


def _ask(reply: bytes, **options: object) -> tuple[bytes, object]:
    """The request `exchange` sent, and what it read from `reply` (sent whole, then the end)."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(reply)
        theirs.shutdown(socket.SHUT_WR)
        try:
            result: object = exchange(ours, "POST", "/search?k=3", host="127.0.0.1:8765", timeout=10, **options)  # type: ignore[arg-type]
        except (ReplyError, ValueError) as error:
            result = error
        ours.close()  # the request is all sent: theirs now reads it to its end
        theirs.settimeout(10)
        sent = b""
        while True:
            try:
                chunk = theirs.recv(65536)
            except ConnectionResetError:  # ours closed with the reply unread (a refused request)
                break
            if not chunk:
                break
            sent += chunk
    return sent, result


def test_a_request_carries_its_headers_length_and_body_and_asks_to_close() -> None:
    sent, reply = _ask(
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}", headers={"Authorization": "Bearer t"}, body=b"body"
    )
    assert sent == (
        b"POST /search?k=3 HTTP/1.1\r\nHost: 127.0.0.1:8765\r\nAccept-Encoding: identity\r\nConnection: close\r\n"
        b"Authorization: Bearer t\r\nContent-Length: 4\r\n\r\nbody"
    )
    assert getattr(reply, "status", None) == 200 and getattr(reply, "body", None) == b"{}"


@pytest.mark.parametrize(
    ("raw", "body"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello and more", b"hello"),
        (b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n", b"abcde"),
        (b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"a": 1}', b'{"a": 1}'),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
    ],
)
def test_replies_of_each_framing_are_read(raw: bytes, body: bytes) -> None:
    _, reply = _ask(raw)
    assert getattr(reply, "body", None) == body, reply


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n",
        # Two lengths that disagree, a space before the colon: a proxy and the client would frame
        # the reply differently (the smuggling shapes h11 refuses; the hand parser took the last).
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nhi",
        # A head over the 64 KiB limit (checked after each read of up to 64 KiB), a chunk-size line too.
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 140000 + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 140000 + b"\r\n",
    ],
)
def test_a_reply_that_is_not_http_or_is_cut_short_is_a_reply_error(raw: bytes) -> None:
    _, reply = _ask(raw)
    assert isinstance(reply, ReplyError), reply


@pytest.mark.parametrize(
    "headers", [{"Authorization": "Bearer t\r\nX-Evil: 1"}, {"X\nY": "v"}, {"A": "b\0"}, {"A": "b\r"}, {"X Y": "v"}]
)
def test_a_header_that_would_split_the_request_is_refused_before_anything_is_sent(headers: dict[str, str]) -> None:
    sent, reply = _ask(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", headers=headers)
    assert isinstance(reply, ValueError) and sent == b""


def test_a_target_that_would_split_the_request_is_refused_before_anything_is_sent() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        for target in ("/search HTTP/1.1\r\nX-Evil: 1", "/a b", "/a\nb"):
            with pytest.raises(ValueError):
                exchange(ours, "GET", target, host="127.0.0.1:8765", timeout=10)
        ours.close()
        theirs.settimeout(10)
        assert theirs.recv(100) == b""


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n012\r\n7\r\n3456789\r\n0\r\n\r\n",
        b"HTTP/1.0 200 OK\r\n\r\n0123456789",
    ],
)
def test_a_body_limit_cuts_the_body(raw: bytes) -> None:
    _, reply = _ask(raw, body_limit=4)
    assert getattr(reply, "body", None) == b"0123"


def test_an_interim_reply_is_passed_over_for_the_final_one() -> None:
    _, reply = _ask(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    assert getattr(reply, "status", None) == 200 and getattr(reply, "body", None) == b"{}", reply


def test_header_names_are_lower_case_and_a_repeated_one_keeps_its_last_value() -> None:
    _, reply = _ask(b"HTTP/1.1 200 OK\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 0\r\n\r\n")
    assert getattr(reply, "headers", None) == {"x-a": "2", "content-length": "0"}


def test_the_host_header_brackets_an_ipv6_address() -> None:
    assert host_header("::1", 80) == "[::1]:80" and host_header("127.0.0.1", 80) == "127.0.0.1:80"


def test_ask_connects_and_sends_the_host_header_of_the_address_it_connected_to() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(10)
        port = server.getsockname()[1]
        received: list[bytes] = []

        def answer() -> None:
            connection, _ = server.accept()
            with connection:
                connection.settimeout(10)
                received.append(connection.recv(65536))
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")

        thread = threading.Thread(target=answer)
        thread.start()
        reply = ask("127.0.0.1", port, "GET", "/health", connect_timeout=10, timeout=10)
        thread.join(10)
    assert reply.status == 200 and reply.body == b"{}"
    assert received and received[0].startswith(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())


def test_ask_raises_not_connected_with_the_reason_when_nothing_listens() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]  # closed below: nothing listens there
    with pytest.raises(NotConnected) as caught:
        ask("127.0.0.1", port, "GET", "/health", connect_timeout=10, timeout=10)
    assert isinstance(caught.value, OSError) and caught.value.strerror  # the callers quote it
