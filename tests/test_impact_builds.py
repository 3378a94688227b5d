"""Impact index files made off the search path (memsearch/store/lexical_builds.py): a search never
makes one. In a long-lived process it asks a thread of the store's to, and answers meanwhile from
the file it has and the rows changed since (or through FTS5): FTS5's answers throughout, the new
file swapped in for the searches after. A one-shot process (the CLI) starts no thread: the file
is made at the end of a command that wrote. kill -9 at any step leaves a store and files that
answer right. Synchronised on events (with timeouts), never on sleeps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memsearch.models import NewMemory
from memsearch.store import Scope, lexical_cache
from memsearch.store.lexical_cache import LexicalCache
from memsearch.store.sqlite import SQLiteStore
from memsearch.text import LexicalQuery
from tests.conftest import T0
from tests.reliability.helpers import child_env
from tests.test_lexical_index import (
    MODEL,
    QUERIES,
    _every_change_rebuilds,
    filled,
    fts5,
    impact_files,
    same_answer,
    searched_once,
    vectors,
)

WAIT = 60.0  # seconds an event may take before the test fails


class HeldBuild:
    """LexicalCache.build made to wait, once entered, until released (events both ways)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        build = LexicalCache.build

        def held(cache: LexicalCache, generation: int, db: Any) -> Any:
            self.entered.set()
            assert self.release.wait(WAIT)
            return build(cache, generation, db)

        monkeypatch.setattr(LexicalCache, "build", held)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldBuild]:
    holder = HeldBuild(monkeypatch)
    yield holder
    holder.release.set()  # a failed test leaves no thread waiting


def all_answers_are_fts5s(store: SQLiteStore, view: str | None = None) -> None:
    for query in (*QUERIES, "zebra", "zebra deploy"):
        hits = store.lexical_search(LexicalQuery.of(query), Scope(), 10, view)
        assert same_answer(list(hits), fts5(store, query, view=view)), query


def test_the_first_search_of_a_store_without_a_file_is_answered_by_fts5_and_asks_for_it(
    db_path: Path, held: HeldBuild
) -> None:
    store = filled(db_path)
    hits = store.lexical_search(LexicalQuery.of("deploy config"), Scope(), 10)
    assert same_answer(list(hits), fts5(store, "deploy config"))
    assert held.entered.wait(WAIT)  # being made, in another thread: this search did not wait for it
    assert store._impact[None][1] is None and impact_files(db_path) == []
    all_answers_are_fts5s(store)  # FTS5 answers meanwhile
    held.release.set()
    assert store.wait_for_impact_builds(WAIT)
    all_answers_are_fts5s(store)
    current = store._impact[None][1]
    assert current is not None and current.base_generation == store.generation()  # swapped in
    assert len(impact_files(db_path)) == 1
    assert len(store._connections) == 1  # the builder's own connection closed with its thread
    store.close()


def test_over_the_share_the_old_file_and_the_changed_rows_answer_until_the_new_file_is_swapped_in(
    db_path: Path, held: HeldBuild
) -> None:
    store = filled(db_path)
    held.release.set()
    searched_once(store)
    held.release.clear()
    held.entered.clear()
    writer = SQLiteStore.open(db_path)
    writer.insert([NewMemory("zebra zebra deploy")], vectors(1, 3), MODEL, T0)
    with _every_change_rebuilds(searching=True):
        all_answers_are_fts5s(store)
        assert held.entered.wait(WAIT)
        current = store._impact[None][1]
        assert current is not None and current.base_generation == 1 and current.changed.size == 1  # the old file
        writer.delete([4, 5])  # more writes while the new file is made: seen as changed rows
        all_answers_are_fts5s(store)
        assert store._impact_builds is not None and store._impact_builds.made == 1  # (the first file) asked for once
        made_at = store.generation()
        held.release.set()
        assert store.wait_for_impact_builds(WAIT)
    assert store._impact_builds.made == 2
    writer.insert([NewMemory("zebra after the swap")], vectors(1, 4), MODEL, T0)
    all_answers_are_fts5s(store)
    current = store._impact[None][1]
    assert current is not None and current.base_generation >= made_at - 1 and current.base_generation > 1
    names = [file.name for file in impact_files(db_path)]
    assert len(names) == 1 and f"-g{current.base_generation}-" in names[0]
    writer.close()
    store.close()


@pytest.mark.parametrize("past", ["the hold share", "a search's step"])
def test_past_the_hold_share_or_a_step_fts5_answers_while_the_file_is_made(
    db_path: Path, held: HeldBuild, monkeypatch: pytest.MonkeyPatch, past: str
) -> None:
    """More changed rows than a search copies beside the file (HOLD_SHARE), or more written at
    once since its last look than SEARCH_STEP once a new file is due: none copied, FTS5."""
    store = filled(db_path)
    held.release.set()
    searched_once(store)
    held.release.clear()
    held.entered.clear()
    if past == "the hold share":
        monkeypatch.setattr(lexical_cache, "HOLD_SHARE", 0.0)
    else:
        monkeypatch.setattr(lexical_cache, "SEARCH_STEP", 2)
    monkeypatch.setattr(lexical_cache, "_FEWEST_CHANGES", 0)
    monkeypatch.setattr(lexical_cache, "SEARCH_REBUILD_SHARE", 0.0)
    store.delete([1, 2, 3])
    all_answers_are_fts5s(store)
    assert held.entered.wait(WAIT)
    assert store._impact[None][1] is None  # FTS5 answered
    held.release.set()
    assert store.wait_for_impact_builds(WAIT)
    all_answers_are_fts5s(store)
    assert store._impact[None][1] is not None
    store.close()


