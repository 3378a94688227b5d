"""`memsearch mcp` on stdio fed raw JSON-RPC lines: every request gets one answer, whatever it holds.

Malformed lines are written to the subprocess's stdin as bytes, and each answer is read with a
bounded timeout: a request the server drops would otherwise hang the client (and the test).
"""

from __future__ import annotations

import json
import os
import random
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memsearch.api import Memsearch
from memsearch.embedding import Encoder
from tests.serving import server_env

ANSWER_TIMEOUT_S = 20
PROTOCOL = "2025-06-18"


class RawMcp:
    """One `memsearch mcp` subprocess, spoken to in JSON-RPC lines."""

    def __init__(self, db: Path, stderr_path: Path) -> None:
        self.stderr_path = stderr_path
        with stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "memsearch", "mcp", "--db", str(db)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=server_env(),
            )
        self._buffer = b""
        self.lines: list[str] = []  # every line read from stdout
        self.answers: dict[Any, list[dict[str, Any]]] = {}  # by id
        self.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": _initialize_params()})
        assert "result" in self.answer("init", timeout=120)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any] | str | bytes) -> None:
        line = message if isinstance(message, bytes | str) else json.dumps(message)
        data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def answer(self, request_id: Any, timeout: float = ANSWER_TIMEOUT_S) -> dict[str, Any]:
        """The answer to the request `request_id`, reading until it comes or `timeout` passes."""
        deadline = time.monotonic() + timeout
        while not self.answers.get(request_id):
            self._read_line(deadline, waiting_for=request_id)
        return self.answers[request_id][0]

    def call(self, request_id: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        params = {"name": tool, "arguments": arguments}
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
        return self.answer(request_id)

    def _read_line(self, deadline: float, waiting_for: Any) -> None:
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.stdout], [], [], max(remaining, 0))
            if not ready:
                read = self.lines[-3:]
                pytest.fail(f"no answer to request {waiting_for!r} in time (read last: {read}): {self.stderr_tail()}")
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                pytest.fail(f"the server closed stdout waiting for {waiting_for!r}: {self.stderr_tail()}")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\n", 1)
        line = raw.decode("utf-8")
        self.lines.append(line)
        message = json.loads(line)  # every line on stdout is one JSON-RPC message
        assert message["jsonrpc"] == "2.0" and ("result" in message) != ("error" in message), line
        self.answers.setdefault(message["id"], []).append(message)

    def stderr_tail(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-2000:]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait(timeout=30)


def _initialize_params() -> dict[str, Any]:
    return {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}


@pytest.fixture
def raw_mcp(tmp_path: Path, encoder: Encoder) -> Iterator[RawMcp]:
    db = tmp_path / "store" / "memsearch.db"
    db.parent.mkdir(parents=True)
    server = RawMcp(db, tmp_path / "mcp.stderr")
    try:
        yield server
    finally:
        server.close()


def _request(request_id: Any, arguments_json: str, tool: str = "mem_search") -> str:
    """A tools/call line with the arguments spelled as given (escapes and nesting kept as written)."""
    head = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call"})[:-1]
    return f'{head}, "params": {{"name": "{tool}", "arguments": {arguments_json}}}}}'


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


MALFORMED: list[tuple[str, str | bytes, Any, int]] = [
    # what, the line, the id of the answer, its JSON-RPC error code
    ("lone surrogate in an argument", _request(1, '{"query": "\\ud800"}'), 1, -32602),
    ("lone low surrogate", _request(2, '{"query": "a\\udfffb"}', "mem_add"), 2, -32602),
    ("lone surrogate in a key", _request(3, '{"\\ud800": 1, "query": "x"}'), 3, -32602),
    ("nesting past the SDK's parser", _request(4, f'{{"query": "x", "tags": {_deep(300)}}}'), 4, -32602),
    ("nesting past Python's parser", _request(5, f'{{"query": "x", "tags": {_deep(5000)}}}'), 5, -32600),
    ("string id with a deep value", _request("six", f'{{"m": {_deep(3000)}}}', "mem_add"), "six", -32600),
    ("not JSON", "this is not json", None, -32700),
    ("a number past the parsers", _request(7, '{"query": "x", "k": 1' + "0" * 5000 + "}"), 7, -32602),
    ("truncated", _request(8, '{"query": "x"}')[:-3], 8, -32700),
    ("invalid UTF-8 bytes then bad JSON", b'{"jsonrpc": "2.0", "id": 10, "method": \xff\xfe}', 10, -32700),
    ("a batch", json.dumps([{"jsonrpc": "2.0", "id": 11, "method": "ping"}]), None, -32600),
    ("a bare number", "42", None, -32600),
    ("no jsonrpc member", json.dumps({"id": 13, "method": "ping"}), 13, -32600),
    ("JSON-RPC 1.0", json.dumps({"jsonrpc": "1.0", "id": 14, "method": "ping"}), 14, -32600),
    ("a boolean id", json.dumps({"jsonrpc": "2.0", "id": True, "method": "ping"}), None, -32600),
    ("a null id", json.dumps({"jsonrpc": "2.0", "id": None, "method": "ping"}), None, -32600),
    ("a method that is no string", json.dumps({"jsonrpc": "2.0", "id": 17, "method": 5}), 17, -32600),
    ("params that are no object", '{"jsonrpc": "2.0", "id": 18, "method": "ping", "params": [1]}', 18, -32600),
    ("arguments that are no object", _request(19, '"query"'), 19, -32602),
    ("an unknown method", json.dumps({"jsonrpc": "2.0", "id": 20, "method": "memories/list"}), 20, -32601),
    ("an unknown tool", _request(21, "{}", "mem_forget"), 21, -32602),
]


