"""The HTTP server's app called in-process (no socket, no model): what its guards let through and
what /health and /openapi.json say. The served tests (tests/test_serve.py) run the real thing;
these keep the quick tier's hold on the server modules."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import memsearch
from memsearch.server.common import WarmService
from memsearch.server.http import ENDPOINTS, build_app

TOKEN = "in-process-token"


def call(app: Any, path: str, *, host: str = "127.0.0.1:8765", token: str | None = TOKEN) -> tuple[int, Any]:
    """GET `path` from the ASGI app: (status, the JSON body)."""
    headers = [(b"host", host.encode())]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "", "headers": headers,
        "server": ("127.0.0.1", 8765), "client": ("127.0.0.1", 40000),
    }  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    status = next(message["status"] for message in sent if message["type"] == "http.response.start")
    body = b"".join(message.get("body", b"") for message in sent if message["type"] == "http.response.body")
    return status, json.loads(body) if body else None


@pytest.fixture
def app(db_path: Path) -> Any:
    warm = WarmService(db_path, warm=False)
    try:
        yield build_app(warm, token=TOKEN)
    finally:
        warm.close()


def test_health_says_more_to_a_client_with_the_token(app: Any) -> None:
    assert call(app, "/health", token=None) == (200, {"status": "ok"})
    status, document = call(app, "/health")
    assert status == 200 and document["version"] == memsearch.__version__ and document["pid"] > 0


def test_a_request_without_the_token_or_with_a_foreign_host_is_refused(app: Any) -> None:
    assert call(app, "/stats", token=None)[0] == 401
    assert call(app, "/stats", token="not-the-token")[0] == 401
    assert call(app, "/health", host="attacker.example")[0] == 421  # DNS rebinding: a name not ours


def test_openapi_names_every_endpoint(app: Any) -> None:
    status, document = call(app, "/openapi.json")
    assert status == 200
    assert {(e.method.lower(), e.path) for e in ENDPOINTS} <= {
        (method, path) for path, operations in document["paths"].items() for method in operations
    }


def test_the_package_exports_load_on_first_use() -> None:
    from memsearch.api import Memsearch

    assert memsearch.Memsearch is Memsearch
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        memsearch.Nothing  # noqa: B018 - the lookup is the test
