"""Input the core refuses cleanly (issue 9, item 7) and environment errors worded as such (item 8):
each is one line on stderr with the documented exit code, and nothing is stored."""

from __future__ import annotations

import json
import math
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.embedding import Encoder
from memsearch.errors import InvalidInputError, MemoryNotFoundError
from memsearch.models import NewMemory
from memsearch.retrieval.request import SearchRequest
from memsearch.store.sqlite_driver import sqlite3
from memsearch.timeutil import parse_time
from tests.reliability.helpers import check_consistent, run_cli

USAGE, ERROR = 2, 1


def _refused(done: subprocess.CompletedProcess[bytes], code: int, *words: str) -> str:
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == code, (done.returncode, err)
    assert len(err.strip().splitlines()) == 1, err
    assert "internal error" not in err and "Traceback" not in err, err
    for word in words:
        assert word in err, (word, err)
    return err


@pytest.fixture
def db(tmp_path: Path, encoder: Encoder) -> Path:
    path = tmp_path / "store" / "memsearch.db"
    assert run_cli("add", "the one memory already stored", "--db", str(path)).returncode == 0
    return path


# -- the library ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["a\ud800b", "\udcff", "ok \udced\udca0\udc80"])
def test_lone_surrogates_are_refused_by_the_model(text: str) -> None:
    with pytest.raises(InvalidInputError, match="not valid Unicode"):
        NewMemory(text=text)
    with pytest.raises(InvalidInputError, match="not valid Unicode"):
        NewMemory(text="fine", tags=(text,))
    with pytest.raises(InvalidInputError, match="not valid Unicode"):
        NewMemory(text="fine", project=text)


def test_a_text_of_the_wrong_type_is_named_as_such() -> None:
    with pytest.raises(InvalidInputError, match="text must be a string, not int 42"):
        NewMemory.from_json({"text": 42})
    with pytest.raises(InvalidInputError, match="memory text is empty"):
        NewMemory.from_json({"text": "  "})


@pytest.mark.parametrize(
    "moment", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "0001-01-01", "9999-12-31T23:59:59Z"]
)
def test_moments_at_the_ends_of_the_calendar_are_refused(moment: str) -> None:
    with pytest.raises(InvalidInputError, match="ends of the calendar"):
        parse_time(moment, what="--as-of")


def test_queries_with_lone_surrogates_and_huge_ids_are_refused_by_the_store(ms: Memsearch) -> None:
    ms.add(NewMemory(text="a note"))
    for mode in ("lexical", "vector", "auto"):
        with pytest.raises(InvalidInputError, match="not valid Unicode"):
            ms.search(SearchRequest("q\udcff", mode=mode))
    with pytest.raises(MemoryNotFoundError):
        ms.get(10**20)
    with pytest.raises(MemoryNotFoundError):
        ms.delete([10**20])
    assert len(ms.list(limit=10**30)) == 1
    assert ms.list(limit=10**30, offset=10**30) == []


@pytest.mark.parametrize("tau", [math.nan, math.inf, -math.inf])
def test_a_tau_that_is_not_a_finite_number_is_refused(ms: Memsearch, tau: float) -> None:
    ms.add(NewMemory(text="a note"))
    with pytest.raises(InvalidInputError, match="must be a number") as refused:
        ms.search(SearchRequest("note", tau_days=tau))
    assert refused.value.field == "tau_days"


# -- the command line ------------------------------------------------------------------------------


