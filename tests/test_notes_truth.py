"""Notes true to their files (issue 29, part 2), through the library on a real store with the
real bundled encoder: a note's time is its file's, a section keeps its identity (and its pin,
importance and access counts) while it is unchanged, a store indexed with position keys moves to
identity keys without losing any of that, the file is the truth (the store refuses to change a
section; `index` repairs a store changed behind its back), roots are listed, forgotten and
pruned, and front matter gives titles and dates."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.curation import edit_text
from memsearch.embedding import Encoder
from memsearch.errors import NotARootError, NoteSectionError
from memsearch.ingest.indexing import IndexState
from memsearch.models import Memory, NewMemory
from memsearch.retrieval.request import request_from_fields
from memsearch.sections import group_by_file, section_of
from memsearch.store import Scope
from tests.test_index import DEPLOY, GARDEN, CountingEncoder, write

MARCH = datetime(2023, 3, 4, 5, 6, 7, tzinfo=UTC)
JUNE = datetime(2023, 6, 1, tzinfo=UTC)


def dated(path: Path, text: str, moment: datetime) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (moment.timestamp(), moment.timestamp()))


def sections(ms: Memsearch, path: Path) -> list[Memory]:
    """The memories indexed from one file, in file order."""
    resolved = str(path.resolve())
    return sorted((m for m in ms.list() if m.metadata.get("path") == resolved), key=lambda m: m.metadata["start_line"])


@pytest.fixture
def counting(encoder: Encoder) -> CountingEncoder:
    return CountingEncoder(encoder)


@pytest.fixture
def deploy_notes(tmp_path: Path) -> Path:
    """A folder holding DEPLOY, a note of two sections (`# Deploy`, then `## Rollback` at line 8)."""
    write(tmp_path / "notes" / "deploy.md", DEPLOY)
    return tmp_path / "notes"


def test_a_notes_time_is_its_files_and_the_front_matter_can_date_and_title_it(
    store_location: Path | str, tmp_path: Path, encoder: Encoder
) -> None:
    notes = tmp_path / "notes"
    dated(notes / "garden.md", GARDEN, MARCH)
    dated(notes / "journal.md", "---\ntitle: Trip log\ndate: 2021-07-14\ntags: [travel]\n---\n# Day one\nRain.\n", JUNE)
    dated(notes / "bad.md", "---\ndate: next week\n---\n# Plans\nSomething.\n", JUNE)
    with Memsearch(store_location, encoder=encoder) as ms:
        outcome = ms.index([notes])
        assert {m.created_at for m in sections(ms, notes / "garden.md")} == {MARCH}
        [journal] = sections(ms, notes / "journal.md")
        assert journal.created_at == datetime(2021, 7, 14, tzinfo=UTC)
        assert journal.metadata["title"] == "Trip log" and journal.tags == ("travel",)
        [bad] = sections(ms, notes / "bad.md")
        assert bad.created_at == JUNE  # the date could not be read: the file's time, and the reason said
        assert [(Path(where).name, "next week" in why) for where, why in outcome.warnings] == [("bad.md:2", True)]
        # newest first by the files' times, and --since means what it says
        assert ms.list()[0].metadata["path"].endswith("bad.md")
        assert {m.metadata["path"].rsplit("/", 1)[1] for m in ms.list(Scope(since=MARCH))} == {"garden.md", "bad.md"}
        assert ms.list()[-1].id == journal.id
        # a section that only moved keeps its time; a changed one takes the file's new time
        dated(notes / "garden.md", "# Garden\n\nTomatoes want full sun.\n" + GARDEN.split("\n", 3)[3], JUNE)
        ms.index()
        garden = sections(ms, notes / "garden.md")
        assert [m.created_at for m in garden] == [JUNE, MARCH]


def test_editing_the_section_above_keeps_a_sections_id_pin_importance_and_use(
    store_location: Path | str, deploy_notes: Path, counting: CountingEncoder
) -> None:
    notes = deploy_notes
    with Memsearch(store_location, encoder=counting) as ms:
        ms.index([notes])
        _, rollback = sections(ms, notes / "deploy.md")
        ms.set_pinned([rollback.id], True)
        ms.update(rollback.id, importance=0.9, memory_score=0.7)
        ms.search(request_from_fields("how do I roll back a release?", k=1, mode="lexical"))
        before = ms.get(rollback.id)
        assert before.access_count == 1
        counting.calls.clear()
        write(notes / "deploy.md", DEPLOY.replace('under "prod-deploy".', 'under "prod-deploy".\nAsk Ana first.'))
        outcome = ms.index()
        assert (outcome.chunks_added, outcome.chunks_removed, outcome.files[0].chunks_moved) == (1, 1, 1)
        after = ms.get(rollback.id)
        assert (after.key, after.pinned, after.importance, after.memory_score, after.access_count) == (
            before.key, True, 0.9, 0.7, 1
        )  # fmt: skip
        assert (
            after.metadata["start_line"] == before.metadata["start_line"] + 1 and after.created_at == before.created_at
        )
        assert len(counting.calls) == 1  # the edited section only
        # front matter tags changed: every section amended in place, none embedded again
        counting.calls.clear()
        write(notes / "deploy.md", (notes / "deploy.md").read_text().replace("tags: [ops, deploy]", "tags: [ops]"))
        retagged = ms.index()
        assert (retagged.chunks_added, retagged.chunks_removed, counting.calls) == (0, 0, [])
        assert ms.get(rollback.id).tags == ("ops",) and ms.get(rollback.id).pinned
        assert ms.search(request_from_fields("deploy", k=5, mode="lexical", tags=["ops"])).results


def _as_position_keys(ms: Memsearch) -> None:
    """Make the store what memsearch before identity keys left: chunks keyed `note:{path}#{n}`,
    stamped with the time of the index run, and a state document of version 1."""
    store = ms.store()
    state = IndexState.load(store.index_state())
    files = {}
    changes = {}
    for path, record in state.files.items():
        memories = sorted((store.get_by_key(key) for key in record.chunks), key=lambda m: m.metadata["start_line"])
        chunks = {}
        for number, memory in enumerate(memories, start=1):
            changes[memory.id] = {"key": f"note:{path}#{number}", "created_at": datetime(2025, 1, 1, tzinfo=UTC)}
            chunks[f"note:{path}#{number}"] = f"old-digest-{number}"
        files[path] = {"size": record.size, "mtime_ns": record.mtime_ns, "sha256": record.sha256, "chunks": chunks}
    store.amend(changes)
    roots = [root.to_dict() for root in state.roots.values()]
    store.save_index_state(json.dumps({"version": 1, "roots": roots, "files": files}))


def test_a_store_with_position_keys_moves_to_identity_keys_keeping_everything(
    store_location: Path | str, tmp_path: Path, counting: CountingEncoder
) -> None:
    notes = tmp_path / "notes"
    dated(notes / "deploy.md", DEPLOY, MARCH)
    dated(notes / "garden.md", GARDEN, MARCH)
    with Memsearch(store_location, encoder=counting) as ms:
        ms.index([notes])
        identity = {m.id: m.key for m in ms.list()}
        _as_position_keys(ms)
        _, rollback = sections(ms, notes / "deploy.md")
        assert rollback.key is not None and rollback.key.endswith("#2")
        ms.set_pinned([rollback.id], True)
        ms.update(rollback.id, importance=0.8)
        ms.store().touch([rollback.id], datetime(2025, 2, 1, tzinfo=UTC))
        vectors = ms.store().vectors(sorted(identity))
        counting.calls.clear()
        moved = ms.index()
        assert counting.calls == [] and moved.chunks_removed == 0 and moved.repaired == ()
        assert {m.id: m.key for m in ms.list()} == identity  # every memory kept, under its identity key
        kept = ms.get(rollback.id)
        assert (kept.pinned, kept.importance, kept.access_count, kept.created_at) == (True, 0.8, 1, MARCH)
        after = ms.store().vectors(sorted(identity))
        assert all((after[i] == vectors[i]).all() for i in identity)
        assert ms.index().counts["unchanged"] == 2 and counting.calls == []


def test_the_store_refuses_to_change_a_section_and_says_where_it_is(
    store_location: Path | str, deploy_notes: Path, encoder: Encoder
) -> None:
    notes = deploy_notes
    with Memsearch(store_location, encoder=encoder) as ms:
        ms.index([notes])
        own = ms.add(NewMemory("a memory of its own", tags=("x",))).id
        _, rollback = sections(ms, notes / "deploy.md")
        assert section_of(rollback) == (str((notes / "deploy.md").resolve()), 8) and section_of(ms.get(own)) is None
        for attempt in (
            lambda: ms.update(rollback.id, text="something else"),
            lambda: ms.update(rollback.id, tags=["other"]),
            lambda: ms.delete([rollback.id]),
            lambda: ms.delete_matching(scope=Scope(tags=("ops",))),
        ):
            with pytest.raises(NoteSectionError) as refused:
                attempt()
            assert f"deploy.md:{refused.value.line}" in str(refused.value) and "\n" not in str(refused.value)
        assert ms.get(rollback.id).text == rollback.text and len(ms.list()) == 3
        # what is the store's own (pin, importance) may change; a memory of its own may go
        assert ms.update(rollback.id, importance=0.2, text=rollback.text).importance == 0.2
        assert ms.delete([own]) == [own]


def test_index_repairs_a_store_changed_behind_its_back(
    store_location: Path | str, deploy_notes: Path, encoder: Encoder
) -> None:
    notes = deploy_notes
    write(notes / "garden.md", GARDEN)
    with Memsearch(store_location, encoder=encoder) as ms:
        ms.index([notes])
        expected = sorted((m.key, m.text) for m in ms.list())
        deploy, rollback = sections(ms, notes / "deploy.md")
        edit_text(ms, deploy, "tampered text")  # below the library's refusal: an older memsearch, a script
        ms.store().delete([rollback.id])
        stray = f"note:{(notes / 'garden.md').resolve()}#0123456789abcdef"
        ms.add(NewMemory("a section no file has", key=stray, metadata={"path": str((notes / "garden.md").resolve())}))
        outcome = ms.index()
        assert sorted(Path(path).name for path in outcome.repaired) == ["deploy.md", "garden.md"]
        assert "repaired" in outcome.summary
        assert sorted((m.key, m.text) for m in ms.list()) == expected
        assert ms.index().repaired == ()


def test_roots_are_listed_forgotten_and_a_missing_one_kept_until_pruned(
    store_location: Path | str, tmp_path: Path, encoder: Encoder
) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    write(work / "deploy.md", DEPLOY)
    write(home / "garden.md", GARDEN)
    with Memsearch(store_location, encoder=encoder) as ms:
        assert ms.roots() == []
        ms.index([work])
        ms.index([home])
        listed = {Path(root.path).name: root.to_dict() for root in ms.roots()}
        assert listed["work"] | {"path": ""} == {
            "path": "", "include": [], "exclude": [], "state": "ok", "reason": None, "files": 1, "memories": 2
        }  # fmt: skip
        # a moved (or unmounted) folder is reported, and its memories stay
        shutil.move(home, tmp_path / "moved")
        outcome = ms.index()
        assert any("no longer exists" in why for _, why in outcome.skipped) and len(ms.list()) == 4
        assert {Path(root.path).name: root.state for root in ms.roots()} == {"home": "missing", "work": "ok"}
        pruned = ms.prune_roots()
        assert [Path(root.path).name for root in pruned.roots] == ["home"] and pruned.memories_removed == 2
        assert [Path(root.path).name for root in ms.roots()] == ["work"] and len(ms.list()) == 2
        with pytest.raises(NotARootError):
            ms.forget_roots([tmp_path / "nowhere"])
        forgotten = ms.forget_roots([work])
        assert (forgotten.memories_removed, forgotten.files_removed) == (2, 1)
        assert ms.roots() == [] and ms.list() == []


def test_forgetting_a_folder_inside_another_keeps_what_the_outer_one_covers(
    tmp_path: Path, db_path: Path, encoder: Encoder
) -> None:
    notes = tmp_path / "notes"
    write(notes / "deploy.md", DEPLOY)
    write(notes / "garden" / "garden.md", GARDEN)
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.index([notes])
        ms.index([notes / "garden"])
        assert ms.forget_roots([notes / "garden"]).memories_removed == 0 and len(ms.list()) == 4
        assert [Path(root.path).name for root in ms.roots()] == ["notes"]


def test_index_changed_updates_only_the_roots_that_hold_the_paths(
    tmp_path: Path, db_path: Path, counting: CountingEncoder
) -> None:
    work, home = tmp_path / "work", tmp_path / "home"
    write(work / "deploy.md", DEPLOY)
    write(home / "garden.md", GARDEN)
    with Memsearch(db_path, encoder=counting) as ms:
        ms.index([work])
        ms.index([home])
        write(work / "deploy.md", DEPLOY + "\n## Owners\n\nThe platform team.\n")
        write(home / "garden.md", GARDEN + "\n## Later\n\nGarlic.\n")
        outcome = ms.index_changed([work / "deploy.md"])
        assert [root.path for root in outcome.roots] == [str(work.resolve())] and outcome.counts["changed"] == 1
        assert ms.index().counts["changed"] == 1  # home's edit waited for its own run


def test_results_group_by_file() -> None:
    def hit(memory_id: int, path: str | None, score: float) -> dict[str, object]:
        metadata = {"path": path, "start_line": memory_id, "title": "T"} if path else {}
        key = f"note:{path}#{memory_id:016x}" if path else None
        return {"id": memory_id, "key": key, "kind": "note", "score": score, "metadata": metadata}

    results = [hit(1, "/n/a.md", 0.9), hit(2, None, 0.8), hit(3, "/n/a.md", 0.7), hit(4, "/n/b.md", 0.6)]
    results += [hit(5, "/n/a.md", 0.5)]
    rows = group_by_file(results, 2)
    assert [(row["rank"], row["path"], row["ids"], row["more"]) for row in rows] == [
        (1, "/n/a.md", [1, 3], 1), (2, None, [2], 0), (3, "/n/b.md", [4], 0)
    ]  # fmt: skip
    assert (rows[0]["line"], rows[0]["title"], rows[0]["score"]) == (1, "T", 0.9)
    # a memory of its own whose metadata names a path is not a section
    assert (
        group_by_file([{"id": 9, "key": "mine", "score": 1.0, "metadata": {"path": "/n/a.md"}}], 3)[0]["path"] is None
    )
