"""Notes true to their files (issue 29, part 2) and safe to read (part 3) together: the store check
leaves a refused root's notes as they are; `index --roots` says which remembered root a plain
`index` would refuse and why; a refused root is forgotten when named and never pruned; the roots
given to `index --watch` stay named in every update; and index_changed, watch and forget_roots
check their paths as `index` does."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.curation import edit_text
from memsearch.embedding import Encoder
from memsearch.errors import InvalidInputError
from memsearch.models import NewMemory
from tests.test_index import DEPLOY, GARDEN, write
from tests.test_notes_safety import as_root, give_away

runner = CliRunner()


def stored(ms: Memsearch) -> list[tuple[int, str | None, str]]:
    return sorted((memory.id, memory.key, memory.text) for memory in ms.list())


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    write(tmp_path / "notes" / "deploy.md", DEPLOY)
    write(tmp_path / "notes" / "garden.md", GARDEN)
    return (tmp_path / "notes").resolve()


def test_the_store_check_leaves_a_refused_roots_notes_as_they_are(notes: Path, db_path: Path, encoder: Encoder) -> None:
    """A store changed behind its back under a root that a plain run refuses: nothing is repaired
    (no section re-added, none re-written, no stray key removed) until the root is named."""
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes])
        expected = sorted((m.key, m.text) for m in ms.list())
        deploy, rollback = sorted(
            (m for m in ms.list() if m.metadata["path"].endswith("deploy.md")), key=lambda m: m.metadata["start_line"]
        )
        edit_text(ms, deploy, "tampered text")  # below the library's refusal: an older memsearch, a script
        ms.store().delete([rollback.id])
        stray = f"note:{notes / 'gone.md'}#0123456789abcdef"  # a note key under the folder that no file names
        ms.add(NewMemory("a section no file has", key=stray, metadata={"path": str(notes / "gone.md")}))
        changed = stored(ms)
        notes.chmod(0o777)  # any user may now write it: a plain run passes it over
        refused = ms.index()
        assert dict(refused.skipped)[str(notes)].startswith("other users may write it (mode 777)")
        assert refused.repaired == () and refused.files == () and stored(ms) == changed
        named = ms.index([notes])
        assert sorted(Path(path).name for path in named.repaired) == ["deploy.md", "gone.md"]
        assert sorted((m.key, m.text) for m in ms.list()) == expected


def test_roots_lists_a_refused_root_with_its_reason_and_prune_keeps_it(
    notes: Path, tmp_path: Path, db_path: Path, encoder: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "elsewhere" / "plan.md", "# Plan\n\nSomeone else's plan.\n")
    elsewhere = (tmp_path / "elsewhere").resolve()
    linked = tmp_path / "linked"
    write(linked / "recipes.md", "# Risotto\n\nStir.\n")
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes])
        ms.index([linked])
        notes.chmod(0o777)
        (linked / "recipes.md").unlink()
        linked.rmdir()
        linked.symlink_to(elsewhere)  # a remembered root that now leads elsewhere
        listed = {Path(root.path).name: (root.state, root.reason, root.memories) for root in ms.roots()}
        assert listed == {
            "notes": ("refused", "other users may write it (mode 777)", 4),
            "linked": ("refused", f"leads to {elsewhere} now, through a symlink", 1),
        }
        assert ms.prune_roots().roots == () and len(ms.list()) == 5  # refused is not missing: nothing goes
    monkeypatch.chdir(tmp_path)
    rows = runner.invoke(app, ["index", "--roots", "--db", str(db_path)]).stdout.splitlines()
    assert [row.split("\t")[:3] for row in rows[1:]] == [
        ["linked", f"refused: leads to {elsewhere} now, through a symlink", "1"],
        ["notes", "refused: other users may write it (mode 777)", "2"],
    ]
    as_json = json.loads(runner.invoke(app, ["index", "--roots", "-f", "json", "--db", str(db_path)]).stdout)
    assert [(root["state"], root["reason"]) for root in as_json] == [
        ("refused", f"leads to {elsewhere} now, through a symlink"),
        ("refused", "other users may write it (mode 777)"),
    ]


@as_root
def test_a_root_another_user_owns_is_listed_refused_and_forgotten_when_named(
    notes: Path, db_path: Path, encoder: Encoder
) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes])
        give_away(notes)
        (root,) = ms.roots()
        assert (root.state, root.reason) == ("refused", "belongs to another user (uid 65534)")
        forgotten = ms.forget_roots(str(notes))  # one path, as `index` takes it
        assert (forgotten.memories_removed, forgotten.files_removed) == (4, 2)
        assert ms.roots() == [] and ms.list() == []


def test_the_roots_given_to_watch_stay_named_in_every_update(notes: Path, db_path: Path, encoder: Encoder) -> None:
    """A root others may write, named to `watch`: its changes are indexed (a plain run would refuse it)."""
    notes.chmod(0o777)
    stop = threading.Event()
    with Memsearch(db_path, encoder=encoder) as ms:
        updates = ms.watch([notes], stop=stop)
        try:
            first = next(updates)
            assert first.counts["new"] == 2 and first.skipped == ()
            write(notes / "garden.md", GARDEN.replace("soapy water", "neem oil"))
            update = next(updates)
            assert update.skipped == () and [Path(line.path).name for line in update.files] == ["garden.md"]
            assert any("neem oil" in memory.text for memory in ms.list())
        finally:
            stop.set()
            list(updates)  # the watcher ends within its wake-up time once stopped
        assert dict(ms.index().skipped)[str(notes)].startswith("other users may write it")  # not named: refused


@pytest.mark.parametrize(
    "call",
    [
        lambda ms: ms.index_changed([b"notes"]),
        lambda ms: ms.index_changed([""]),
        lambda ms: ms.watch(["notes\x00"]),
        lambda ms: ms.watch(["notes"], include=[3]),
        lambda ms: ms.forget_roots([None]),
        lambda ms: ms.forget_roots(3),
    ],
)
def test_index_changed_watch_and_forget_roots_check_their_paths_as_index_does(
    ms: Memsearch, call: Callable[[Memsearch], object]
) -> None:
    with pytest.raises(InvalidInputError) as refused:
        call(ms)
    assert refused.value.field in ("paths", "include") and "\n" not in str(refused.value)


def test_a_refused_root_named_by_the_path_of_its_file_is_brought_up_to_date_by_index_changed(
    notes: Path, db_path: Path, encoder: Encoder
) -> None:
    """`edit` re-indexes a section's file with index_changed: a remembered root, so checked as a plain
    run checks it; a refused one keeps its notes and the outcome says why."""
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes])
        before = stored(ms)
        notes.chmod(0o777)
        write(notes / "garden.md", GARDEN.replace("soapy water", "neem oil"))
        outcome = ms.index_changed([notes / "garden.md"])
        assert dict(outcome.skipped)[str(notes)].startswith("other users may write it") and stored(ms) == before