def test_every_malformed_request_gets_one_error_and_the_server_serves_on(raw_mcp: RawMcp) -> None:
    for what, line, answer_id, code in MALFORMED:
        raw_mcp.send(line)
        error = raw_mcp.answer(answer_id).get("error")
        assert error is not None and error["code"] == code, (what, raw_mcp.answers[answer_id])
        assert not any(bad in error["message"] for bad in ("\n", "Traceback", "sys.")), what
        raw_mcp.answers.pop(answer_id)

    # JSON has no NaN, but the SDK's parser takes it: the argument check refuses it.
    raw_mcp.send(_request(9, '{"query": "x", "k": NaN}'))
    refused = raw_mcp.answer(9)["result"]
    assert refused["isError"] and refused["content"][0]["text"] == "argument 'k' must be a whole number, not nan"

    # A notification is never answered, however malformed: the next answer is the ping's.
    raw_mcp.send('{"jsonrpc": "2.0", "method": "notifications/progress", "params": {"x": "\\ud800"}}')
    raw_mcp.send(f'{{"jsonrpc": "2.0", "method": "notifications/progress", "params": {{"x": {_deep(400)}}}}}')
    raw_mcp.send({"jsonrpc": "2.0", "id": "ping", "method": "ping"})
    assert raw_mcp.answer("ping") == {"jsonrpc": "2.0", "id": "ping", "result": {}}
    assert set(raw_mcp.answers) == {"init", 9, "ping"}

    stored = raw_mcp.call(30, "mem_add", {"text": "The staging database listens on port 5433"})
    assert stored["result"]["structuredContent"]["stored"] is True
    found = raw_mcp.call(31, "mem_search", {"query": "staging port", "k": 1})
    assert found["result"]["structuredContent"]["results"][0]["text"].endswith("port 5433")


def test_a_reply_too_deep_to_encode_is_a_tool_error(tmp_path: Path, encoder: Encoder) -> None:
    """Metadata may nest up to ~1000 levels in the library (a JSONL import); the SDK encodes
    replies only to ~250: such a reply is a tool error, and the server serves on."""
    db = tmp_path / "store" / "memsearch.db"
    nested: Any = "bottom"
    for _ in range(600):
        nested = {"a": nested}
    with Memsearch(db, encoder=encoder) as ms:
        from memsearch.models import NewMemory

        ms.add(NewMemory(text="a deeply nested record", metadata={"deep": nested}, key="deep"))
    server = RawMcp(db, tmp_path / "mcp.stderr")
    try:
        failed = server.call(1, "mem_get", {"ref": "deep"})
        assert failed["result"]["isError"], failed
        assert failed["result"]["content"][0]["text"].startswith("mem_get: the answer cannot be encoded as JSON")
        assert server.call(2, "mem_stats", {})["result"]["structuredContent"]["memories"] == 1
    finally:
        server.close()


# --- the fuzz: random and malformed messages, each with an id answered exactly once ---------------

