"""What a read command prints (`list`, `get`, `search`, `timeline` as JSON or JSONL) imports again:
the memories are stored as they were, the fields an import cannot take (ids, use counts, scores,
a search's explanation) are left out with one note naming them (issue 22)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.embedding import Encoder
from memsearch.errors import ImportLineError
from memsearch.models import IMPORT_FIELDS, NOT_IMPORTED_FIELDS, NewMemory
from memsearch.retrieval.request import SearchRequest
from tests.conftest import T0
from tests.serving import Served

runner = CliRunner()


def _fill(db: Path, encoder: Encoder) -> None:
    with Memsearch(db, encoder=encoder) as ms:
        ms.add_many(
            [
                NewMemory(
                    "The deploy key lives in the vault",
                    key="deploy-key",
                    tags=("ops", "keys"),
                    importance=0.9,
                    priority=1.5,
                    pinned=True,
                    project="web",
                    namespace="team",
                    session="s-1",
                    role="user",
                    created_at=T0,
                    metadata={"source": "chat", "nested": {"n": [1, 2.5, None]}},
                ),
                NewMemory("the deploy runbook: tag, build, ship", tags=("ops",), created_at=T0.replace(day=2)),
                NewMemory("config in [/usr/local/etc] and ${arr[@]}\x1b[31m", created_at=T0.replace(day=3)),
            ]
        )
        ms.get(1)
        ms.search(SearchRequest("deploy key", mode="lexical"))  # access counts and times change


def cli(*args: str, input: str | None = None) -> Any:
    result = runner.invoke(app, list(args), input=input)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def _importable(record: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in record.items() if name in IMPORT_FIELDS}


def _listed(db: Path) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in cli("list", "--all", "-f", "jsonl", "--db", str(db)).stdout.splitlines()]
    return sorted(records, key=lambda record: record["text"])


def _note(stderr: str) -> str:
    notes = [line for line in stderr.splitlines() if line.startswith("ignored ")]
    assert len(notes) == 1, stderr
    return notes[0]


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_list_output_imports_into_a_fresh_store_as_the_same_memories(
    tmp_path: Path, encoder: Encoder, fmt: str
) -> None:
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    _fill(first, encoder)
    listed = cli("list", "--all", "-f", fmt, "--db", str(first)).stdout
    imported = cli("import", "-", "--db", str(second), input=listed)
    assert "imported 3 memories from stdin" in imported.stderr
    before, after = _listed(first), _listed(second)
    assert [_importable(r) for r in after] == [_importable(r) for r in before]
    assert {r["text"]: r["created_at"] for r in after} == {r["text"]: r["created_at"] for r in before}
    note = _note(imported.stderr)
    present = sorted(set().union(*before) - IMPORT_FIELDS)
    assert present  # id, access_count, last_accessed_at, content_hash, memory_score, …
    for name in present:
        assert name in note


def test_get_json_imports_the_one_memory(tmp_path: Path, encoder: Encoder) -> None:
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    _fill(first, encoder)
    shown = cli("get", "deploy-key", "-f", "json", "--db", str(first)).stdout
    imported = cli("import", "-", "--db", str(second), input=shown)
    assert "imported 1 memory" in imported.stderr
    assert [_importable(r) for r in _listed(second)] == [_importable(_listed(first)[0])]


@pytest.mark.parametrize("fmt", ["json", "jsonl", "ndjson"])
def test_search_output_imports_its_results(tmp_path: Path, encoder: Encoder, fmt: str) -> None:
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    _fill(first, encoder)
    found = cli("search", "deploy", "--mode", "lexical", "--explain", "-f", fmt, "--db", str(first)).stdout
    imported = cli("import", "-", "--db", str(second), input=found)
    assert "imported 2 memories" in imported.stderr
    note = _note(imported.stderr)
    for name in ("id", "score", "explain", "context_of", *(("rank",) if fmt != "ndjson" else ("rank", "query"))):
        assert name in note.removeprefix("ignored ").split(":")[0].split(", ")
    # a search result carries the memory's text, key, time, scope, tags, metadata and pin
    compared = ("text", "key", "created_at", "tags", "project", "namespace", "session", "role", "metadata", "pinned")
    stored = {r["text"]: {n: r[n] for n in compared} for r in _listed(second)}
    assert stored == {r["text"]: {n: r[n] for n in compared} for r in _listed(first) if "deploy" in r["text"]}


def test_a_memory_found_twice_is_stored_once(tmp_path: Path, ms: Memsearch, encoder: Encoder) -> None:
    ms.add_many([NewMemory("the deploy key lives in the vault", key="dk"), NewMemory("deploy on fridays, never")])
    documents = [
        ms.search(SearchRequest(query, mode="lexical")).to_dict() for query in ("deploy key", "deploy fridays")
    ]
    text = json.dumps(documents)  # a batch search's JSON: both queries find both memories
    with Memsearch(tmp_path / "b.db", encoder=encoder) as second:
        outcome = second.import_text(text, source="batch.json")
        assert outcome.counts["note"] == 2 and outcome.repeats == 2
        assert {"id", "score", "rank"} <= set(outcome.ignored)
        assert sorted(m.text for m in second.list()) == sorted(m.text for m in ms.list())
        # imported again: the key is taken, as when an export is imported twice
        with pytest.raises(Exception, match="exists already"):
            second.import_text(text, source="batch.json")


def test_same_ids_of_different_memories_are_both_stored(ms: Memsearch) -> None:
    lines = [json.dumps({"id": 1, "text": "from one store"}), json.dumps({"id": 1, "text": "from another"})]
    outcome = ms.import_text("\n".join(lines), source="two-lists.jsonl")
    assert outcome.counts["note"] == 2 and outcome.repeats == 0 and outcome.ignored == ("id",)


def test_unknown_fields_are_still_refused_and_items_are_numbered(ms: Memsearch) -> None:
    with pytest.raises(ImportLineError, match=r"x.jsonl, line 2: unknown field 'txt'"):
        ms.import_text('{"text": "a", "id": 3}\n{"txt": "b"}', source="x.jsonl")
    document = json.dumps([{"text": "a"}, {"text": "b", "scroe": 1}], indent=2)
    with pytest.raises(ImportLineError, match=r"x.json, item 2: unknown field 'scroe'"):
        ms.import_text(document, source="x.json")
    with pytest.raises(ImportLineError, match=r"x.json, line 3: not valid JSON"):
        ms.import_text('[\n  {"text": "a"},\n  nope\n]', source="x.json")
    assert ms.stats()["memories"] == 0


def test_every_field_a_read_command_prints_is_importable_or_known(ms: Memsearch) -> None:
    """The ignored fields are named in one place (models.NOT_IMPORTED_FIELDS): a field added to a
    read command's records must be either importable or listed there."""
    ms.add_many([NewMemory("the deploy key lives in the vault", key="dk", project="web")])
    outcome = ms.search(SearchRequest("deploy key", mode="lexical"))
    rows = [
        ms.get(1).to_dict(),
        *outcome.to_dict(raw=True)["results"],
        *outcome.to_dict(raw=True)["candidates"],
        *ms.timeline(1, before=1, after=1).to_dict()["memories"],
    ]
    for row in rows:
        assert set(row) <= IMPORT_FIELDS | NOT_IMPORTED_FIELDS, set(row) - IMPORT_FIELDS - NOT_IMPORTED_FIELDS


def test_the_note_comes_through_a_running_server(tmp_path: Path, encoder: Encoder, served: Served) -> None:
    source = tmp_path / "a.db"
    _fill(source, encoder)
    listed = cli("list", "--all", "-f", "jsonl", "--db", str(source)).stdout
    imported = cli("--debug", "import", "-", "--db", str(served.db), input=listed)
    assert "through the server" in imported.stderr and "imported 3 memories" in imported.stderr
    assert "access_count" in _note(imported.stderr)
