"""`memsearch index`: folders of notes kept in the store, re-indexed incrementally, on both stores;
the real bundled encoder, counted, and the command line through Typer's CliRunner."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.embedding import Encoder, Progress
from memsearch.errors import InvalidInputError
from memsearch.ingest import indexing
from memsearch.ingest.indexing import NothingToIndexError
from memsearch.models import NewMemory
from memsearch.retrieval.request import request_from_fields

DEPLOY = """---
tags: [ops, deploy]
---
# Deploy

The deploy key lives in the team vault under "prod-deploy".

## Rollback

Run `make rollback VERSION=previous` to go back one release.
"""
GARDEN = """# Garden

Tomatoes want six hours of sun and deep watering twice a week.

## Pests

Aphids on the roses: spray with soapy water in the evening.
"""
RECIPES = """# Recipes

Risotto: toast the rice, add warm stock a ladle at a time, stir.
"""


class CountingEncoder:
    """The real encoder, remembering every text it was asked to embed."""

    def __init__(self, encoder: Encoder) -> None:
        self.inner = encoder
        self.info = encoder.info
        self.calls: list[list[str]] = []

    def encode(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.encode(texts, progress=progress)

    @property
    def texts(self) -> list[str]:
        return [text for call in self.calls for text in call]


def write(path: Path, text: str) -> None:
    """Write and move the mtime on by a second, so an edit is seen even on a coarse-clock file system."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    mtime = max(path.stat().st_mtime_ns, before + 1_000_000_000)
    os.utime(path, ns=(mtime, mtime))


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    write(folder / "deploy.md", DEPLOY)
    write(folder / "garden" / "garden.md", GARDEN)
    write(folder / "drafts" / "recipes.md", RECIPES)
    write(folder / "image.png", "not a note")
    return folder


@pytest.fixture
def counting(encoder: Encoder) -> CountingEncoder:
    return CountingEncoder(encoder)


def keyed_ids(ms: Memsearch) -> dict[str, int]:
    return {memory.key: memory.id for memory in ms.list() if memory.key is not None}


def top(ms: Memsearch, query: str) -> Any:
    return ms.search(request_from_fields(query, k=3)).results[0].memory


# -- the library, on both stores --------------------------------------------------------------


def test_index_edit_delete_and_exclude_on_each_store(
    store_location: Path | str, notes: Path, counting: CountingEncoder
) -> None:
    with Memsearch(store_location, encoder=counting) as ms:
        first = ms.index([notes])
        assert (first.counts["new"], first.chunks_added, first.chunks_removed) == (3, 5, 0)
        deploy = str((notes / "deploy.md").resolve())
        ids = keyed_ids(ms)
        assert len([key for key in ids if key.startswith(f"note:{deploy}#")]) == 2 and len(ids) == 5
        rollback = top(ms, "how do I roll back a release?")
        assert rollback.key is not None and rollback.key.startswith(f"note:{deploy}#") and rollback.kind == "note"
        assert rollback.tags == ("ops", "deploy")
        assert rollback.metadata == {"path": deploy, "start_line": 8, "end_line": 10, "trail": ["Deploy", "Rollback"]}
        assert rollback.text.startswith("## Rollback")

        # one file edited: only its changed chunk is embedded; the other files' chunks keep their ids
        counting.calls.clear()
        write(notes / "garden" / "garden.md", GARDEN.replace("soapy water", "neem oil"))
        edited = ms.index([notes])
        assert (edited.counts["changed"], edited.counts["unchanged"], edited.chunks_added) == (1, 2, 1)
        assert counting.texts == ["## Pests\n\nAphids on the roses: spray with neem oil in the evening."]
        after = keyed_ids(ms)
        assert {k: v for k, v in after.items() if "garden" not in k} == {
            k: v for k, v in ids.items() if "garden" not in k
        }
        assert "neem oil" in top(ms, "what to spray on aphids").text

        # a deleted file's chunks go
        (notes / "deploy.md").unlink()
        deleted = ms.index([notes])
        assert (deleted.counts["removed"], deleted.chunks_removed) == (1, 2)
        assert not any(deploy in key for key in keyed_ids(ms))

        # an exclude pattern added: those chunks go, and the pattern is remembered for `index()` alone
        excluded = ms.index([notes], exclude=["drafts/"])
        assert (excluded.counts["removed"], excluded.chunks_removed) == (1, 1)
        assert not any("drafts" in key for key in keyed_ids(ms))
        counting.calls.clear()
        again = ms.index()
        assert (again.counts["unchanged"], again.chunks_added, again.chunks_removed) == (1, 0, 0)
        assert counting.calls == []
        assert [root.exclude for root in again.roots] == [("drafts/",)]


