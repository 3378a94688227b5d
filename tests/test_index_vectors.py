"""`memsearch index` stores first and embeds after: a file's sections are searchable by their words
as soon as it is stored, vectors follow; the memories that wait for vectors are a store-level set
(both stores, with its migration), counted by search (`vectors_pending`), `stats` and
`index --dry-run`, and every other writer keeps that count true. Progress: plain lines and JSON."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from memsearch.api import Memsearch
from memsearch.cli import progress as cli_progress
from memsearch.cli.app import app
from memsearch.embedding import Encoder, Progress
from memsearch.ingest.progress import IndexProgress
from memsearch.models import NewMemory
from memsearch.retrieval.request import request_from_fields
from memsearch.store import open_store
from memsearch.store.sqlite_driver import sqlite3
from memsearch.timeutil import utc_now
from tests.test_index import DEPLOY, GARDEN, RECIPES, write

runner = CliRunner()


def run(*args: str, code: int = 0) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    write(folder / "deploy.md", DEPLOY)
    write(folder / "garden.md", GARDEN)
    write(folder / "recipes.md", RECIPES)
    return folder


def ids_of(ms: Memsearch, query: str, mode: str) -> list[int]:
    return [c.memory.id for c in ms.search(request_from_fields(query, k=5, mode=mode)).results]


# -- store first, vectors after --------------------------------------------------------------------


def test_stored_sections_are_found_by_their_words_before_their_vectors(
    store_location: Path | str, notes: Path, encoder: Encoder
) -> None:
    with Memsearch(store_location, encoder=encoder) as ms:
        first = ms.index([notes], vectors=False)
        assert first.chunks_added == 5 and first.vectors_added == 0 and first.vectors_pending == 5
        store = ms.store()
        assert store.pending_count() == 5 and store.vector_count() == 0
        [aphids] = [m.id for m in ms.list() if "Aphids" in m.text]
        assert ids_of(ms, "aphids soapy water", "lexical")[0] == aphids
        hybrid = ms.search(request_from_fields("aphids soapy water", k=3, mode="hybrid"))
        assert hybrid.results[0].memory.id == aphids and hybrid.vectors_pending == 5
        assert hybrid.to_dict()["vectors_pending"] == 5
        assert ids_of(ms, "aphids on roses", "vector") == []  # no vector yet: the vector leg finds nothing
        assert "(searchable by their words meanwhile)" in first.summary

        second = ms.index()  # a later run with nothing changed embeds what waits
        assert second.counts["unchanged"] == 3 and second.vectors_added == 5 and second.vectors_pending == 0
        assert store.pending_count() == 0 and store.vector_count() == 5
        assert ids_of(ms, "aphids on roses", "vector")[0] == aphids
        assert ms.search(request_from_fields("aphids", k=3)).to_dict()["vectors_pending"] == 0


class BlockingEncoder:
    """The real encoder, held at its first document batch until `go` is set."""

    def __init__(self, encoder: Encoder) -> None:
        self.inner, self.info = encoder, encoder.info
        self.go = threading.Event()
        self.waiting = threading.Event()

    def encode(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        self.waiting.set()
        assert self.go.wait(60), "never released"
        return self.inner.encode(texts, progress=progress)


def test_a_run_s_files_are_searchable_while_it_embeds(db_path: Path, notes: Path, encoder: Encoder) -> None:
    blocking = BlockingEncoder(encoder)
    events: list[IndexProgress] = []
    with Memsearch(db_path, encoder=blocking) as indexer:
        worker = threading.Thread(target=lambda: indexer.index([notes], on_progress=events.append))
        worker.start()
        try:
            assert blocking.waiting.wait(60), "the run never began to embed"
            with Memsearch(db_path, encoder=encoder) as reader:  # another process's view, mid-run
                found = reader.search(request_from_fields("risotto ladle stock", k=3, mode="lexical"))
                assert "Risotto" in found.results[0].memory.text and found.vectors_pending == 5
                assert reader.stats()["vectors_pending"] == 5
        finally:
            blocking.go.set()
            worker.join(60)
        assert not worker.is_alive()
    assert [e.phase for e in events][-1] == "done" and events[-1].vectors_done == 5
    stored = [e for e in events if e.phase == "store"]
    assert stored and stored[-1].files_done == 3 and stored[-1].chunks_stored == 5
    with Memsearch(db_path, encoder=encoder) as ms:
        assert ms.store().pending_count() == 0 and ms.store().vector_count() == 5


# -- the other writers keep the count true ---------------------------------------------------------


def test_other_writers_keep_the_waiting_set_true(store_location: Path | str, notes: Path, encoder: Encoder) -> None:
    with Memsearch(store_location, encoder=encoder) as ms:
        ms.index([notes], vectors=False)
        store = ms.store()
        added = ms.add(NewMemory("A hand-written memory about the billing service", key="hand"))
        assert store.pending_count() == 5 and added.id not in store.pending_ids()
        # a stored memory without vectors stored again in place waits (and keeps no stale vector)
        store.insert([NewMemory("The billing service moved to Frankfurt", key="hand")], None, None, utc_now(),
                     replace=True)  # fmt: skip
        assert added.id in store.pending_ids() and added.id not in store.vectors([added.id])
        ms.update(added.id, text="The billing service moved to Dublin")  # an edit embeds its text
        assert added.id not in store.pending_ids() and store.pending_count() == 5
        assert ms.reindex() == 1  # re-embedding passes over the waiting ones: the next index makes them
        assert store.pending_count() == 5 and store.vector_count() == 1
        [garden] = [m.id for m in ms.list() if "Tomatoes" in m.text]
        store.delete([garden])  # (the store level: `delete` refuses a note section, whose file is the truth)
        assert store.pending_count() == 4
        repaired = ms.index()  # the file is the truth: the deleted section comes back, waiting, and is embedded
        assert len(repaired.repaired) == 1 and repaired.vectors_added == 5
        assert store.pending_count() == 0 and store.vector_count() == 6


def test_a_copy_keeps_what_waits(db_path: Path, pg_url: str, notes: Path, encoder: Encoder) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes], vectors=False)
        ms.add(NewMemory("embedded at once"))
        assert ms.copy_to(pg_url) == 6
    with Memsearch(pg_url, encoder=encoder) as copy:
        assert copy.store().pending_count() == 5 and copy.store().vector_count() == 1
        assert copy.index().vectors_added == 5 and copy.store().pending_count() == 0


def test_the_migration_makes_every_memory_without_a_vector_wait(
    store_location: Path | str, notes: Path, encoder: Encoder
) -> None:
    with Memsearch(store_location, encoder=encoder) as ms:
        ms.index([notes])
        kept = ms.add(NewMemory("with its vector"))
        [garden] = [m.id for m in ms.list() if "Tomatoes" in m.text]
    # the store as memsearch before the waiting set left it: one memory without its vector
    if isinstance(store_location, Path):
        lite = sqlite3.connect(store_location)
        lite.executescript(
            f"DROP TABLE pending_vectors; DELETE FROM vectors WHERE memory_id = {garden}; PRAGMA user_version = 7;"
        )
        lite.close()
    else:
        import psycopg

        with psycopg.connect(store_location, autocommit=True) as server:
            server.execute("DROP TABLE pending_vectors")
            server.execute("DELETE FROM vectors WHERE memory_id = %s", (garden,))
            server.execute("DELETE FROM memsearch_schema WHERE version = 6")
    store = open_store(store_location)  # migrated on opening
    try:
        assert store.pending_ids() == [garden] and kept.id not in store.pending_ids()
        assert store.stats()["vectors_pending"] == 1
    finally:
        store.close()
    with Memsearch(store_location, encoder=encoder) as ms:
        assert ms.index().vectors_added == 1 and ms.store().vector_count() == 6


# -- the command line: search, stats, dry run, progress --------------------------------------------


def test_cli_says_what_waits_for_vectors(notes: Path, encoder: Encoder, db_path: Path) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes], vectors=False)
    document = json.loads(run("search", "aphids", "--db", str(db_path), "--format", "json").stdout)
    assert document["vectors_pending"] == 5 and "Aphids" in document["results"][0]["text"]
    explained = run("search", "aphids", "--db", str(db_path), "--explain").stdout
    assert "5 memories wait for vectors (`memsearch index` makes them)" in explained
    assert json.loads(run("stats", "--db", str(db_path), "--format", "json").stdout)["vectors_pending"] == 5
    assert re.search(r"vectors pending\s+5", run("stats", "--db", str(db_path)).stdout)
    write(notes / "more.md", "# More\n\nA new note about compost heaps.\n")
    dry = run("index", "--dry-run", "--db", str(db_path))
    assert "1 new" in dry.stderr and "6 memories to embed" in dry.stderr
    dry_json = json.loads(run("index", "--dry-run", "--db", str(db_path), "--format", "json").stdout)
    assert dry_json["vectors_pending"] == 6 and dry_json["dry_run"] is True
    with Memsearch(db_path, encoder=encoder) as ms:
        assert ms.store().pending_count() == 5  # a dry run embeds nothing


def test_progress_json_is_one_object_a_line_on_stderr(notes: Path, db_path: Path, encoder: Encoder) -> None:
    result = run("index", str(notes), "--db", str(db_path), "--progress", "json", "--format", "json")
    assert json.loads(result.stdout)["vectors_pending"] == 0  # stdout: the report only
    events = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert events and all(e["event"] == "progress" for e in events)
    assert {"phase", "files_done", "files_total", "chunks_stored", "vectors_done", "vectors_total",
            "vectors_pending", "elapsed", "rate", "remaining"} <= set(events[0])  # fmt: skip
    phases = [e["phase"] for e in events]
    assert phases[0] == "store" and "vectors" in phases and phases[-1] == "done"
    assert events[-1]["files_done"] == 3 and events[-1]["vectors_done"] == 5 and events[-1]["vectors_pending"] == 0


def test_progress_plain_lines_when_stderr_is_no_terminal(
    notes: Path, db_path: Path, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_progress, "PLAIN_SECONDS", 0.0)  # a line at every commit
    result = run("index", str(notes), "--db", str(db_path))  # --progress auto: CliRunner's stderr is no terminal
    lines = [line for line in result.stderr.splitlines() if line.startswith("index: ")]
    assert re.fullmatch(r"index: storing 3/3 files, 5 chunks; vectors 0/0; [\d.,]+ files/s, about \d+ s left", lines[0])
    assert any(re.fullmatch(r"index: embedding 3/3 files, 5 chunks; vectors 5/5.*", line) for line in lines)
    assert result.stderr.splitlines()[-1].startswith("indexed 3 files: 3 new")
    quiet = run("index", str(notes), "--db", str(db_path), "--progress", "none")
    assert not [line for line in quiet.stderr.splitlines() if line.startswith("index: ")]


def test_a_short_run_prints_no_plain_line(notes: Path, db_path: Path, encoder: Encoder) -> None:
    started = time.monotonic()
    result = run("index", str(notes), "--db", str(db_path), "--progress", "plain")
    if time.monotonic() - started < cli_progress.PLAIN_SECONDS:
        assert result.stderr.splitlines() == [
            "indexed 3 files: 3 new, 0 changed, 0 removed, 0 unchanged; 5 chunks stored, 0 removed"
        ]
