"""The store's SQLite (memsearch.store.sqlite_driver): one module picks it; FTS5's secure-delete
removes a deleted memory's words in place where that SQLite has it (no merge of the whole index),
and the words still leave the database and its WAL; a full-text table a newer SQLite wrote is
rebuilt by an older one from the stored text, or refused in one line where it cannot be written;
sqlean.py's bundled extensions stay off, and a store file cannot call them."""

from __future__ import annotations

import ast
import json
import os
import sqlite3 as python_sqlite3  # the standard module itself: what the fallback runs on
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memsearch.errors import MemoryNotFoundError, StoreCorruptError
from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.store import Scope
from memsearch.store.migrations import BACK_TO_FORMAT_4, SECURE_DELETE_ON, fts_format
from memsearch.store.sqlite import SQLiteStore
from memsearch.store.sqlite_driver import DRIVER, SECURE_DELETE, sqlite3
from memsearch.text import LexicalQuery
from tests.conftest import T0

MODEL = EmbeddingModelInfo("test-model", 3)
SECRET = "Hunter2Zebra99"
ROOT = Path(__file__).resolve().parent.parent
SEGMENTS = "SELECT count(DISTINCT segid) FROM memories_fts_idx"
needs_secure_delete = pytest.mark.skipif(not SECURE_DELETE, reason=f"SQLite {sqlite3.sqlite_version} < 3.42")
# Python's own sqlite3 is older than 3.42 here: the fallback path a platform without sqlean.py takes.
_stdlib = python_sqlite3.sqlite_version_info < (3, 42, 0)
needs_old_stdlib = pytest.mark.skipif(not (_stdlib and SECURE_DELETE), reason="needs an older stdlib SQLite beside it")


def vectors(n: int) -> np.ndarray:
    rows = np.random.default_rng(n).normal(size=(n, 3)).astype(np.float32)
    unit: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


def add(store: SQLiteStore, *texts: str, key: str | None = None, replace: bool = False) -> list[int]:
    memories = [NewMemory(text, key=key) for text in texts]
    return store.insert(memories, vectors(len(texts)), MODEL, T0, replace=replace)


def holding(db_path: Path, word: str) -> list[str]:
    """The store's files (database, WAL) whose bytes hold `word` (any case: the index lowercases)."""
    files = [db_path, Path(f"{db_path}-wal")]
    return [p.name for p in files if p.exists() and word.lower().encode() in p.read_bytes().lower()]


def found(store: SQLiteStore, word: str) -> list[int]:
    return [memory_id for memory_id, _ in store.lexical_search(LexicalQuery.of(word), Scope(), 10)]


def in_stdlib(db_path: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`code` in a process whose store runs on Python's own sqlite3 (MEMSEARCH_SQLITE=sqlite3)."""
    prelude = (
        "import json, sys\nfrom pathlib import Path\nfrom memsearch.store.sqlite import SQLiteStore\n"
        "from memsearch.store import Scope\nfrom memsearch.text import LexicalQuery\n"
        f"path = Path({str(db_path)!r})\n"
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "MEMSEARCH_SQLITE": "sqlite3", **env},
    )  # fmt: skip


def test_every_module_opens_sqlite_through_the_driver_module() -> None:
    """sqlean's exceptions and connections are not the standard module's: one module that opened
    SQLite on its own would miss the store's errors and its SQLite."""
    for path in sorted((ROOT / "memsearch").rglob("*.py")):
        if path.name == "sqlite_driver.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                assert name.split(".")[0] not in ("sqlite3", "sqlean", "pysqlite3"), (path.name, name)


def test_the_format_steps_suit_the_sqlite() -> None:
    assert fts_format({"version": 4}, secure_delete=True) == (SECURE_DELETE_ON,)
    assert fts_format({"version": 5, "secure-delete": 1}, secure_delete=True) == ()
    assert fts_format({"version": 4}, secure_delete=False) == ()
    assert fts_format({"version": 4, "secure-delete": 1}, secure_delete=False) == ()  # read and written as it is
    assert fts_format({"version": 5, "secure-delete": 1}, secure_delete=False) == BACK_TO_FORMAT_4
    assert fts_format({"version": 5, "secure-delete": 0}, secure_delete=False) == BACK_TO_FORMAT_4
    # a format this SQLite does not read (a later one, or a damaged record) is rebuilt from the stored text
    for secure in (True, False):
        assert fts_format({"version": 6, "secure-delete": 1}, secure_delete=secure) == BACK_TO_FORMAT_4
        assert fts_format({"version": "x"}, secure_delete=secure) == BACK_TO_FORMAT_4
        assert fts_format({"version": 3}, secure_delete=secure) == BACK_TO_FORMAT_4