FUZZ_MESSAGES = 300
TOOL_FIELDS = {
    "mem_search": ["query", "k", "mode", "profile", "tau_days", "as_of", "touch", "boost", "rerank", "max_ms", "raw"],
    "mem_add": ["text", "key", "tags", "importance", "priority", "pinned", "metadata", "replace", "created_at"],
    "mem_get": ["ref"],
    "mem_timeline": ["ref", "before", "after"],
    "mem_delete": ["refs", "tags", "since", "kinds", "everything", "dry_run"],
    "mem_stats": [],
}
METHODS = ["tools/call"] * 6 + ["tools/list", "ping", "resources/list", "prompts/get", "", "tools/cal", "initialize"]
DEEP = "__deep_{}__"  # a placeholder for nesting json.dumps cannot write (it recurses)


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(16 if depth < 2 else 11)
    match kind:
        case 0:
            return None
        case 1:
            return rng.choice([True, False])
        case 2:
            return rng.randint(-3, 12_000)
        case 3:
            return rng.choice([10**400, -(10**30), 2**63])
        case 4:
            return rng.choice([0.5, -1.5, 1e308, 3.0])
        case 5:
            return rng.choice(["", " ", "x", "port", "2024-01-01", "7d", "tag:ops=2", "lexical", "turn", "42"])
        case 6:
            return "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.randrange(1, 20)))
        case 7:
            return rng.choice(["\ud800", "a\udc00b", "\udfff\ud800"])  # lone surrogates
        case 8:
            return "long " * rng.choice([10, 2000])
        case 9:
            return DEEP.format(rng.choice([50, 250, 1200]))
        case 10:
            return rng.choice(["NaN", "Infinity"])  # as strings: the line stays JSON
        case 11 | 12:
            return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
        case _:
            return {rng.choice(["a", "b", "\ud801", "k"]): _value(rng, depth + 1) for _ in range(rng.randrange(3))}


def _fuzz_message(rng: random.Random, number: int) -> tuple[str, Any]:
    """One line, and the id its answer must carry (None: no answer is owed)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": number if rng.random() < 0.7 else f"r{number}"}
    method = rng.choice(METHODS)
    message["method"] = method
    if method == "tools/call":
        tool = rng.choice([*TOOL_FIELDS, "mem_nothing"])
        names = TOOL_FIELDS.get(tool, [])
        arguments = {name: _value(rng) for name in rng.sample(names, rng.randrange(len(names) + 1))}
        if rng.random() < 0.5 and names:  # a well-typed value for the main field, so some calls run
            arguments[names[0]] = rng.choice(["port", 1, "staging"])
        if rng.random() < 0.2:
            arguments[rng.choice(["limit", "query ", "K", "\ud800x"])] = _value(rng)
        message["params"] = {"name": tool, "arguments": arguments if rng.random() < 0.95 else _value(rng)}
    elif rng.random() < 0.3:
        message["params"] = _value(rng)
    owed: Any = message["id"]
    mutation = rng.randrange(12)
    if mutation == 0:  # a notification: never answered
        del message["id"]
        owed = None
    elif mutation == 1:
        message["id"] = rng.choice([True, None, 1.5, [1], {"n": 1}, "\ud800"])
        owed = "null"
    elif mutation == 2:
        message["jsonrpc"] = rng.choice(["1.0", 2, None])
    elif mutation == 3:
        message["method"] = rng.choice([None, 7, ["ping"], "\udc00"])
    line = json.dumps(message)  # escapes lone surrogates as \udXXX
    for levels in (50, 250, 1200):
        line = line.replace(json.dumps(DEEP.format(levels)), _deep(levels))
    if mutation == 4:
        line = line[: rng.randrange(1, len(line))]  # truncated: answered, under its id when one can be read
        owed = "any"
    elif mutation == 5:
        line = rng.choice(["", "{}", "[]", "null", '"text"', "{" * 3000, "}", "\x00\x01"])
        owed = "any"
    return line, owed


def test_random_and_malformed_messages_each_get_one_answer(raw_mcp: RawMcp) -> None:
    rng = random.Random(20261125)
    raw_mcp.call("seed", "mem_add", {"text": "The staging database listens on port 5433", "key": "staging"})
    owed_ids: list[Any] = []
    for number in range(FUZZ_MESSAGES):
        line, owed = _fuzz_message(rng, number)
        raw_mcp.send(line)
        if owed not in (None, "null", "any"):
            answer = raw_mcp.answer(owed)
            owed_ids.append(owed)
            if "error" in answer:
                assert "\n" not in answer["error"]["message"], line[:200]
            else:
                for block in answer["result"].get("content", []):
                    assert "Traceback" not in block.get("text", ""), line[:200]

    # Whatever is still in flight is answered before a last request: then count.
    raw_mcp.send({"jsonrpc": "2.0", "id": "last", "method": "ping"})
    raw_mcp.answer("last")
    for owed in owed_ids:
        assert len(raw_mcp.answers[owed]) == 1, owed  # exactly one answer each
    numbers = range(FUZZ_MESSAGES)
    assert set(raw_mcp.answers) <= {None, "init", "seed", "last", *numbers, *(f"r{n}" for n in numbers)}
    assert not any("Traceback" in line for line in raw_mcp.lines)

    raw_mcp.call("again", "mem_add", {"text": "The production database listens on port 6432", "replace": True})
    found = raw_mcp.call("after", "mem_search", {"query": "which port does production use", "k": 1})
    assert found["result"]["structuredContent"]["results"][0]["text"].endswith("port 6432")
    assert raw_mcp.process.poll() is None