def test_invalid_utf8_arguments_and_stdin_are_refused(db: Path) -> None:
    _refused(run_cli("add", "bad \udced\udca0\udc80 bytes", "--db", str(db)), USAGE, "not valid UTF-8")
    _refused(run_cli("search", "q\udcff\udcfe", "--db", str(db)), USAGE, "argument 2")
    _refused(run_cli("add", "-", "--db", str(db), input=b"\xed\xa0\x80 from stdin"), USAGE, "not valid Unicode")
    assert check_consistent(db) == 1


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ('{"text": "a\\ud800b"}', ["line 1", "not valid Unicode"]),
        ('{"text": 42}', ["line 1", "text must be a string, not int 42"]),
        ('{"text": "x", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}", ["nested too deeply"]),
        ("[" * 100_000 + "]" * 100_000, ["nested too deeply"]),
    ],
)
def test_bad_import_lines_are_refused_and_nothing_is_stored(
    db: Path, tmp_path: Path, line: str, words: list[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"text": "a good line first"}) + "\n" + line + "\n", encoding="utf-8")
    _refused(run_cli("import", str(source), "--db", str(db)), ERROR, *[w.replace("line 1", "line 2") for w in words])
    assert check_consistent(db) == 1


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["search", "memory", "--tau", "nan"], USAGE, ["--tau"]),
        (["search", "memory", "--tau", "inf"], USAGE, ["--tau"]),
        (["get", "100000000000000000000"], ERROR, ["no memory with id 100000000000000000000"]),
        (["delete", "100000000000000000000"], ERROR, ["no memory with id"]),
        (["search", "memory", "--as-of", "0001-01-01T00:00:00+14:00"], USAGE, ["--as-of", "ends of the calendar"]),
    ],
)
def test_values_at_the_edge_are_refused_in_one_line(db: Path, args: list[str], code: int, words: list[str]) -> None:
    _refused(run_cli(*args, "--db", str(db)), code, *words)
    assert check_consistent(db) == 1


def test_a_huge_list_limit_lists_everything(db: Path) -> None:
    done = run_cli("list", "-n", str(10**30), "--format", "json", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "the one memory already stored" in done.stdout.decode()


# -- the environment -------------------------------------------------------------------------------


def test_a_parent_that_is_a_file_is_named(tmp_path: Path, encoder: Encoder) -> None:
    (tmp_path / "afile").write_text("x")
    err = _refused(run_cli("add", "x", "--db", str(tmp_path / "afile" / "sub" / "m.db")), ERROR, "is a file")
    assert str(tmp_path / "afile") in err


def test_a_name_too_long_is_named(tmp_path: Path, encoder: Encoder) -> None:
    _refused(run_cli("add", "x", "--db", str(tmp_path / ("x" * 300) / "m.db")), ERROR, "longer than the file system")


def test_a_store_under_proc_is_refused(encoder: Encoder) -> None:
    if not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    _refused(run_cli("add", "x", "--db", "/proc/memsearch.db"), ERROR, "cannot create a store", "/proc/memsearch.db")
    _refused(run_cli("list", "--db", "/proc/self/status"), ERROR, "/proc/self/status")


def test_corrupt_pages_are_reported_as_a_damaged_store(db: Path) -> None:
    connection = sqlite3.connect(db)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    data = bytearray(db.read_bytes())
    for page in range(1, len(data) // 4096):
        data[page * 4096 : (page + 1) * 4096] = b"\x5a" * 4096
    db.write_bytes(data)
    for args in (["list"], ["search", "memory"], ["add", "more"], ["stats"]):
        _refused(run_cli(*args, "--db", str(db)), ERROR, "is damaged", "restore it from a backup")


def test_vectors_of_the_wrong_length_say_to_reindex(db: Path) -> None:
    connection = sqlite3.connect(db)
    connection.execute("UPDATE vectors SET vector = zeroblob(10)")
    connection.commit()
    connection.close()
    _refused(run_cli("search", "memory", "--mode", "vector", "--db", str(db)), ERROR, "reindex")
    assert run_cli("reindex", "--db", str(db)).returncode == 0
    assert run_cli("search", "memory", "--mode", "vector", "--db", str(db)).returncode == 0


def test_parse_time_keeps_ordinary_moments() -> None:
    assert parse_time("2024-05-01T13:56:00+02:00") == datetime(2024, 5, 1, 11, 56, tzinfo=UTC)


def test_a_search_of_a_missing_store_says_so_before_preparing_any_model(tmp_path: Path) -> None:
    cache = tmp_path / "fresh-cache"  # no model export yet: preparing one would take seconds
    done = run_cli("search", "hello", "--db", str(tmp_path / "missing.db"), MEMSEARCH_CACHE_DIR=str(cache))
    err = _refused(done, ERROR, "no memsearch store")
    assert "preparing" not in err
    assert not (cache / "onnx").exists()