def test_a_damaged_format_record_is_rebuilt_not_an_internal_error(db_path: Path) -> None:
    """The table's format record is input too: a value that is no format (a damaged or crafted
    file) rebuilds the index from the stored text on open instead of failing every search."""
    store = SQLiteStore.open(db_path, create=True)
    ids = add(store, "alpha note about the garden", "beta note about the shed")
    store.close()
    raw = sqlite3.connect(db_path)
    raw.execute("UPDATE memories_fts_config SET v = 'x' WHERE k = 'version'")
    raw.commit()
    raw.close()
    with SQLiteStore.open(db_path) as store:
        assert found(store, "garden") == [ids[0]] and found(store, "shed") == [ids[1]]
        assert store._db.execute("SELECT v FROM memories_fts_config WHERE k = 'version'").fetchone()[0] in (4, 5)


@needs_secure_delete
def test_a_delete_removes_the_words_in_place_without_merging_the_index(db_path: Path) -> None:
    store = SQLiteStore.open(db_path, create=True)
    for n in range(3):  # a write, a segment of the full-text index
        add(store, f"ordinary note {n} about the garden", f"another note {n} about the shed")
    secret = add(store, f"the vault password is {SECRET}")[0]
    segments = store._db.execute(SEGMENTS).fetchone()[0]
    assert segments >= 3 and holding(db_path, SECRET)
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    store.delete([secret])
    store._db.set_trace_callback(None)
    assert not any("optimize" in statement for statement in statements), statements
    assert store._db.execute(SEGMENTS).fetchone()[0] == segments  # the merge would leave one
    assert not holding(db_path, SECRET), "deleted text left in the open store's files"
    assert found(store, SECRET) == [] and len(found(store, "note")) == 6
    store._db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    store.close()
    assert not holding(db_path, SECRET)


@pytest.mark.parametrize("in_batch", [False, True])
@pytest.mark.parametrize("share", ["few", "bulk"])
def test_deleted_words_leave_the_files_whether_few_or_many_are_deleted(
    db_path: Path, share: str, in_batch: bool
) -> None:
    """A delete of more than BULK_DELETE_SHARE of the store (and _BULK_FLOOR rows) deletes without
    FTS5's secure-delete and merges once, in the same transaction, then has secure-delete on again;
    a few deletes go in place. In a `batch` as in one call, no deleted word is left in the files."""
    store = SQLiteStore.open(db_path, create=True)
    for n in range(4):
        add(store, *(f"ordinary note {n} {i} about the garden" for i in range(150)))
    secret = add(store, f"the vault password is {SECRET}")[0]
    count = 5 if share == "few" else 200  # of 601: under the floor, or a third
    doomed = [secret, *range(1, count)]
    segments = store._db.execute(SEGMENTS).fetchone()[0]
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    if in_batch:
        with store.batch():
            for memory_id in doomed:
                store.delete([memory_id])
    else:
        store.delete(doomed)
    store._db.set_trace_callback(None)
    merged = any("'optimize'" in statement for statement in statements)
    config = dict(store._db.execute("SELECT k, v FROM memories_fts_config").fetchall())
    if SECURE_DELETE:
        assert merged == (share == "bulk") and config["secure-delete"] == 1
        assert store._db.execute(SEGMENTS).fetchone()[0] == (1 if share == "bulk" else segments)
    assert not holding(db_path, SECRET), "deleted text left in the open store's files"
    assert found(store, SECRET) == [] and len(found(store, "note")) == 10
    assert store.count() == 601 - count
    store._db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    store.close()
    assert not holding(db_path, SECRET)


@needs_secure_delete
def test_a_replace_removes_the_old_words_in_place(db_path: Path) -> None:
    store = SQLiteStore.open(db_path, create=True)
    add(store, "a first note", "a second note")
    add(store, f"the vault password is {SECRET}", key="vault")
    segments = store._db.execute(SEGMENTS).fetchone()[0]
    add(store, "the vault password was changed", key="vault", replace=True)
    assert store._db.execute(SEGMENTS).fetchone()[0] > 1 and segments > 1  # not merged into one
    assert not holding(db_path, SECRET)
    assert found(store, "changed") and not found(store, SECRET)
    store.close()


@needs_secure_delete
def test_an_older_stores_table_gets_secure_delete_on_open(db_path: Path) -> None:
    store = SQLiteStore.open(db_path, create=True)
    add(store, "a note")
    store._db.execute("INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', 0)")  # as before
    store.close()
    with SQLiteStore.open(db_path) as store:
        config = dict(store._db.execute("SELECT k, v FROM memories_fts_config").fetchall())
    assert config["secure-delete"] == 1


