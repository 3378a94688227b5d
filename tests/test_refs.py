"""A reference is an id only when it is ASCII digits: a key that other scripts write as a digit
("٣", Arabic-Indic three; "２", fullwidth two; "²", superscript two) is a key at every command
that takes one, and the memory with that id is left alone (`str.isdigit` once made "٣" id 3)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.test_cli import run

LOOKALIKES = {"٣": 3, "２": 2, "²": 2}  # each key, and the id Python's int() would make of it


@pytest.fixture
def store() -> None:
    """Memories 1 to 3 without keys, then one memory for each look-alike key (ids 4 to 6)."""
    for text in ("first plain memory", "second plain memory", "third plain memory"):
        run("add", text)
    for n, key in enumerate(LOOKALIKES, start=4):
        assert run("add", f"the memory keyed {key}", "--key", key).stdout.strip() == str(n)


def shown(*args: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(run(*args, "--format", "json").stdout)
    return document


def untouched(memory_id: int) -> None:
    memory = shown("get", str(memory_id))
    ordinals = ("first", "second", "third")
    assert memory["text"] == f"{ordinals[memory_id - 1]} plain memory", memory
    assert memory["pinned"] is False and memory["importance"] == 0.5 and memory["tags"] == []


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize("key", LOOKALIKES)
def test_get_set_pin_and_timeline_take_a_lookalike_as_its_key(key: str) -> None:
    assert shown("get", key)["key"] == key
    assert shown("set", key, "--importance", "0.9", "--tag", "changed")["key"] == key
    pinned = run("pin", key)
    assert f"pinned {shown('get', key)['id']}" in pinned.stdout + pinned.stderr
    assert shown("get", key)["pinned"] is True
    timeline = shown("timeline", key, "--before", "0", "--after", "0")
    assert [m["key"] for m in timeline["memories"]] == [key] and timeline["current"] == shown("get", key)["id"]
    run("unpin", key)
    untouched(LOOKALIKES[key])


@pytest.mark.usefixtures("store")
@pytest.mark.parametrize("key", LOOKALIKES)
def test_delete_of_a_lookalike_deletes_its_key_and_not_that_id(key: str) -> None:
    own_id = shown("get", key)["id"]
    deleted = run("delete", key)
    assert f"deleted 1 memory: {own_id}" in deleted.stderr + deleted.stdout
    assert f"no memory with key {key!r}" in run("get", key, code=1).stderr
    untouched(LOOKALIKES[key])


@pytest.mark.usefixtures("store")
def test_a_lookalike_that_is_no_key_is_not_found_rather_than_an_id() -> None:
    run("delete", "٣")
    for ref in ("٣", "３", "¹"):
        error = run("get", ref, code=1).stderr
        assert "no memory with key" in error and "internal error" not in error
        run("delete", ref, code=1)
    for memory_id in (1, 2, 3):
        untouched(memory_id)


@pytest.mark.parametrize("value", ["٣", "２", "²"])
def test_a_lookalike_limit_in_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    from memsearch.config import load_config
    from memsearch.errors import ConfigError

    monkeypatch.setenv("MEMSEARCH_LIMIT", value)
    with pytest.raises(ConfigError, match=r"MEMSEARCH_LIMIT: limit must be a whole number from 1 to \d+, not"):
        load_config()