def test_a_chunk_that_only_moved_is_not_embedded_again(
    store_location: Path | str, notes: Path, counting: CountingEncoder
) -> None:
    with Memsearch(store_location, encoder=counting) as ms:
        ms.index([notes])
        before = top(ms, "how do I roll back a release?")
        counting.calls.clear()
        # a line added at the top moves the Rollback section down: its lines change, its text does not
        write(notes / "deploy.md", DEPLOY.replace("# Deploy\n", "# Deploy\n\nOwner: the platform team.\n"))
        moved = ms.index([notes])
        assert (moved.counts["changed"], moved.chunks_added, moved.files[0].chunks_moved) == (1, 1, 1)
        assert counting.texts == [
            '# Deploy\n\nOwner: the platform team.\n\nThe deploy key lives in the team vault under "prod-deploy".'
        ]
        rollback = top(ms, "how do I roll back a release?")
        assert rollback.metadata["start_line"] == 10 and (rollback.id, rollback.key) == (before.id, before.key)
        # a renamed file: its chunks are stored under the new path, none embedded, each keeping its memory
        aphids = top(ms, "what to spray on aphids")
        counting.calls.clear()
        (notes / "garden" / "garden.md").rename(notes / "garden" / "vegetables.md")
        renamed = ms.index([notes])
        assert (renamed.counts["new"], renamed.counts["removed"], renamed.chunks_added, renamed.chunks_moved) == (
            1,
            1,
            0,
            2,
        )
        assert counting.calls == []
        moved_aphids = top(ms, "what to spray on aphids")
        assert moved_aphids.metadata["path"].endswith("vegetables.md") and moved_aphids.id == aphids.id
        assert moved_aphids.key is not None and "vegetables.md#" in moved_aphids.key
        vectors = ms.store().all_vectors()[1]
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_an_unchanged_re_index_writes_nothing(db_path: Path, notes: Path, counting: CountingEncoder) -> None:
    with Memsearch(db_path, encoder=counting) as ms:
        ms.index([notes])
        ms.close()
        files = [db_path, Path(f"{db_path}-wal")]
        before = [hashlib.sha256(path.read_bytes()).hexdigest() for path in files if path.exists()]
        counting.calls.clear()
        outcome = ms.index()
        assert (
            outcome.summary == "indexed 3 files: 0 new, 0 changed, 0 removed, 3 unchanged; 0 chunks stored, 0 removed"
        )
        assert outcome.reads == 0 and counting.calls == []
        ms.close()
        assert [hashlib.sha256(path.read_bytes()).hexdigest() for path in files if path.exists()] == before


def test_a_dry_run_says_what_would_change_and_changes_nothing(
    db_path: Path, notes: Path, counting: CountingEncoder
) -> None:
    with Memsearch(db_path, encoder=counting) as ms:
        first = ms.index([notes], dry_run=True)
        assert not db_path.exists() and counting.calls == []  # not even the store is made
        assert first.summary.startswith("would index 3 files: 3 new") and first.chunks_added == 5
        ms.index([notes])
        state, memories = ms.store().index_state(), ms.list()
        counting.calls.clear()
        write(notes / "garden" / "garden.md", GARDEN + "\n## Harvest\n\nPick in the morning.\n")
        (notes / "deploy.md").unlink()
        preview = ms.index(dry_run=True)
        assert {
            (line.path.rsplit("/", 1)[1], line.status, line.chunks_added, line.chunks_removed) for line in preview.files
        } == {
            ("garden.md", "changed", 1, 0),
            ("deploy.md", "removed", 0, 2),
        }
        assert ms.store().index_state() == state and ms.list() == memories and counting.calls == []
        assert preview.to_dict()["dry_run"] is True


