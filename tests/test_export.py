"""`memsearch export` → `memsearch import` is a round trip: the same memories, the same lines.

Ids are not part of the import contract (the importing store numbers its memories), nor are
access counts, memory scores or consolidation marks (`memsearch copy` keeps those); vectors are
made again by the importing store's model, so with the same model they are the same vectors.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.embedding import Encoder
from memsearch.errors import ImportLineError
from memsearch.ingest.records import export_record
from memsearch.models import Memory, NewMemory, default_view_text
from memsearch.store import EVERYTHING, Scope
from memsearch.store.base import ExportedMemory
from tests.conftest import T0

DATA = Path(__file__).parent / "data"
runner = CliRunner()


def _fill(ms: Memsearch) -> None:
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
            NewMemory("config in [/usr/local/etc] and ${arr[@]}\x1b[31m", created_at=T0),
        ]
    )
    ms.import_text((DATA / "chat_tiny.jsonl").read_text(encoding="utf-8"), source="chat_tiny.jsonl", fmt="chat")
    ms.import_text((DATA / "locomo_tiny.json").read_text(encoding="utf-8"), source="locomo.json", fmt="locomo")


def _export(ms: Memsearch, scope: Scope = EVERYTHING) -> list[str]:
    return [json.dumps(record, ensure_ascii=False, separators=(",", ":")) for record in ms.export(scope)]


def test_export_import_export_gives_the_same_lines_and_vectors(
    store_location: Path | str, tmp_path: Path, encoder: Encoder
) -> None:
    with Memsearch(store_location, encoder=encoder) as first:
        _fill(first)
        lines = _export(first)
        first_texts = {memory_id: text for memory_id, text in first.store().iter_texts()}
        first_ids, first_vectors = first.store().all_vectors()
        first_views = sorted((first_texts[i], view, text) for i, view, text in first.store().views_with_vectors())
    assert len(lines) == 2 + 6 + 34  # two notes, the chat's 2 sessions and 4 turns, LoCoMo's 5 and 29
    assert not any('"id"' in line.split('"text"')[0] for line in lines)  # no ids in the contract
    with Memsearch(tmp_path / "second.db", encoder=encoder) as second:
        outcome = second.import_text("\n".join(lines) + "\n", source="export.jsonl")
        assert outcome.counts == {"note": 2, "turn": 33, "session": 7}
        assert _export(second) == lines
        texts = {memory_id: text for memory_id, text in second.store().iter_texts()}
        ids, vectors = second.store().all_vectors()
        views = sorted((texts[i], view, text) for i, view, text in second.store().views_with_vectors())
        turn = second.get("chat_tiny/mon:1")
    assert views == first_views  # the same view texts, each embedded again
    by_text = {first_texts[int(i)]: row for i, row in zip(first_ids, first_vectors, strict=True)}
    again = {texts[int(i)]: row for i, row in zip(ids, vectors, strict=True)}
    assert by_text.keys() == again.keys()
    assert max(float(np.abs(by_text[t] - again[t]).max()) for t in by_text) < 1e-5
    assert turn.kind == "turn" and turn.parent_id is not None and turn.position == 1 and turn.role == "user"


def test_every_field_of_a_note_is_carried(ms: Memsearch, encoder: Encoder) -> None:
    _fill(ms)
    (record,) = ms.export(Scope(project="web"))
    assert record == {
        "text": "The deploy key lives in the vault",
        "key": "deploy-key",
        "created_at": "2024-05-01T12:00:00.000000+00:00",
        "importance": 0.9,
        "priority": 1.5,
        "pinned": True,
        "project": "web",
        "namespace": "team",
        "session": "s-1",
        "role": "user",
        "tags": ["ops", "keys"],
        "metadata": {"source": "chat", "nested": {"n": [1, 2.5, None]}},
    }


def test_an_exported_turn_without_its_session_names_a_parent_the_import_refuses(ms: Memsearch) -> None:
    _fill(ms)
    turns = [json.dumps(r) for r in ms.export(Scope(kinds=("turn",), conversation="chat_tiny"))]
    assert isinstance(ms.path, Path)
    with pytest.raises(ImportLineError, match=r"line 1: parent_key 'chat_tiny/mon' names no memory"):
        Memsearch(ms.path.parent / "other.db", encoder=ms.encoder()).import_text("\n".join(turns), source="t.jsonl")


def test_import_checks_the_conversation_fields(ms: Memsearch) -> None:
    with pytest.raises(ImportLineError, match="line 1: unknown view 'summary'"):
        ms.import_text('{"text": "x", "views": {"summary": "y"}}', source="v.jsonl")
    with pytest.raises(ImportLineError, match="line 1: position must be a whole number"):
        ms.import_text('{"text": "x", "kind": "turn", "position": 0}', source="v.jsonl")
    with pytest.raises(ImportLineError, match="line 1: kind must be one of"):
        ms.import_text('{"text": "x", "kind": "fact"}', source="v.jsonl")


def test_the_cli_round_trip(tmp_path: Path, encoder: Encoder) -> None:
    first, second = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    for args in (
        ["add", "the deploy key lives in the vault", "--key", "dk", "-t", "ops", "--meta", "a=1", "--db", first],
        ["import", str(DATA / "chat_tiny.jsonl"), "-f", "chat", "--db", first],
    ):
        assert runner.invoke(app, args).exit_code == 0
    exported = runner.invoke(app, ["export", "--db", first])
    assert exported.exit_code == 0 and len(exported.stdout.splitlines()) == 7
    imported = runner.invoke(app, ["import", "-", "--db", second], input=exported.stdout)
    assert imported.exit_code == 0, imported.stderr
    assert runner.invoke(app, ["export", "--db", second]).stdout == exported.stdout
    only_turns = runner.invoke(app, ["export", "--kind", "turn", "--role", "user", "--db", second]).stdout
    assert [json.loads(line)["role"] for line in only_turns.splitlines()] == ["user", "user", "user"]


texts = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40).filter(str.strip)
names = st.none() | texts


@settings(max_examples=200, deadline=None)
@given(
    text=texts,
    key=names,
    tags=st.lists(texts.map(str.strip), max_size=3, unique=True),
    importance=st.floats(0, 1),
    priority=st.floats(1, 2),
    pinned=st.booleans(),
    project=names,
    role=names,
    kind=st.sampled_from(["note", "turn", "session"]),
    position=st.none() | st.integers(1, 10_000),
    views=st.dictionaries(st.sampled_from(["context", "prev", "next", "facet_events"]), st.text(max_size=20)),
    metadata=st.dictionaries(texts, st.none() | st.integers() | texts | st.booleans(), max_size=3),
    seconds=st.integers(0, 10**9),
)
@pytest.mark.slow  # many generated memories: out of the quick tier
def test_an_export_record_is_an_import_line_of_the_same_memory(**fields: Any) -> None:
    created = T0 + timedelta(seconds=fields.pop("seconds"), microseconds=7)
    views = fields.pop("views")
    memory = Memory(
        id=1, created_at=created, last_accessed_at=created, access_count=0, namespace=None, session=None,
        content_hash="", conversation=None, parent_id=None, **{**fields, "tags": tuple(fields["tags"])},
    )  # fmt: skip
    lexical = {view: views.get(view, default_view_text(memory.kind, view, memory.text)) for view in ("context", "prev")}
    vector_views = {view: (text, None) for view, text in views.items() if view not in ("prev",)}
    record = export_record(ExportedMemory(memory, lexical, None, vector_views), None)
    again = NewMemory.from_json(json.loads(json.dumps(record)))
    assert (again.text, again.key, again.tags, again.importance, again.priority, again.pinned) == (
        memory.text, memory.key, memory.tags, memory.importance, memory.priority, memory.pinned,
    )  # fmt: skip
    assert (again.project, again.role, again.kind, again.position, again.created_at) == (
        memory.project, memory.role, memory.kind, memory.position, memory.created_at,
    )  # fmt: skip
    assert dict(again.metadata) == memory.metadata
    stored_lexical = {view: again.views.get(view, default_view_text(again.kind, view, again.text)) for view in lexical}
    assert stored_lexical == lexical
    assert {view: again.views[view] for view in vector_views} == {
        view: text for view, (text, _) in vector_views.items()
    }
