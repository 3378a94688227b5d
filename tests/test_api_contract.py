"""The Python API's input contract: whatever a caller passes to a public `Memsearch` method, the
method returns, or raises a `MemsearchError` with a one-line message, and a refused call leaves
every stored memory as it was.

A hypothesis fuzz calls the methods with arbitrary JSON-like and Python values (wrong types, huge
and negative numbers, NaN, lone surrogates, deep nesting, look-alike digits) on one small store
(real encoder; searches lexical where embedding would be slow), then targeted cases pin down what
the fuzz found.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsearch.api import Memsearch
from memsearch.embedding import Encoder
from memsearch.errors import InvalidInputError, MemsearchError
from memsearch.models import NewMemory
from memsearch.operations import MAX_QUERY_CHARS
from memsearch.retrieval.request import Boost, SearchRequest
from memsearch.store import Scope

# Strings that have broken front ends or stores: lone surrogates, non-ASCII digits, a NUL, huge ids.
TRICKY_TEXT = (
    "", " ", "\ud800", "a\udcff", "٣", "２", "²", "3", "0", "-1", "\x00", "9" * 30, "1e999", "NaN", "k1",
    "note", "turn", "session", "jsonl", "chat", "locomo", "longmemeval", "default", "lexical", "auto",
)  # fmt: skip
ANY_CHAR_TEXT = st.text(st.characters(exclude_categories=[]), max_size=12)  # surrogates included
TEXT = st.sampled_from(TRICKY_TEXT) | ANY_CHAR_TEXT
INTS = st.integers() | st.sampled_from([-(2**63) - 1, -(2**63), -1, 0, 1, 2, 3, 2**63 - 1, 2**63, 2**64, 10**30])
FLOATS = st.floats() | st.sampled_from([float("nan"), float("inf"), -0.0, 1e308])
SCALARS = st.none() | st.booleans() | INTS | FLOATS | TEXT
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=8
)
PYTHON = st.sampled_from(
    [b"3", bytearray(b"k"), object(), {1, 2}, frozenset(), (), (1,), ("k1",), datetime(2024, 1, 1),
     datetime(2024, 1, 1, tzinfo=UTC), Path("x"), print, 1j, ...]
)  # fmt: skip
VALUES = JSON | PYTHON


def deep(opening: str, closing: str, depth: int = 100_000) -> str:
    return opening * depth + closing * depth


DEEP_TEXTS = (deep("[", "]"), deep('{"a":', "}"), '{"text": "x", "metadata": ' + deep("[", "]") + "}")

SCOPES = st.builds(
    Scope,
    project=VALUES,
    namespace=VALUES,
    tags=VALUES,
    since=VALUES,
    until=VALUES,
    kinds=VALUES,
    conversation=VALUES,
    roles=VALUES,
    sessions=VALUES,
) | st.sampled_from([Scope(), Scope(kinds=("note",)), Scope(tags=("t",))])
SCOPE_ARGS = SCOPES | VALUES
REFS = VALUES | st.lists(VALUES, max_size=3) | st.lists(st.sampled_from(TRICKY_TEXT) | INTS, max_size=3)
CONTENT = TEXT | st.sampled_from(DEEP_TEXTS) | JSON.map(lambda value: json.dumps(value, allow_nan=True)) | VALUES
NEW_MEMORIES = st.builds(NewMemory, text=st.sampled_from(["fuzz note", "another fuzz note"])) | VALUES


def _requests() -> st.SearchStrategy[Any]:
    """Search requests that pass their own constructor but carry odd scopes, boosts and queries,
    and values that are no request at all."""

    def request(query: str, scope: Any, boosts: Any, as_of: Any) -> Any:
        try:
            return SearchRequest(query, mode="lexical", scope=scope, boosts=boosts, as_of=as_of)
        except MemsearchError:
            return SearchRequest("fuzz", mode="lexical")

    built = st.builds(
        request,
        TEXT | st.just("fuzz note"),
        SCOPE_ARGS,
        st.just(()) | VALUES | st.just((Boost("tag", "t", 2.0),)),
        st.none() | VALUES,
    )
    return built | VALUES


REQUESTS = _requests()
DEFAULT_NAMES = st.sampled_from(["k", "mode", "scope", "touch", "profile", "granularity", "rerank"]) | TEXT


# Each public method with strategies for its arguments: (name, args, kwargs).
def _call(
    name: str,
    *args: st.SearchStrategy[Any],
    required: dict[str, st.SearchStrategy[Any]] | None = None,
    **kwargs: st.SearchStrategy[Any],
) -> st.SearchStrategy[Any]:
    return st.tuples(st.just(name), st.tuples(*args), st.fixed_dictionaries(required or {}, optional=kwargs))


def _changes() -> st.SearchStrategy[dict[str, Any]]:
    names = st.sampled_from(
        ["importance", "priority", "pinned", "project", "namespace", "memory_score", "tags", "text"]
    )
    return st.dictionaries(names | TEXT, VALUES, max_size=3)


CALLS = st.one_of(
    _call("add", NEW_MEMORIES, replace=VALUES, profile=VALUES),
    _call("add_many", st.lists(NEW_MEMORIES, max_size=2) | VALUES, replace=VALUES, profile=VALUES, progress=VALUES),
    _call(
        "import_text",
        CONTENT,
        required={"source": VALUES},
        fmt=VALUES | st.sampled_from(["jsonl", "chat", "locomo", "longmemeval"]),
        sessions=VALUES,
        facets=VALUES,
        replace=VALUES,
        profile=VALUES,
        conversation=VALUES,
        progress=VALUES,
    ),
    _call("delete", REFS),
    _call("delete_matching", REFS, SCOPE_ARGS, by_key=VALUES, everything=VALUES, dry_run=VALUES),
    _call("tags", SCOPE_ARGS),
    _call("resolve", VALUES, by_key=VALUES),
    _call("get", VALUES),
    _call("get_many", REFS, by_key=VALUES),
    _call("list", SCOPE_ARGS, VALUES, VALUES),
    _call("export", SCOPE_ARGS),
    _call("timeline", VALUES, before=VALUES, after=VALUES),
    _call("profile", VALUES),
    _call("search", REQUESTS),
    _call("search_many", st.lists(REQUESTS, max_size=2) | VALUES),
    _call("update", VALUES),
    _call("set_pinned", REFS, VALUES),
    _call("consolidate", duplicate=VALUES, related=VALUES, dry_run=VALUES),
    _call("reindex", VALUES),
)
UPDATES = st.tuples(st.just("update"), st.tuples(REFS | VALUES), _changes())
QUERIES = st.tuples(
    st.just("parse_queries"),
    st.tuples(CONTENT | JSON.map(lambda value: json.dumps({"query": "q", **({"k": value} if value else {})}))),
    st.dictionaries(DEFAULT_NAMES, VALUES, max_size=2).map(lambda defaults: {"source": "fuzz", **defaults}),
)
COPIES = st.tuples(
    st.just("copy_to"), st.tuples(VALUES.filter(lambda value: not isinstance(value, str))), st.just(dict[str, Any]())
)


class Fixture:
    """One small store, put back from a pristine copy whenever a call changed it."""

    def __init__(self, folder: Path, encoder: Encoder) -> None:
        self.folder = folder
        self.db = folder / "store" / "memsearch.db"
        self.pristine = folder / "pristine.db"
        self.encoder = encoder
        with Memsearch(self.db, encoder=encoder) as ms:
            ms.import_text(
                "\n".join(
                    json.dumps({"session": "s1", "role": role, "text": text, "created_at": "2024-05-01T10:00:00Z"})
                    for role, text in [("user", "hello there"), ("assistant", "hi, how can I help"), ("user", "bye")]
                ),
                source="chat.jsonl",
                fmt="chat",
            )
            ms.add_many(  # ids 5, 6 and 7: the keys that look like digits are not id 3
                [NewMemory("the deploy key lives in the vault", key="k1", tags=("ops",)),
                 NewMemory("lunch on friday with Ana", key="٣"),
                 NewMemory("numbers: id three is this one", key="３")]
            )  # fmt: skip
        shutil.copyfile(self.db, self.pristine)
        self.ms = Memsearch(self.db, encoder=encoder, llm=None)
        self.reference = self.snapshot()

    def snapshot(self) -> list[dict[str, Any]]:
        """Every memory with its fields except the access record (searches touch what they return)."""
        memories = [m.to_dict() for m in self.ms.store().list()]
        for memory in memories:
            for name in ("last_accessed_at", "access_count", "memory_score"):
                memory.pop(name)
        return memories

    def reset(self) -> None:
        self.ms.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.db}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(self.pristine, self.db)
        self.ms = Memsearch(self.db, encoder=self.encoder, llm=None)


@pytest.fixture(scope="module")
def fixture(tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Iterator[Fixture]:
    with pytest.MonkeyPatch.context() as patch:
        folder = tmp_path_factory.mktemp("contract")
        patch.setenv("MEMSEARCH_HOME", str(folder / "home"))
        patch.chdir(folder)  # a path given as a string lands here, never in the repository
        made = Fixture(folder, encoder)
        yield made
        made.ms.close()


def run(ms: Memsearch, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    method: Callable[..., Any] = getattr(ms, name)
    result = method(*args, **kwargs)
    return list(result) if name == "export" else result


def check_call(fixture: Fixture, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    try:
        run(fixture.ms, name, args, kwargs)
    except MemsearchError as error:
        message = str(error)
        assert message.strip() and "\n" not in message, f"{name}: message {message!r}"
        assert fixture.snapshot() == fixture.reference, f"{name}{args!r} {kwargs!r} changed the store on refusal"
        return
    except Exception as error:
        raise AssertionError(f"{name}(*{args!r}, **{kwargs!r}) raised {type(error).__name__}: {error}") from error
    if fixture.snapshot() != fixture.reference:
        fixture.reset()


FUZZ = settings(  # MEMSEARCH_FUZZ_EXAMPLES=25000 for a longer hunt
    max_examples=int(os.environ.get("MEMSEARCH_FUZZ_EXAMPLES", "4000")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


@FUZZ
@given(call=CALLS | UPDATES | QUERIES | COPIES)
def test_every_bad_argument_is_a_typed_refusal_that_changes_nothing(fixture: Fixture, call: Any) -> None:
    check_call(fixture, *call)


@settings(FUZZ, max_examples=300)
@given(db=VALUES.filter(lambda value: not isinstance(value, str | Path)), model=VALUES)
def test_a_bad_location_or_model_is_a_typed_refusal(fixture: Fixture, db: Any, model: Any) -> None:
    try:
        with Memsearch(db, model=model, llm=None) as ms:
            ms.stats()
    except MemsearchError as error:
        assert "\n" not in str(error)


# -- what the fuzz found, case by case ------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["jsonl", "chat", "locomo", "longmemeval"])
@pytest.mark.parametrize("content", DEEP_TEXTS, ids=["list", "object", "metadata"])
def test_deeply_nested_import_text_is_refused(fixture: Fixture, fmt: str, content: str) -> None:
    with pytest.raises(MemsearchError) as refused:
        fixture.ms.import_text(content, source="deep.json", fmt=fmt)
    assert "\n" not in str(refused.value)
    assert fixture.snapshot() == fixture.reference


@pytest.mark.parametrize("content", DEEP_TEXTS, ids=["list", "object", "metadata"])
def test_deeply_nested_queries_are_refused(content: str) -> None:
    with pytest.raises(MemsearchError):
        Memsearch.parse_queries(content, source="deep.jsonl")


@pytest.mark.parametrize(
    ("name", "args", "kwargs", "field"),
    [
        ("get", ("\ud800",), {}, "ref"),
        ("get", (True,), {}, "ref"),
        ("get", (-1,), {}, "ref"),
        ("get", (2**64,), {}, None),
        ("list", (Scope(),), {"offset": -(2**63) - 1}, "offset"),
        ("list", (Scope(),), {"limit": -(2**63) - 1}, "limit"),
        ("list", (Scope(),), {"limit": "10"}, "limit"),
        ("list", ("everything",), {}, "scope"),
        ("update", (1,), {"tags": False}, "tags"),
        ("update", (1,), {"pinned": "no"}, "pinned"),
        ("update", (1,), {"importance": "0.5"}, "importance"),
        ("set_pinned", ([1],), {"pinned": "yes"}, "pinned"),
        ("set_pinned", (1, True), {}, "refs"),
        ("delete", (1,), {}, "refs"),
        ("delete", ("k1",), {}, "refs"),
        ("delete", ([[1]],), {}, "refs"),
        ("delete_matching", (None, Scope()), {}, "refs"),
        ("delete_matching", ([1], Scope(tags=("ops",))), {}, "refs"),
        ("delete_matching", (None, "ops"), {}, "scope"),
        ("delete_matching", (None, Scope(tags=("ops",))), {"dry_run": "yes"}, "dry_run"),
        ("delete_matching", (None, Scope()), {"everything": 1}, "everything"),
        ("delete_matching", ([1],), {"by_key": "no"}, "by_key"),
        ("tags", ("ops",), {}, "scope"),
        ("update", (1,), {"text": 3}, "text"),
        ("timeline", (1,), {"before": 1.5}, "before"),
        ("timeline", (1,), {"after": None}, "after"),
        ("consolidate", (), {"duplicate": "0.9"}, "duplicate"),
        ("consolidate", (), {"dry_run": "yes"}, "dry_run"),
        ("copy_to", (None,), {}, "destination"),
        ("copy_to", (1,), {}, "destination"),
        ("search_many", ("x",), {}, "requests"),
    ],
)
def test_wrong_types_are_refused_naming_the_argument(
    fixture: Fixture, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], field: str | None
) -> None:
    with pytest.raises(MemsearchError) as refused:
        run(fixture.ms, name, args, kwargs)
    if field is not None:
        assert isinstance(refused.value, InvalidInputError)
        assert refused.value.field == field, str(refused.value)
    assert fixture.snapshot() == fixture.reference


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"query": "x" * (MAX_QUERY_CHARS + 1)}, "query"),
        ({"query": "\ud800"}, "query"),
        ({"query": "x", "scope": Scope(tags="ops")}, "tags"),  # type: ignore[arg-type]
        ({"query": "x", "scope": Scope(kinds=("memo",))}, "kinds"),
        ({"query": "x", "scope": "everything"}, "scope"),
        ({"query": "x", "boosts": Boost("tag", "t")}, "boost"),
        ({"query": "x", "boosts": (Boost("tag", "\ud800"),)}, "boost"),
    ],
)
def test_a_search_request_that_exists_is_valid(fields: dict[str, Any], field: str) -> None:
    """Its constructor refuses what a search could not run, naming the field; no search re-checks it."""
    with pytest.raises(InvalidInputError) as refused:
        SearchRequest(mode="lexical", **fields)
    assert refused.value.field == field, str(refused.value)


@pytest.mark.parametrize("key", ["٣", "３"])
def test_a_digit_lookalike_is_a_key_at_every_entry_point(fixture: Fixture, key: str) -> None:
    ms = fixture.ms
    assert ms.resolve(key) == key
    memory = ms.get(key)
    assert memory.key == key and memory.id != 3
    assert [m.id for m in ms.get_many([key])] == [memory.id]
    assert ms.timeline(key, before=0, after=0).current == memory.id
    assert ms.update(key, importance=0.9).id == memory.id
    assert ms.set_pinned([key], True) == [memory.id]
    assert ms.delete([key]) == [memory.id]
    assert ms.get(3).key != key  # id 3 is untouched
    fixture.reset()


def test_a_superscript_digit_is_a_key_not_found() -> None:
    assert Memsearch.resolve("²") == "²"
