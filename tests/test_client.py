"""`memsearch.Client` against a real `memsearch serve` on loopback: the facade's methods with its
typed outcomes, the server's errors as the library's typed errors (with their field), and every
operation with an HTTP route served there and reachable by the client (one route per operation:
`Operation.route`, read by both)."""

from __future__ import annotations

import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memsearch import Client, Memsearch, NewMemory
from memsearch.client import error_from
from memsearch.errors import (
    DuplicateKeyError,
    InvalidInputError,
    MemoryNotFoundError,
    NoteSectionError,
    ServerError,
    ServerUnavailableError,
    UnauthorizedError,
)
from memsearch.models import Memory
from memsearch.operations import GET, OPERATIONS, STATS, HttpRoute, Operation
from memsearch.outcomes import AddOutcome
from memsearch.retrieval.request import request_from_fields
from tests.serving import Served

JSONL = '{"text": "Alice prefers dark roast coffee", "tags": ["people"]}\n{"text": "Bob fixes bikes on Sundays"}\n'


def test_every_call_of_the_facade_through_a_running_server(served: Served) -> None:
    client = Client.connect(db=served.db)  # the store's own server, found with the token it made
    assert client.url == served.url and client.token == served.token

    assert client.add(NewMemory("The deploy key lives in 1Password", key="deploy-key", tags=("ops",))) == AddOutcome(1)
    assert client.add("parseConfig crashes on an empty YAML file", profile="default").id == 2
    imported = client.import_text(JSONL, source="notes.jsonl")
    assert (imported.source, imported.duplicates, imported.counts["note"]) == ("notes.jsonl", [], 2)
    assert imported.summary == "2 memories"

    reply = client.search("where does the deploy key live", k=2, mode="lexical")
    assert reply.results[0].key == "deploy-key" and reply.results[0].rank == 1 and len(reply.results) <= 2
    assert reply.results[0].explain is None and reply.to_dict()["profile"] == reply.profile == "default"
    request = request_from_fields("coffee", tags=["people"], mode="lexical", touch=False)
    explained = client.search(request, explain=True, raw=True)
    assert [hit.text for hit in explained.results] == ["Alice prefers dark roast coffee"]
    assert explained.results[0].explain is not None and explained.candidates

    timeline = client.timeline(1, before=0, after=1)
    assert timeline.current == 1 and [memory.id for memory in timeline.memories] == [1, 2]
    assert client.stats()["memories"] == 4
    assert client.health()["pid"] == served.process.pid

    assert client.delete_matching(tags=["people"], dry_run=True) == [3]
    assert client.delete(["deploy-key"]) == [1]
    seen = {ref: client.get(ref) for ref in (2, "3", 4)}
    assert seen[2].text.startswith("parseConfig") and seen["3"].tags == ("people",)
    assert served.stop() == 0
    with Memsearch(served.db) as ms:  # what the server sent is the memory as the library reads it
        assert all(ms.get(memory.id) == memory for memory in seen.values())


def test_the_servers_errors_come_back_typed(served: Served) -> None:
    client = Client(served.url, served.token)
    client.add(NewMemory("The deploy key lives in 1Password", key="deploy-key"))
    with pytest.raises(MemoryNotFoundError, match="no memory with key 'nope'"):
        client.get("nope")
    with pytest.raises(InvalidInputError) as bad_k:
        client.search("deploy", k=0)
    assert (bad_k.value.field, bad_k.value.problem) == ("k", "must be from 1 to 1000, not 0")
    with pytest.raises(InvalidInputError) as bad_mode:
        client.search("deploy", mode="psychic")
    assert bad_mode.value.field == "mode" and str(bad_mode.value).startswith("mode must be one of")
    with pytest.raises(DuplicateKeyError):
        client.add(NewMemory("again", key="deploy-key"))
    with pytest.raises(MemoryNotFoundError):
        client.delete([1, 99])  # all or none
    with pytest.raises(InvalidInputError) as unknown:  # refused before sending
        client.call("timeline", {"ref": 1, "around": 3})
    assert unknown.value.field == "around"
    with pytest.raises(UnauthorizedError, match="bearer token"):
        Client(served.url).stats()
    with pytest.raises(UnauthorizedError):
        Client(served.url, "not-the-token").get(1)
    assert client.get(1).key == "deploy-key"  # nothing was deleted
    assert client.run("get", ref="deploy-key")["id"] == 1  # any routed operation: its JSON document
    assert client.run(GET, ref=1) == client.get(1).to_dict() and client.run(STATS) == client.stats()


