"""An operation owns its use case (memsearch.operations): its fields, the request made from them
(each value checked once), the call that runs it; the HTTP routes, MCP tools and CLI options are
rows and options made from it, and each default is written once, in its field."""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.arguments import check_flag
from memsearch.errors import InvalidInputError, StoreNotFoundError
from memsearch.fields import AFTER, BEFORE, FACETS, IMPORT_FORMAT, IMPORTANCE, PRIORITY, SESSIONS, Field
from memsearch.models import NewMemory
from memsearch.operations import ADD, IMPORT, OPERATIONS, SEARCH, TIMELINE
from memsearch.server.common import WarmService
from memsearch.server.http import ENDPOINTS, build_app
from memsearch.server.mcp import TOOL_BY_NAME, TOOLS

PACKAGE = Path(__file__).resolve().parents[1] / "memsearch"


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """How many times each field's value is checked."""
    seen: Counter[str] = Counter()
    check = Field.check

    def counted(self: Field, value: object) -> Any:
        seen[self.name] += 1
        return check(self, value)

    monkeypatch.setattr(Field, "check", counted)
    yield seen


def _asgi(app: Any, method: str, path: str, body: bytes = b"", query: bytes = b"") -> int:
    headers = [(b"host", b"127.0.0.1:8765"), (b"content-type", b"application/json")]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": query, "root_path": "", "headers": headers,
        "server": ("127.0.0.1", 8765), "client": ("127.0.0.1", 40000),
    }  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return int(next(message["status"] for message in sent if message["type"] == "http.response.start"))


def test_a_searchs_k_is_checked_once_by_every_front_end(db_path: Path, checks: Counter[str]) -> None:
    """The values reach the library without a check of the front end's own: SearchRequest's
    constructor is the one check (no store here: the search fails after it, with a 404)."""
    warm = WarmService(db_path, warm=False)
    try:
        app = build_app(warm, token=None)
        body = json.dumps({"query": "deploy key", "k": 3, "mode": "lexical"}).encode()
        assert _asgi(app, "POST", "/search", body) == 404
        assert checks["k"] == 1
        assert _asgi(app, "GET", "/search", query=b"q=deploy+key&k=3&mode=lexical") == 404
        assert checks["k"] == 2
        assert _asgi(app, "POST", "/api/memory/search", json.dumps({"query": "x", "limit": 3}).encode()) == 404
        assert checks["limit"] == 1  # CEMS's names: checked as CEMS's (its errors name its fields)
        with pytest.raises(StoreNotFoundError):
            TOOL_BY_NAME["mem_search"].run(warm.ms, {"query": "deploy key", "k": 3, "mode": "lexical"})
        assert checks["k"] == 4
    finally:
        warm.close()
    result = CliRunner().invoke(_app(), ["search", "deploy key", "-k", "3", "--mode", "lexical", "--db", str(db_path)])
    assert result.exit_code != 0 and checks["k"] == 5


def test_a_timelines_before_and_an_imports_flags_are_checked_once(db_path: Path, checks: Counter[str]) -> None:
    warm = WarmService(db_path, warm=False)
    try:
        app = build_app(warm, token=None)
        assert _asgi(app, "GET", "/timeline/1", query=b"before=3&after=2") == 404  # no store
        assert (checks["before"], checks["after"]) == (1, 1)
        body = b"\n"  # no memory: the flags are checked all the same
        assert _asgi(app, "POST", "/import", body, query=b"facets=true&sessions=false") == 200
        assert (checks["facets"], checks["sessions"]) == (1, 1)
        with pytest.raises(InvalidInputError, match="before must be from 0 to 10000, not -1"):
            TOOL_BY_NAME["mem_timeline"].run(warm.ms, {"ref": 1, "before": -1})
    finally:
        warm.close()


def test_a_check_is_worded_alike_for_the_python_api_and_the_front_ends() -> None:
    with pytest.raises(InvalidInputError) as python:
        check_flag("replace", 1)
    with pytest.raises(InvalidInputError) as front_end:
        ADD.request({"text": "x", "replace": 1})
    assert str(python.value) == str(front_end.value) == "replace must be true or false, not 1"


