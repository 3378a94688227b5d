"""`--min-score`: a relevance floor on the score the results show (the final score), one field of
the search operation, applied by the library for every front end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.embedding import Encoder
from memsearch.errors import InvalidInputError
from memsearch.models import Memory, NewMemory, content_hash
from memsearch.operations import SEARCH
from memsearch.retrieval.candidates import Candidate, Factor
from memsearch.retrieval.request import SearchRequest, request_from_fields
from memsearch.retrieval.select import MIN_SCORE_REASON, keep_min_score
from tests.conftest import T0
from tests.serving import Served

NOTES = [
    "The deploy key lives in the team vault under ops/deploy",
    "Alice prefers dark roast coffee and oat milk",
    "parseConfig crashes on an empty YAML file",
]

runner = CliRunner()


def run(*args: str, code: int = 0) -> Result:
    result = runner.invoke(app, [*args])
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


@pytest.fixture
def notes(ms: Memsearch) -> Memsearch:
    for text in NOTES:
        ms.add(NewMemory(text))
    return ms


def _candidate(memory_id: int, score: float, **selection: object) -> Candidate:
    text = f"memory {memory_id}"
    memory = Memory(
        id=memory_id, key=None, text=text, created_at=T0, last_accessed_at=T0, access_count=0, importance=0.5,
        priority=1.0, pinned=False, project=None, namespace=None, session=None, role=None, tags=(), metadata={},
        content_hash=content_hash(text),
    )  # fmt: skip
    return Candidate(memory, {}, fusion=score, selection=selection)


def test_keep_min_score_drops_what_is_below_and_says_why() -> None:
    halved = _candidate(3, 0.8).with_factor(Factor("decay", "mul", 0.5))  # final 0.4: the floor reads the final
    kept = keep_min_score([_candidate(1, 0.9), halved, _candidate(2, 0.5)], 0.5)
    assert [(c.id, c.dropped) for c in kept] == [
        (1, None),
        (2, None),
        (3, f"{MIN_SCORE_REASON} (0.4 < 0.5)"),
    ]
    assert keep_min_score([_candidate(1, 0.1)], None)[0].dropped is None


def test_a_context_row_goes_with_its_result() -> None:
    hit, low = _candidate(1, 0.9), _candidate(2, 0.1)
    rows = [hit, _candidate(10, 0.0, context_of=1), low, _candidate(20, 0.0, context_of=2)]
    kept = keep_min_score(rows, 0.5)
    assert [c.id for c in kept if c.dropped is None] == [1, 10]
    assert {c.id: c.dropped for c in kept}[20] == f"{MIN_SCORE_REASON} (context of id 2)"


def test_the_floor_is_a_field_of_the_search_operation() -> None:
    field = SEARCH.field("min_score")
    assert field.type == "number" and "min_score" in SEARCH.json_schema()["properties"]
    assert request_from_fields("q", min_score=0.25).min_score == 0.25
    assert request_from_fields("q", min_score=-1).min_score == -1


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "abc", True, [0.1]])
def test_a_floor_that_is_no_finite_number_is_refused(value: object) -> None:
    with pytest.raises(InvalidInputError, match="min_score"):
        request_from_fields("q", min_score=value)
    with pytest.raises(InvalidInputError, match="min_score"):
        SearchRequest("q", min_score=value)  # type: ignore[arg-type]


def test_the_library_keeps_only_results_at_or_above_the_floor(notes: Memsearch) -> None:
    everything = notes.search(SearchRequest("deploy key vault", as_of=T0)).results
    scores = [c.final for c in everything]
    floor = scores[1]  # the second result's own score: kept (at or above)
    outcome = notes.search(SearchRequest("deploy key vault", as_of=T0, min_score=floor))
    assert [c.final for c in outcome.results] == scores[:2]
    document = outcome.to_dict(raw=True)
    reasons = [c["dropped"] for c in document["candidates"] if c["dropped"]]
    assert reasons and all(reason.startswith(MIN_SCORE_REASON) for reason in reasons)


def test_a_search_records_no_access_of_what_the_floor_dropped(notes: Memsearch) -> None:
    notes.search(SearchRequest("deploy key vault", min_score=10.0))
    assert all(m.access_count == 0 for m in notes.list())


def test_cli_min_score_filters_the_table_and_raw_says_why(notes: Memsearch, db_path: Path) -> None:
    db = ("--db", str(db_path), "--no-server", "--as-of", T0.isoformat())  # the scores of one moment
    shown = json.loads(run("search", "deploy key vault", *db, "--format", "json").stdout)
    floor = shown["results"][0]["score"]
    kept = json.loads(run("search", "deploy key vault", *db, "--min-score", repr(floor), "-f", "json").stdout)
    assert [r["id"] for r in kept["results"]] == [shown["results"][0]["id"]]
    table = run("search", "deploy key vault", *db, "--min-score", "5", "--raw").stdout
    assert "below min_score" in table
    assert json.loads(run("search", "deploy key vault", *db, "--min-score", "5", "-f", "json").stdout)["results"] == []


@pytest.mark.parametrize(("value", "message"), [("nan", "must be a number"), ("inf", "must be a number")])
def test_cli_refuses_a_floor_that_is_no_number_in_one_line(db_path: Path, value: str, message: str) -> None:
    result = run("search", "deploy", "--db", str(db_path), "--min-score", value, code=2)
    assert message in result.stderr and "--min-score" in result.stderr
    assert "Traceback" not in result.stderr
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1


def test_cli_refuses_a_floor_that_is_no_number_at_all(db_path: Path) -> None:
    result = run("search", "deploy", "--db", str(db_path), "--min-score", "high", code=2)
    assert "--min-score" in result.stderr and "Traceback" not in result.stderr


@pytest.fixture
def served_notes(served: Served) -> Served:
    for text in NOTES:
        assert served.request("POST", "/add", {"text": text}).status == 200
    return served


def test_http_takes_the_floor_as_a_field_and_a_parameter(served_notes: Served) -> None:
    found = served_notes.request("POST", "/search", {"query": "deploy key vault", "min_score": 5, "raw": True})
    assert found.status == 200, found.body
    document = found.json()
    assert document["results"] == [] and document["candidates"]
    assert all(c["dropped"].startswith(MIN_SCORE_REASON) for c in document["candidates"] if c["dropped"])
    assert served_notes.request("GET", "/search?q=deploy&min_score=5").json()["results"] == []
    refused = served_notes.request("GET", "/search?q=deploy&min_score=nan")
    assert refused.status == 400 and "min_score" in refused.body.decode()


def test_the_cli_sends_the_floor_to_a_server(served_notes: Served) -> None:
    db = ("--db", str(served_notes.db), "-f", "json")
    sent = run("--debug", "search", "deploy key vault", "--min-score", "5", *db)
    assert "POST /search through the server" in sent.stderr
    assert json.loads(sent.stdout)["results"] == []
    assert json.loads(run("search", "deploy key vault", "--min-score", "-5", *db).stdout)["results"]


def _mcp_search(db: Path, **arguments: object) -> dict[str, object]:
    import sys

    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from tests.serving import server_env

    async def call() -> dict[str, object]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "memsearch", "mcp", "--db", str(db)], env=server_env()
        )
        with anyio.fail_after(180):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                result = await session.call_tool("mem_search", dict(arguments))
                assert not result.is_error, result.content
                assert result.structured_content is not None
                return dict(result.structured_content)

    return anyio.run(call)


def test_mcp_takes_the_floor(db_path: Path, encoder: Encoder) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        for text in NOTES:
            ms.add(NewMemory(text))
    assert _mcp_search(db_path, query="deploy key vault", min_score=5)["results"] == []
    assert _mcp_search(db_path, query="deploy key vault", min_score=-5)["results"]