def test_a_server_that_is_not_there(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ServerUnavailableError, match=f"http://127.0.0.1:{port} does not answer"):
        Client(f"http://127.0.0.1:{port}").stats()
    assert Client.discover(tmp_path / "none.db") is None
    with pytest.raises(ServerUnavailableError, match="no trusted `memsearch serve`"):
        Client.connect(db=tmp_path / "none.db")
    with pytest.raises(InvalidInputError) as bad_url:
        Client("https://example.org")
    assert bad_url.value.field == "url"


def test_error_documents_map_to_the_librarys_classes() -> None:
    error = error_from({"error": "k must be at least 1, not 0", "type": "InvalidInputError", "field": "k"}, 400)
    assert type(error) is InvalidInputError and (error.field, error.problem) == ("k", "must be at least 1, not 0")
    # A class with a constructor of its own keeps the server's wording.
    section = error_from({"error": "memory 3 is the section of a.md:1; ...", "type": "NoteSectionError"}, 409)
    assert type(section) is NoteSectionError and str(section) == "memory 3 is the section of a.md:1; ..."
    refused = error_from({"error": "the body must be …", "type": "UnsupportedMediaType", "field": "Content-Type"}, 415)
    assert type(refused) is InvalidInputError and refused.field is None  # the message does not start with it
    assert type(error_from({"error": "no route GET /x", "type": "NotFound"}, 404)) is ServerError
    assert type(error_from({"error": "internal error: boom", "type": "InternalError"}, 500)) is ServerError
    assert type(error_from(["not", "a", "document"], 502)) is ServerError
    from memsearch.ingest.readers import DatasetError

    assert type(error_from({"error": "x.json: bad", "type": "DatasetError"}, 400)) is DatasetError


def test_every_routed_operation_is_served_and_reachable_by_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """One route per operation (`Operation.route`): the server serves the operation there, and
    `Client.run` sends it there, with no table of the client's own."""
    from memsearch.server.http import ENDPOINTS

    served = {(e.method, e.path): e.operation for e in ENDPOINTS}
    sent: list[tuple[str, str]] = []

    def request(self: Client, method: str, target: str, *args: object) -> dict[str, object]:
        sent.append((method, target))
        return {}

    monkeypatch.setattr(Client, "request", request)
    client = Client("http://127.0.0.1:9")
    routed = [operation for operation in OPERATIONS if operation.route is not None]
    assert {operation.name for operation in routed} == {operation.name for operation in OPERATIONS}
    for operation in routed:
        route = operation.route
        assert route is not None
        assert served.get((route.method, route.path)) is operation, f"{operation.name}: not served at its route"
        required = {f.name: 1 if f.type == "ref" else "x" for f in operation.fields if f.required}
        assert client.run(operation.name, **required) == {}
        method, target = sent.pop()
        assert method == route.method and target.split("?")[0] == route.path.replace("{ref}", "1"), operation.name


def test_run_refuses_what_has_no_route() -> None:
    client = Client("http://127.0.0.1:9")
    with pytest.raises(InvalidInputError, match="is not an operation") as unknown:
        client.run("frobnicate")
    assert unknown.value.field == "operation"
    local = Operation("local", "Runs in-process only", ())
    with pytest.raises(InvalidInputError, match="local has no HTTP route"):
        client.run(local)
    with pytest.raises(AssertionError, match="names no field"):
        Operation("broken", "A path with no field", (), route=HttpRoute("GET", "/broken/{ref}"))


def test_a_memory_reads_back_from_its_document() -> None:
    moment = datetime(2024, 5, 1, 13, 56, tzinfo=UTC)
    memory = Memory(
        id=7, key="k", text="t", created_at=moment, last_accessed_at=moment, access_count=2, importance=0.5,
        priority=1.0, pinned=True, project="p", namespace=None, session="s", role="user", tags=("a", "b"),
        metadata={"x": [1]}, content_hash="h", kind="turn", conversation="c", position=3, parent_id=6,
    )  # fmt: skip
    assert Memory.from_dict(memory.to_dict()) == memory
    scored = Memory(**{**vars(memory), "memory_score": 0.25})
    assert Memory.from_dict(scored.to_dict()) == scored


def test_importing_memsearch_and_making_a_client_stays_light() -> None:
    probe = (
        "import sys, memsearch; memsearch.Client('http://127.0.0.1:1');"
        "print(sorted(m for m in ('numpy', 'starlette', 'typer', 'rich', 'memsearch.server.http') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"


def test_the_cli_refuses_a_server_url_it_cannot_use(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from memsearch.cli.app import app

    result = CliRunner().invoke(app, ["search", "x", "--db", str(tmp_path / "s.db"), "--server", "ftp://example.org"])
    assert (
        result.exit_code == 2
        and result.stderr == "memsearch: --server must be an http:// URL, not 'ftp://example.org'\n"
    )