def _app() -> typer.Typer:
    from memsearch.cli.app import app

    return app


def _options(command: str) -> dict[str, Any]:
    group = typer.main.get_command(_app())
    return {param.name: param for param in group.commands[command].params}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("command", "operation", "skipped"),
    [("search", SEARCH, ()), ("add", ADD, ("metadata",)), ("import", IMPORT, ("source",)), ("timeline", TIMELINE, ())],
)
def test_the_commands_options_are_the_operations_fields(command: str, operation: Any, skipped: tuple[str]) -> None:
    from memsearch.cli.options import OPTION_OF_FIELD

    options = _options(command)
    for field in operation.fields:
        if field.name in skipped:
            continue
        option = options[field.name if field.required else field.query_name]
        assert option.help.startswith(field.description), (command, field.name)
        if not field.required:
            assert option.opts[0] == field.option_name and set(field.flags) <= set(option.opts), field.name
        if field.default is not None:
            assert option.default == field.default, field.name
        if field.type != "boolean" and not field.required:
            assert OPTION_OF_FIELD[field.name] == field.option_name
    assert OPTION_OF_FIELD["tau_days"] == "--tau" and OPTION_OF_FIELD["k"] == "--limit"


def _literal_defaults(path: Path) -> list[str]:
    """Parameters named for a field with a default that is a literal, and `.get(name, literal)`."""
    names = {"before", "after", "sessions", "facets", "importance", "priority"}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef):
            arguments = [*node.args.args, *node.args.kwonlyargs]
            defaults = [*([None] * (len(node.args.args) - len(node.args.defaults))), *node.args.defaults]
            defaults += node.args.kw_defaults
            for argument, default in zip(arguments, defaults, strict=True):
                if not isinstance(default, ast.Constant) or default.value is None:
                    continue
                if argument.arg in names or (argument.arg in ("fmt", "format") and default.value == "jsonl"):
                    found.append(f"{path.name}:{node.lineno} {argument.arg}={default.value!r}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            key = node.args[0] if len(node.args) == 2 else None
            if isinstance(key, ast.Constant) and key.value in names:
                found.append(f"{path.name}:{node.lineno} get({key.value!r}, …)")
    return found


def test_every_default_is_written_once_in_its_field() -> None:
    places = [
        PACKAGE / "api.py",
        PACKAGE / "note_folders.py",
        PACKAGE / "client.py",
        *(PACKAGE / "cli").glob("*.py"),
        *(PACKAGE / "server").glob("*.py"),
    ]
    assert [found for path in places for found in _literal_defaults(path)] == []
    timeline, imports = inspect.signature(Memsearch.timeline), inspect.signature(Memsearch.import_text)
    assert (timeline.parameters["before"].default, timeline.parameters["after"].default) == (5, 5)
    assert (BEFORE.default, AFTER.default) == (5, 5)
    assert imports.parameters["fmt"].default == IMPORT_FORMAT.default == "jsonl"
    assert (imports.parameters["sessions"].default, imports.parameters["facets"].default) == (
        SESSIONS.default,
        FACETS.default,
    )
    memory = NewMemory("x")
    assert (memory.importance, memory.priority) == (IMPORTANCE.default, PRIORITY.default) == (0.5, 1.0)


def test_the_routes_and_tools_are_rows_of_operations_with_one_handler_and_one_call() -> None:
    for endpoint in ENDPOINTS:
        assert endpoint.method and endpoint.path and endpoint.summary
        if endpoint.path == "/health":
            assert endpoint.operation is None and endpoint.handler is not None
        else:
            assert endpoint.operation in OPERATIONS and endpoint.handler is None, endpoint.path
    assert {e.operation.name for e in ENDPOINTS if e.operation is not None} == {op.name for op in OPERATIONS}
    for tool in TOOLS:
        assert tool.name and tool.description and tool.operation in OPERATIONS
        assert set(vars(tool)) == {"name", "operation", "description", "annotations"}
