"""A real HTTP server on loopback that speaks OpenAI's chat-completions protocol with deterministic
answers, for the LLM stages' integration tests. `behaviour` picks what it does: ok, timeout (holds
the reply past the client's timeout), malformed (200 with a body that is not JSON), 401, 429, 500."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOLD_S = 1.5  # how long "timeout" holds a reply: past the tests' client timeouts, bounded


@dataclass
class FakeLLM:
    url: str = ""
    behaviour: str = "ok"
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    # what each stage answers (by the system prompt's first words), overridable per test
    answers: dict[str, str] = field(
        default_factory=lambda: {
            "intent": json.dumps(
                {"primary_intent": "lookup", "complexity": "complex", "domains": ["ops"], "requires_reasoning": True}
            ),
            "synthesis": json.dumps(["deploy key vault", "1Password credentials", "ssh key location"]),
            "hyde": "I keep the deploy key in 1Password, in the ops vault.",
            "rerank": "[2, 1]",
        }
    )

    def stage_of(self, body: dict[str, Any]) -> str:
        system = body["messages"][0]["content"]
        if system.startswith("You analyse"):
            return "intent"
        if system.startswith("You expand"):
            return "synthesis"
        if system.startswith("You re-rank"):
            return "rerank"
        return "hyde"

    @property
    def stages_called(self) -> list[str]:
        return [self.stage_of(body) for body in self.requests]


def _handler(fake: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length))
            fake.requests.append(body)
            fake.headers.append(dict(self.headers))
            behaviour = fake.behaviour
            if behaviour == "timeout":
                time.sleep(HOLD_S)
            if behaviour in ("401", "429", "500"):
                self._send(int(behaviour), b'{"error": {"message": "no"}}')
                return
            if behaviour == "malformed":
                self._send(200, b"<html>not json</html>")
                return
            reply = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": fake.answers[fake.stage_of(body)]},
                        "finish_reason": "stop",
                    }
                ],
            }
            self._send(200, json.dumps(reply).encode())

        def _send(self, status: int, payload: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass

    return Handler


@contextmanager
def fake_llm_server() -> Iterator[FakeLLM]:
    fake = FakeLLM()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