def test_indexing_one_folder_keeps_another_folders_notes(tmp_path: Path, db_path: Path, encoder: Encoder) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    write(work / "deploy.md", DEPLOY)
    write(home / "garden.md", GARDEN)
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([work])
        ms.index([home])
        assert len(ms.list()) == 4
        write(home / "garden.md", GARDEN.replace("six", "eight"))
        outcome = ms.index()  # every remembered folder
        assert outcome.counts["changed"] == 1 and len(ms.list()) == 4
        assert sorted(root.path for root in outcome.roots) == sorted(str(p.resolve()) for p in (home, work))


def test_a_folder_inside_an_indexed_one_keeps_what_the_outer_patterns_take(
    notes: Path, db_path: Path, encoder: Encoder
) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes])
        inner = ms.index([notes / "drafts"], include=["*.txt"])  # recipes.md is no .txt, but notes/ takes it
        assert inner.counts["removed"] == 0 and inner.counts["unchanged"] == 1
        assert any("recipes" in key for key in keyed_ids(ms))
        write(notes / "drafts" / "todo.txt", "Buy arborio rice and parmesan.")
        write(notes / "garden" / "later.txt", "Plant garlic in October.")
        added = ms.index([notes / "drafts"])  # its own files only: garden/ waits for a run over notes/
        assert added.counts["new"] == 1 and not any("later.txt" in key for key in keyed_ids(ms))
        assert ms.index().counts["new"] == 1


def test_a_run_that_stops_halfway_is_made_whole_by_the_next(
    db_path: Path, notes: Path, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    saves = 0
    save = indexing._Apply._save

    def stopping_save(self: indexing._Apply) -> None:
        nonlocal saves
        saves += 1
        if saves == 2:  # in the second file's transaction: its chunks are written, the state not yet
            raise KeyboardInterrupt
        save(self)

    monkeypatch.setattr(indexing, "COMMIT_SECONDS", 0)  # a transaction per file
    monkeypatch.setattr(indexing._Apply, "_save", stopping_save)
    with Memsearch(db_path, encoder=encoder) as ms, pytest.raises(KeyboardInterrupt):
        ms.index([notes])
    monkeypatch.undo()
    with Memsearch(db_path, encoder=encoder) as ms:  # the first file is whole, the second left no trace
        state = json.loads(ms.store().index_state() or "{}")
        [kept] = state["files"]
        assert {m.metadata["path"] for m in ms.list()} == {kept}
        assert set(state["files"][kept]["chunks"]) == set(keyed_ids(ms))
        assert ms.store().pending_count() == len(keyed_ids(ms))  # stored, searchable by words, no vectors yet
    # that file shrinks from two chunks to one before the next run, which must not leave its #2 behind
    write(notes / "deploy.md", DEPLOY.split("## Rollback")[0])
    with Memsearch(db_path, encoder=encoder) as ms:
        resumed = ms.index([notes])
        kept_deploy = kept.endswith("deploy.md")
        assert resumed.counts["new"] == 2 and resumed.counts["changed"] == int(kept_deploy)  # never "changed" if new
        assert resumed.vectors_pending == 0 and ms.store().pending_count() == 0
        stored = sorted(keyed_ids(ms))
    with Memsearch(db_path.with_name("fresh.db"), encoder=encoder) as fresh:
        fresh.index([notes])
        assert stored == sorted(keyed_ids(fresh)) and len(stored) == 4


def test_a_hand_added_memory_that_matches_better_ranks_first(db_path: Path, notes: Path, encoder: Encoder) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes])
        added = ms.add(
            NewMemory("To roll back a release of the billing service, redeploy the previous tag", key="hand")
        )
        results = ms.search(request_from_fields("roll back the billing service release", k=3)).results
        assert results[0].memory.id == added.id and results[1].memory.key is not None
        assert results[1].memory.metadata["path"].endswith("deploy.md")  # the indexed section ranks by the same rules
        assert results[1].memory.metadata["start_line"] == 8