@needs_secure_delete
def test_a_memsearch_from_before_format_5_says_upgrade_not_damaged(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store whose full-text table is at FTS5's format 5 carries schema 10 or later, so a
    memsearch of schema 9 (which knows no format 5) refuses it by its version before any query
    would take the table for a damaged one."""
    store = SQLiteStore.open(db_path, create=True)
    ids = add(store, "a note", "another note")
    store.delete(ids[:1])  # the first delete with secure-delete moves the table to format 5
    assert store._db.execute("SELECT v FROM memories_fts_config WHERE k = 'version'").fetchone()[0] == 5
    store.close()
    monkeypatch.setattr("memsearch.store.sqlite_schema.SCHEMA_VERSION", 9)
    with pytest.raises(StoreCorruptError, match="newer than this memsearch's 9; upgrade memsearch"):
        SQLiteStore.open(db_path)


@needs_old_stdlib
def test_an_older_sqlite_rebuilds_a_newer_ones_table_from_the_stored_text(db_path: Path) -> None:
    store = SQLiteStore.open(db_path, create=True)
    ids = add(store, "alpha note about the garden", "beta note about the shed", f"gamma {SECRET}")
    store.delete([ids[1]])  # the table's first write with secure-delete: FTS5's format 5
    assert store._db.execute("SELECT v FROM memories_fts_config WHERE k = 'version'").fetchone() == (5,)
    store.close()
    plain = python_sqlite3.connect(db_path)
    with pytest.raises(python_sqlite3.OperationalError, match="invalid fts5 file format"):  # what the rebuild is for
        plain.execute("SELECT count(*) FROM memories_fts")
    plain.close()
    done = in_stdlib(
        db_path,
        "with SQLiteStore.open(path) as store:\n"
        "    hits = [i for i, _ in store.lexical_search(LexicalQuery.of('note'), Scope(), 10)]\n"
        f"    store.delete([{ids[2]}])\n"
        "    config = dict(store._db.execute('SELECT k, v FROM memories_fts_config').fetchall())\n"
        "print(json.dumps([hits, config]))\n",
    )
    assert done.returncode == 0, done.stderr
    hits, config = json.loads(done.stdout)
    assert hits == [ids[0]] and config == {"version": 4, "secure-delete": 1, "automerge": 4}
    assert not holding(db_path, SECRET)
    with SQLiteStore.open(db_path) as store:  # back on the newer SQLite: secure-delete again
        assert found(store, "note") == [ids[0]]
        assert store._db.execute("SELECT v FROM memories_fts_config WHERE k = 'secure-delete'").fetchone() == (1,)


@needs_old_stdlib
def test_an_older_sqlite_that_cannot_write_the_store_says_so_in_one_line(db_path: Path) -> None:
    store = SQLiteStore.open(db_path, create=True)
    ids = add(store, "alpha note", "beta note")
    store.delete([ids[1]])
    store.close()
    done = in_stdlib(
        db_path,
        "from memsearch.errors import MemsearchError\n"
        "try:\n    SQLiteStore.open(path)\nexcept MemsearchError as error:\n"
        "    print(type(error).__name__, str(error), sep='|')\n",
        MEMSEARCH_READ_ONLY="1",
    )
    assert done.returncode == 0 and not done.stderr, done.stderr
    kind, message = done.stdout.strip().split("|")
    assert kind == "StoreUnavailableError" and "\n" not in message
    assert "SQLite 3.42 or newer" in message and "pip install sqlean.py" in message


def delete_under_an_open_stdlib_store(db_path: Path, **env: str) -> list[str]:
    """A store held open by a process on Python's own sqlite3 (older than 3.42) across a delete in
    this one (sqlean: its secure-delete writes FTS5's format 5), then searched there again: that
    process's lines (its hits, or its typed error)."""
    store = SQLiteStore.open(db_path, create=True)
    ids = add(store, "alpha note about the garden", "beta note about the shed", "gamma note")
    store.close()
    code = (
        "import json, sys\nfrom pathlib import Path\nfrom memsearch.errors import MemsearchError\n"
        "from memsearch.store.sqlite import SQLiteStore\nfrom memsearch.store import Scope\n"
        "from memsearch.text import LexicalQuery\n"
        f"store = SQLiteStore.open(Path({str(db_path)!r}))\n"
        "def search():\n"
        "    try:\n        hits = store.lexical_search(LexicalQuery.of('note'), Scope(), 10)\n"
        "        print(json.dumps(sorted(i for i, _ in hits)))\n"
        "    except MemsearchError as error:\n        print(type(error).__name__, str(error), sep='|')\n"
        "    sys.stdout.flush()\n"
        "search()\nsys.stdin.readline()\nsearch()\nsearch()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=ROOT, env={**os.environ, "MEMSEARCH_SQLITE": "sqlite3", **env},
    )  # fmt: skip
    try:
        assert child.stdout is not None and sorted(json.loads(child.stdout.readline())) == ids  # read at format 4
        with SQLiteStore.open(db_path) as newer:
            newer.delete([ids[1]])
            assert newer._db.execute("SELECT v FROM memories_fts_config WHERE k = 'version'").fetchone() == (5,)
        out, err = child.communicate("go\n", timeout=120)
    finally:
        child.kill()
        child.wait(timeout=30)
    assert child.returncode == 0 and not err, err
    return [json.dumps([ids[0], ids[2]]), *out.splitlines()]


@needs_old_stdlib
def test_an_older_sqlite_rebuilds_a_table_a_newer_one_changed_under_its_open_store(db_path: Path) -> None:
    expected, *searches = delete_under_an_open_stdlib_store(db_path)
    assert searches == [expected, expected]  # rebuilt once, from the stored text, and searched
    with SQLiteStore.open(db_path) as store:
        assert store._db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')").rowcount >= 0


@needs_old_stdlib
def test_an_older_sqlite_only_reading_a_store_a_newer_one_changed_says_so_in_one_line(db_path: Path) -> None:
    _, *searches = delete_under_an_open_stdlib_store(db_path, MEMSEARCH_READ_ONLY="1")
    for line in searches:
        kind, message = line.split("|")
        assert kind == "StoreUnavailableError" and "pip install sqlean.py" in message


@pytest.mark.skipif(DRIVER != "sqlean", reason="the store runs on sqlean.py only where it is installed")
def test_sqleans_extensions_are_off_and_loading_extensions_is_refused(db_path: Path) -> None:
    store = SQLiteStore.open(db_path, create=True)
    names = {row[0] for row in store._db.execute("SELECT name FROM pragma_function_list")}
    assert not names & {"readfile", "writefile", "fileio_read", "fileio_write", "eval", "define", "regexp"}
    with pytest.raises(sqlite3.OperationalError, match="not authorized"):
        store._db.execute("SELECT load_extension('/nonexistent')")
    store.close()


@pytest.mark.skipif(DRIVER != "sqlean", reason="the store runs on sqlean.py only where it is installed")
def test_a_store_file_cannot_call_sqleans_file_functions_even_when_they_are_on(db_path: Path) -> None:
    """A store file is input: its triggers and views run when memsearch writes and reads it."""
    target = db_path.parent / "written-by-the-store-file"
    store = SQLiteStore.open(db_path, create=True)
    add(store, "a note")
    store.close()
    holder = sqlite3.connect(db_path)
    holder.execute(
        f"CREATE TRIGGER t AFTER UPDATE ON memories BEGIN SELECT writefile('{target}', 'x'); END"
    )  # made without the function: a trigger is checked when it runs
    holder.commit()
    holder.close()
    code = (
        "from memsearch.store.sqlite_driver import DRIVER\n"
        "store = SQLiteStore.open(path)\n"
        "try:\n    store._db.execute('UPDATE memories SET importance = 0.9')\n"
        "except Exception as error:\n    print(DRIVER, error)\n"
    )
    done = in_stdlib(db_path, code, MEMSEARCH_SQLITE="sqlean", SQLEAN_ENABLE="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "sqlean unsafe use of writefile()" and not target.exists()


@needs_old_stdlib
def test_a_newer_sqlite_store_open_across_an_older_ones_rebuild_writes_format_5_again(db_path: Path) -> None:
    """The older SQLite's rebuild ends with a settings write of FTS5's own, so a newer SQLite's
    connection that had the table open reloads its settings: its next (bulk) delete moves the
    table to format 5 again, where it wrote format-5 pages under a setting that said 4 (damaged)."""
    store = SQLiteStore.open(db_path, create=True)
    ids = add(store, *(f"common w{i % 50} z{i}" for i in range(600)))
    store.delete(ids[::7])  # format 5
    done = in_stdlib(db_path, "SQLiteStore.open(path).close()\n")  # the rebuild, back to format 4
    assert done.returncode == 0, done.stderr
    assert store._db.execute("SELECT v FROM memories_fts_config WHERE k = 'version'").fetchone() == (4,)
    store.delete([memory_id for memory_id in ids[1:141] if memory_id not in ids[::7]])  # under the bulk floor
    config = dict(store._db.execute("SELECT k, v FROM memories_fts_config").fetchall())
    assert config["version"] == 5 and config["secure-delete"] == 1
    store._db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    assert len(found(store, "common")) == 10
    store.close()


# The newest sqlean.py release with a wheel for each platform and Python, as `pip install --dry-run
# --only-binary :all: --platform … --python-version …` found on PyPI (2026-12-02); None: none has.
_WHEELS: dict[tuple[str, str], dict[str, str | None]] = {
    ("linux", "x86_64"): {"3.11": "3.50.4.4", "3.13": "3.50.4.4", "3.14": "3.50.4.5"},  # glibc 2.17; 2.28 for 3.14
    ("linux", "aarch64"): {"3.11": "3.50.4.4", "3.13": "3.50.4.4", "3.14": "3.50.4.5"},
    ("linux", "armv7l"): {"3.11": None},
    ("win32", "AMD64"): {"3.11": "3.49.1", "3.13": "3.49.1", "3.14": None},
    ("win32", "ARM64"): {"3.11": "3.49.1", "3.13": "3.49.1", "3.14": None},
    ("darwin", "arm64"): {"3.11": "3.50.4.5", "3.14": "3.50.4.5"},
    ("darwin", "x86_64"): {"3.11": "3.50.4.5", "3.14": "3.50.4.5"},
}
_NEWEST = "3.50.4.5"  # with an sdist, which pip builds where this release has no wheel


def test_pyproject_asks_for_sqlean_only_where_pip_picks_a_wheel() -> None:
    """pip takes the newest release a requirement allows, and builds its sdist where it has no
    wheel (a C compiler, or a failed install): each platform's requirement allows at most the
    newest release with its wheel, and none where there is none."""
    import tomllib

    from packaging.requirements import Requirement

    wanted = [
        Requirement(line) for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    ]
    wanted = [requirement for requirement in wanted if requirement.name == "sqlean.py"]
    for (platform, machine), pythons in _WHEELS.items():
        for python, wheel in pythons.items():
            environment = {"sys_platform": platform, "platform_machine": machine, "python_version": python}
            asked = [
                requirement.specifier
                for requirement in wanted
                if requirement.marker and requirement.marker.evaluate(environment)
            ]
            where = f"{platform} {machine} Python {python}"
            if wheel is None:
                assert not asked, where
                continue
            assert len(asked) == 1, where
            allowed = [version for version in ("3.45.1", "3.49.1", "3.50.4.4", _NEWEST) if version in asked[0]]
            assert allowed and allowed[-1] == wheel, where


def test_a_driver_memsearch_does_not_know_is_refused_in_one_line(tmp_path: Path) -> None:
    from memsearch.store.sqlite_driver import driver_problem

    assert driver_problem("", "sqlean") is None and driver_problem("sqlite3", "sqlite3") is None
    assert driver_problem("sqlean", "sqlean") is None
    assert "pip install sqlean.py" in (driver_problem("sqlean", "sqlite3") or "")
    for value in ("pysqlite3", "bogus"):
        done = subprocess.run(
            [sys.executable, "-m", "memsearch", "--db", str(tmp_path / "m.db"), "add", "a note"],
            capture_output=True, text=True, timeout=120, cwd=ROOT, env={**os.environ, "MEMSEARCH_SQLITE": value},
        )  # fmt: skip
        assert done.returncode != 0 and done.stderr.count("\n") == 1, done.stderr
        assert f"MEMSEARCH_SQLITE={value} is not a driver memsearch knows" in done.stderr
        assert not (tmp_path / "m.db").exists()


def test_a_failed_delete_inside_a_batch_leaves_nothing_of_itself(db_path: Path) -> None:
    """A delete is all or nothing inside a batch too: one unknown id after 199 known ones (a bulk
    delete, which turns secure-delete off until its merge) deletes none, leaves secure-delete as
    it was, and the batch's other writes stand."""
    store = SQLiteStore.open(db_path, create=True)
    ids = add(store, *[f"garden note {n}" for n in range(200)])
    with store.batch():
        with pytest.raises(MemoryNotFoundError):
            store.delete([*ids[:199], max(ids) + 1000])
        later = add(store, "a later note about the shed")
    assert store.count(Scope()) == 201 and found(store, "shed") == later
    assert len(store.get_many(ids)) == 200
    if SECURE_DELETE:
        assert store._db.execute("SELECT v FROM memories_fts_config WHERE k = 'secure-delete'").fetchone()[0] == 1
    store._db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('integrity-check')")
    store.close()
