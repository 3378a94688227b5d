"""Hypothesis fuzz of queries and import lines: through the API (many examples) and through the
CLI (fewer: each is a process). Nothing may crash: a search answers or refuses with a typed error,
an import stores every line or none, and the store stays consistent."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memsearch.api import Memsearch
from memsearch.choices import MODES
from memsearch.embedding import Encoder
from memsearch.errors import MemsearchError
from memsearch.models import NewMemory
from memsearch.retrieval.request import SearchRequest
from tests.reliability.helpers import check_consistent, run_cli

FTS5_SYNTAX = [
    '"', '""', "*", "^", "(", ")", ":", "-", "+", "AND", "OR", "NOT", "NEAR", "NEAR(a b, 2)",
    "{text tags}:", "text:", "tags:x", "a*", "'", "\\", "%", "_", ";", "--", "/*", "\0",
]  # fmt: skip
CONTROL = [chr(c) for c in (*range(0, 32), 127, 0x85, 0x2028, 0x2029, 0xFEFF, 0x202E)]
SURROGATES = ["\ud800", "\udfff", "\udcff"]

words = st.sampled_from(["deploy", "tea", "tools/deploy.sh", "parseConfig()", "E404", "last week", "how many"])
pieces = st.one_of(
    words, st.sampled_from(FTS5_SYNTAX), st.sampled_from(CONTROL), st.sampled_from(SURROGATES), st.text(max_size=12)
)
queries = st.one_of(
    st.lists(pieces, min_size=1, max_size=12).map(" ".join),
    st.lists(pieces, min_size=1, max_size=12).map("".join),
    st.builds(lambda p, n: p * n, pieces, st.integers(1, 3000)),  # huge
)

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), st.sampled_from(SURROGATES)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
import_objects = st.fixed_dictionaries(
    {},
    optional={
        "text": st.one_of(queries, json_values),
        "key": st.one_of(st.text(max_size=10), json_values),
        "tags": st.one_of(st.lists(st.one_of(st.text(max_size=8), json_values), max_size=3), json_values),
        "importance": st.one_of(st.floats(), json_values),
        "priority": st.one_of(st.floats(), json_values),
        "pinned": json_values,
        "project": st.one_of(st.text(max_size=8), json_values),
        "created_at": st.one_of(
            st.sampled_from(["2024-05-01", "0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "yesterday"]),
            json_values,
        ),
        "metadata": json_values,
        "bogus": json_values,
    },
)


def _nested(depth: int) -> str:
    return '{"text": "deep", "metadata": ' + "[" * depth + "]" * depth + "}"


@pytest.fixture
def store(tmp_path: Path, encoder: Encoder) -> Iterator[Memsearch]:
    with Memsearch(tmp_path / "fuzz" / "memsearch.db", encoder=encoder) as ms:
        ms.add(NewMemory(text="the deploy script lives in tools/deploy.sh", key="seed-1"))
        ms.add(NewMemory(text="Alice drinks green tea every morning", key="seed-2"))
        yield ms


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        database=None,
    )


@_settings(150)
@given(query=queries, mode=st.sampled_from(MODES), profile=st.sampled_from(["default", "memsense", "cems"]))
def test_any_query_through_the_api(store: Memsearch, query: str, mode: str, profile: str) -> None:
    try:
        request = SearchRequest(query, mode=mode, profile=profile)
        outcome = store.search(request)
    except MemsearchError as refused:
        assert "\n" not in str(refused)
        return
    for result in outcome.results:
        json.dumps(result.memory.to_dict(), allow_nan=False)


@_settings(150)
@given(objects=st.lists(import_objects, min_size=1, max_size=4))
@example(objects=[{"text": "x", "metadata": {"a": math.inf}}])
@example(objects=[{"text": "x", "metadata": {"a": "\ud800"}}])
@example(objects=[{"text": "x"}, {"text": 42}])
def test_any_import_line_through_the_api(store: Memsearch, tmp_path: Path, objects: list[dict[str, Any]]) -> None:
    before = store.stats()["memories"]
    try:
        memories = [NewMemory.from_json(json.loads(json.dumps(obj))) for obj in objects]
        store.add_many(memories)
    except MemsearchError as refused:
        assert "\n" not in str(refused)
        assert store.stats()["memories"] == before  # nothing of a refused batch
        return
    except ValueError:  # json.dumps of a lone surrogate in a key or of NaN is not ours to test here
        return
    assert store.stats()["memories"] == before + len(objects)
    for memory in store.list(limit=len(objects)):
        json.dumps(memory.to_dict(), allow_nan=False)  # what `list -f json` prints is JSON
    assert isinstance(store.path, Path)
    check_consistent(store.path)


@_settings(12)
@given(query=queries)
def test_any_query_through_the_cli(tmp_path: Path, encoder: Encoder, query: str) -> None:
    db = tmp_path / "cli" / "memsearch.db"
    if not db.exists():
        assert run_cli("add", "the deploy script lives in tools/deploy.sh", "--db", str(db)).returncode == 0
    done = run_cli("search", "--db", str(db), "--", query.replace("\0", " "))
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode in (0, 2), err
    assert "internal error" not in err
    assert len(err.strip().splitlines()) <= 1, err


@_settings(10)
@given(lines=st.lists(st.one_of(import_objects.map(json.dumps), st.text(max_size=30)), min_size=1, max_size=3))
def test_any_import_file_through_the_cli(tmp_path: Path, encoder: Encoder, lines: list[str]) -> None:
    db = tmp_path / "cli-import" / "memsearch.db"
    if not db.exists():
        assert run_cli("add", "seed", "--db", str(db)).returncode == 0
    before = check_consistent(db)
    source = tmp_path / "in.jsonl"
    source.write_bytes("\n".join([*lines, _nested(5000)][:4]).encode("utf-8", "surrogatepass"))
    done = run_cli("import", str(source), "--db", str(db))
    err = done.stderr.decode("utf-8", "replace")
    assert "internal error" not in err, err
    assert done.returncode in (0, 1, 2), err
    after = check_consistent(db)
    assert after == before or done.returncode == 0