def test_bad_roots_and_patterns_are_clear_errors_and_store_nothing(
    tmp_path: Path, db_path: Path, notes: Path, encoder: Encoder
) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        with pytest.raises(NothingToIndexError):
            ms.index()
        with pytest.raises(InvalidInputError, match="no such file or folder"):
            ms.index([notes, tmp_path / "missing"])
        with pytest.raises(InvalidInputError) as bad:
            ms.index([notes], include=["[z-a].md"])
        assert bad.value.field == "include"
        assert not db_path.exists()
        write(notes / ".gitignore", "[z-a].md\ndrafts/\n")  # a bad line is passed over, as git does
        outcome = ms.index([notes])
        assert outcome.counts["new"] == 2 and outcome.skipped[0][1].startswith("is not a valid gitignore pattern")


def test_a_binary_file_is_skipped_and_a_latin1_one_kept_as_lossy(
    tmp_path: Path, db_path: Path, encoder: Encoder
) -> None:
    write(tmp_path / "n" / "ok.md", GARDEN)
    (tmp_path / "n" / "dump.txt").write_bytes(b"header\x00\x01binary")
    with Memsearch(db_path, encoder=encoder) as ms:
        outcome = ms.index(str(tmp_path / "n"))  # one path, as a string
        assert outcome.counts["new"] == 1 and outcome.counts["skipped"] == 1
        assert outcome.skipped[0][1].startswith("holds NUL bytes")
        (tmp_path / "n" / "latin.md").write_bytes("# Café\n\nCrème brûlée for dessert.\n".encode("latin-1"))
        ms.index(str(tmp_path / "n"))
        [latin] = [m for m in ms.list() if m.metadata["path"] == str((tmp_path / "n" / "latin.md").resolve())]
        assert latin.metadata["lossy"] is True and "\ufffd" in latin.text  # kept, and marked as read with losses


# -- the command line -------------------------------------------------------------------------

runner = CliRunner()


def run(*args: str, code: int = 0, env: dict[str, str] | None = None) -> Result:
    result = runner.invoke(app, list(args), env=env)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def test_cli_index_then_search_shows_path_and_line(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(notes.parent)
    result = run("index", "notes", "--exclude", "drafts/")
    assert (
        result.stderr.strip() == "indexed 2 files: 2 new, 0 changed, 0 removed, 0 unchanged; 4 chunks stored, 0 removed"
    )
    out = run("search", "how do I roll back a release?", "-k", "2").stdout
    assert (
        "notes/deploy.md:8  ## Rollback" in out.splitlines()[1].replace("\t", "  ")
        or "notes/deploy.md:8 ## Rollback" in out
    )
    terminal = {"TTY_COMPATIBLE": "1", "COLUMNS": "160", "TERM": "xterm", "NO_COLOR": "1"}
    explained = run("search", "how do I roll back a release?", "-k", "1", "--explain", env=terminal).stdout
    assert "#1  id 2: notes/deploy.md:8" in explained
    document = json.loads(run("search", "how do I roll back a release?", "-k", "1", "--format", "json").stdout)
    metadata = document["results"][0]["metadata"]
    assert (Path(metadata["path"]).name, metadata["start_line"], metadata["end_line"]) == ("deploy.md", 8, 10)
    explained_json = json.loads(run("search", "roll back", "-k", "1", "--explain", "--format", "json").stdout)
    assert explained_json["results"][0]["metadata"]["start_line"] == 8 and "explain" in explained_json["results"][0]


def test_cli_dry_run_lists_the_files_and_json_reports(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(notes)
    dry = run("index", ".", "--dry-run")
    assert dry.stdout.splitlines()[0].split("\t") == ["change", "+chunks", "-chunks", "path"]
    assert "new\t2\t0\tdeploy.md" in dry.stdout and "new\t1\t0\tdrafts/recipes.md" in dry.stdout
    assert dry.stderr.startswith("would index 3 files: 3 new")
    run("index", ".")
    document = json.loads(run("index", "--format", "json").stdout)
    assert document["files"]["unchanged"] == 3 and document["chunks_added"] == 0 and document["changes"] == []


def test_cli_index_without_a_folder_says_so() -> None:
    result = run("index", code=1)
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("memsearch: no folder to index") and "memsearch index ~/notes" in result.stderr


def test_cli_bad_pattern_names_the_option(notes: Path) -> None:
    result = run("index", str(notes), "--include", "[z-a].md", code=2)
    assert result.stderr.startswith("memsearch: --include has a pattern that is not valid gitignore syntax")
