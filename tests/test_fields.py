"""A memory's fields are described once (`memsearch.models.Memory` with its FieldSpecs): every
list derived from it is the one memsearch had before, and every field is a column of both stores'
memories table (a field added without its migrations fails here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsearch.errors import InvalidInputError
from memsearch.models import CSV_FIELDS, IMPORT_FIELDS, MEMORY_FIELDS, RESULT_FIELDS, SETTABLE_FIELDS, check_changes
from memsearch.store import open_store


def test_the_derived_lists_are_memsearchs_own() -> None:
    assert CSV_FIELDS == (
        "id", "key", "created_at", "project", "namespace", "session", "role", "tags", "importance", "priority",
        "pinned", "text",
    )  # fmt: skip
    assert [f.name for f in RESULT_FIELDS] == [
        "id", "key", "text", "created_at", "tags", "metadata", "project", "namespace", "session", "role", "pinned",
        "superseded_by", "kind", "conversation", "position",
    ]  # fmt: skip
    assert set(SETTABLE_FIELDS) == {"importance", "priority", "pinned", "project", "namespace", "memory_score", "tags"}
    assert {
        "text", "tags", "importance", "priority", "pinned", "created_at", "metadata", "kind", "position", "views",
        "key", "project", "namespace", "session", "role", "conversation", "parent_key",
    } == IMPORT_FIELDS  # fmt: skip


def test_settable_fields_are_checked_by_their_own_rule() -> None:
    assert check_changes({"importance": 1, "tags": [" a ", "a", "b"], "memory_score": None, "pinned": 1}) == {
        "importance": 1.0, "tags": ("a", "b"), "memory_score": None, "pinned": True
    }  # fmt: skip
    for bad in ({"importance": 2}, {"priority": 0.5}, {"project": " "}, {"text": "new"}, {"nothing": 1}):
        with pytest.raises(InvalidInputError):
            check_changes(bad)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_every_field_is_a_column_of_the_memories_table(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    location = str(tmp_path / "f.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    store = open_store(location, create=True)
    db = store._db  # type: ignore[attr-defined]
    if backend == "sqlite":
        columns = {row[1] for row in db.execute("PRAGMA table_info(memories)")}
    else:
        columns = {
            row[0]
            for row in db.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = 'memories'"
            )
        }
    store.close()
    assert {f.name for f in MEMORY_FIELDS} <= columns