def test_closing_the_store_stops_the_file_being_made(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A statement of the builder's that would never end (standing in for reading a large store)
    is interrupted when the store closes: close returns, no file is left, the next store answers."""
    entered = threading.Event()

    def endless(db: Any, columns: Any = None, table: str = "memories_fts") -> Any:
        entered.set()
        db.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
        raise AssertionError("not interrupted")

    monkeypatch.setattr(lexical_cache, "build_from_connection", endless)
    store = filled(db_path)
    store.lexical_search(LexicalQuery.of("deploy"), Scope(), 10)
    assert entered.wait(WAIT)
    builds = store._impact_builds
    assert builds is not None
    closing = threading.Thread(target=store.close)
    closing.start()
    closing.join(WAIT)
    assert not closing.is_alive() and builds.idle.is_set() and builds.made == 0
    assert impact_files(db_path) == []
    monkeypatch.undo()
    again = SQLiteStore.open(db_path)
    again.lexical_threshold = 1
    searched_once(again)
    all_answers_are_fts5s(again)
    again.close()


def test_a_one_shot_process_makes_no_thread_and_makes_the_file_at_the_end_of_a_write(db_path: Path) -> None:
    """`impact_background` off (a CLI command): a search without a file, or over the share, is
    answered (FTS5, or the file and the changed rows) and starts nothing; closing the store after
    a write makes what a search would have asked for."""
    store = filled(db_path)
    store.impact_background = False
    all_answers_are_fts5s(store)
    assert store._impact_builds is None and impact_files(db_path) == []
    store.close()  # it wrote (filled): the files are made at its end (text and tags; the views)
    assert len(impact_files(db_path)) == 2
    reader = SQLiteStore.open(db_path)
    reader.lexical_threshold, reader.impact_background = 1, False
    all_answers_are_fts5s(reader)
    assert reader._impact[None][1] is not None
    reader.close()  # only read: nothing made
    writer = SQLiteStore.open(db_path)
    writer.lexical_threshold, writer.impact_background = 1, False
    writer.insert([NewMemory("zebra zebra")], vectors(1, 3), MODEL, T0)
    with _every_change_rebuilds(searching=True):
        all_answers_are_fts5s(writer)
        assert writer._impact[None][1] is None and writer._impact_builds is None  # FTS5: past the share
        writer.close()
    generation = SQLiteStore.open(db_path).generation()
    names = sorted(file.name for file in impact_files(db_path))
    assert len(names) == 2 and all(f"-g{generation}-" in name for name in names)


_CHILD = textwrap.dedent(
    """
    import sys, threading
    from memsearch.store import Scope, lexical_cache, sqlite_lexical
    from memsearch.store.sqlite import SQLiteStore
    from memsearch.text import LexicalQuery

    step = sys.argv[2]
    stopped = threading.Event()

    def stop_here(name):
        if name == step:
            print(name, flush=True)
            stopped.wait()

    build_from_connection = lexical_cache.build_from_connection
    def reading(*args, **kwargs):
        stop_here("reading")
        return build_from_connection(*args, **kwargs)
    lexical_cache.build_from_connection = reading
    remove_older = lexical_cache.LexicalCache._remove_older
    def written(self, generation):
        stop_here("written")  # the file in place, its digest not yet recorded
        return remove_older(self, generation)
    lexical_cache.LexicalCache._remove_older = written
    forget = sqlite_lexical.ImpactLexical._forget_changes_before
    def swapped(self, generation, files):
        stop_here("recorded")  # recorded and swapped in, the log not yet shortened
        return forget(self, generation, files)
    sqlite_lexical.ImpactLexical._forget_changes_before = swapped

    store = SQLiteStore.open(__import__("pathlib").Path(sys.argv[1]))
    store.lexical_threshold = 1
    lexical_cache._FEWEST_CHANGES = 0  # any changed row: a new file asked for
    lexical_cache.SEARCH_REBUILD_SHARE = 0.0
    store.lexical_search(LexicalQuery.of("deploy"), Scope(), 10)
    stopped.wait()
    """
)


@pytest.mark.parametrize("step", ["reading", "written", "recorded"])
def test_kill_9_while_a_file_is_made_leaves_a_store_that_answers_right(db_path: Path, step: str) -> None:
    """A process killed while its thread makes a file (reading the store, the file written but not
    recorded, recorded but the log not shortened): the next process answers as FTS5 does, from the
    files it can trust, and makes a new one where it must."""
    store = filled(db_path)
    searched_once(store)  # a first file, then rows changed since
    store.insert([NewMemory("zebra zebra deploy")], vectors(1, 3), MODEL, T0)
    store.delete([9])
    store.close()
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(db_path), step],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
        text=True,
    )
    try:
        assert child.stdout is not None
        line = _read_line(child, WAIT)
        assert line.strip() == step, (line, child.stderr.read() if child.poll() is not None and child.stderr else "")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(WAIT)
    after = SQLiteStore.open(db_path)
    after.lexical_threshold = 1
    all_answers_are_fts5s(after)
    assert after.wait_for_impact_builds(WAIT)
    all_answers_are_fts5s(after)
    assert after._impact[None][1] is not None
    after.close()


def _read_line(child: subprocess.Popen[str], timeout: float) -> str:
    """The child's next line of output, or '' when none comes within `timeout` s."""
    found: list[str] = []
    assert child.stdout is not None
    stdout = child.stdout
    reader = threading.Thread(target=lambda: found.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return found[0] if found else ""
