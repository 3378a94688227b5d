"""`memsearch index`: folders of notes kept in the store as memories, re-indexed incrementally.

The roots given are remembered in the store with their include and exclude patterns; an index
run without roots brings every remembered root up to date. A run walks its roots (each with its
own patterns, with every remembered root nested under them; a remembered root above them adds the
files under them that its patterns take), plans against the files stored under them
(`note_files.plan`: files whose size and mtime did not move are not read, chunks whose key and
digest did not change are not embedded again) and applies the plan in batches: per batch, the
old chunks are deleted before the new ones are added (a key may be in both), then the state
document is saved. A chunk whose text is stored under a key the plan deletes (it moved to another
file, or its file was renamed, or the store still has it under a position key of memsearch
before identity keys) takes that memory over: the memory is amended in place (key, metadata,
tags, time), so it keeps its id, vector, pin, importance and access counts. A chunk whose lines,
tags, title or date moved is amended the same way.

A note's time (`created_at`) is its file's: the front matter's `date:` when it has one, else the
file's modification time when the chunk took its text (a chunk that only moved keeps its time).

The file is the truth: each run checks the keys the state records against what the store holds
(`checked_records`); a chunk the store lost, or holds with another text, and a note key under
the run's roots that no file names are put right by reading those files again.

A root given to the run is named by the user and walked whoever owns it; every other root and
every folder or file under it is walked only if no other user could have written it
(`note_files.walk`). What a walk could not or would not look into (such a folder, one that
cannot be listed, a root that now leads elsewhere) is held: the files stored from it stay as
they are, neither removed nor re-read (`_held`), so a refused root never replaces the user's notes.
The store check runs after the held files are set aside, so it neither repairs them nor removes
a stray key under a held folder: they wait until the folder is named or trusted again.

Stored first, embedded after: a run stores each file's chunks without their vectors (they wait
for them: `Store.pending_count`), so they are found by their words at once, then embeds every
memory that waits (`filling.fill_pending`), a batch per transaction. Vector search uses the
vectors that exist meanwhile; a run that stops keeps every file and every vector it committed,
and the next run (even one that finds no file changed) embeds the rest.

Nothing is half-stored: the files are written a few at a time (about COMMIT_SECONDS of work), each
batch in one transaction with the state that names them (`Store.batch`): the state claims a file
only once its memories are committed, so after Ctrl-C or `kill -9` the files not yet stored are
new again to the next run, and those stored are unchanged. The state is merged with what is
stored at each save, so two runs over different folders keep each other's files.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.embedding.base import Progress
from memsearch.errors import InvalidInputError, MemsearchError, StoreNotFoundError
from memsearch.ingest import Library
from memsearch.ingest.filling import fill_pending
from memsearch.ingest.note_files import (
    FilePlan,
    FileState,
    FileStatus,
    IndexedFile,
    IndexPlan,
    counts_line,
    is_under,
    plan,
    under_roots,
    walk,
    walked_reader,
)
from memsearch.ingest.note_memories import checked_records, chunk_memory, restamped, taken_over
from memsearch.ingest.notes import NoteChunk
from memsearch.ingest.progress import IndexProgress, OnProgress
from memsearch.ingest.safe_files import quoted
from memsearch.sections import NOTE_KEY_PREFIX
from memsearch.timeutil import utc_now

if TYPE_CHECKING:
    from memsearch.store.base import Store

STATE_VERSION = 2  # 1: chunks keyed by their place in the file (`note:{path}#{n}`)
COMMIT_SECONDS = 0.5  # files stored per transaction: as many as this much work (at least one)


class NothingToIndexError(MemsearchError):
    """An index run with no root given and none remembered."""


@dataclass(frozen=True)
class Root:
    """A folder (or file) to index, with its own patterns (`note_files.walk`)."""

    path: str  # absolute, symlinks resolved
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "include": list(self.include), "exclude": list(self.exclude)}


@dataclass(frozen=True)
class IndexState:
    """What the store keeps of the notes index: the remembered roots and every indexed file."""

    roots: Mapping[str, Root] = field(default_factory=dict)
    files: Mapping[str, IndexedFile] = field(default_factory=dict)

    @classmethod
    def load(cls, document: str | None) -> IndexState:
        if not document:
            return cls()
        try:
            data = json.loads(document)
            version = data.get("version")
            if version not in (1, STATE_VERSION):  # a later memsearch's: start over rather than misread it
                return cls()
            roots = {r["path"]: Root(r["path"], tuple(r["include"]), tuple(r["exclude"])) for r in data["roots"]}
            files = {
                path: IndexedFile(f["size"], f["mtime_ns"], f["sha256"], dict(f["chunks"]))
                for path, f in data["files"].items()
            }
        except (ValueError, KeyError, TypeError, AttributeError):  # damaged: every file is indexed anew (by key)
            return cls()
        if version == 1:  # position keys: every file is read again, and its chunks take their memories over by text
            files = {path: IndexedFile(-1, -1, "", dict.fromkeys(record.chunks, "")) for path, record in files.items()}
        return cls(roots, files)

    def dump(self) -> str:
        files = {
            path: {"size": f.size, "mtime_ns": f.mtime_ns, "sha256": f.sha256, "chunks": dict(f.chunks)}
            for path, f in sorted(self.files.items())
        }
        roots = [root.to_dict() for _, root in sorted(self.roots.items())]
        return json.dumps({"version": STATE_VERSION, "roots": roots, "files": files}, ensure_ascii=False)


@dataclass(frozen=True)
class FileLine:
    """One file's part in a run (files left unchanged are counted, not listed)."""

    path: str
    status: str  # a FileStatus value
    chunks_added: int = 0
    chunks_removed: int = 0
    reason: str = ""  # why it was skipped, or that it was repaired
    chunks_moved: int = 0  # stored chunks that keep their memory: only their place, tags, title or date moved

    def to_dict(self) -> dict[str, Any]:
        line: dict[str, Any] = {"path": self.path, "status": self.status}
        line |= {"chunks_added": self.chunks_added, "chunks_removed": self.chunks_removed}
        line |= {"chunks_moved": self.chunks_moved}
        if self.reason:
            line["reason"] = self.reason
        return line


@dataclass(frozen=True)
class IndexOutcome:
    """What an index run did (or, on a dry run, would do)."""

    roots: tuple[Root, ...]
    counts: Mapping[str, int]  # FileStatus value → files
    chunks_added: int  # new memories (embedded)
    chunks_removed: int  # stored chunks deleted and not replaced by a chunk of the same key
    files: tuple[FileLine, ...]  # every file that is not unchanged
    skipped: tuple[tuple[str, str], ...]  # (path, reason): files, folders and links the walk or the plan passed over
    dry_run: bool = False
    reads: int = 0  # files read and hashed
    warnings: tuple[tuple[str, str], ...] = ()  # (path:line, reason): front matter left unused
    chunks_moved: int = 0  # stored chunks that keep their memory (moved in or to another file, retagged)
    repaired: tuple[str, ...] = ()  # files read again because the store disagreed with them
    vectors_added: int = 0  # memories embedded by this run (stored by it or waiting from before)
    vectors_pending: int = 0  # memories that wait for their vectors after it (a dry run: that would be embedded)

    @property
    def summary(self) -> str:
        """'indexed 12 files: 3 new, 1 changed, 2 removed, 6 unchanged; 41 chunks stored, 7 removed'."""
        counts = self.counts
        total = sum(counts[status] for status in FileStatus if status != FileStatus.SKIPPED)
        files = counts_line(counts)
        verb, stored, removed = (
            ("would index", "to store", "to remove") if self.dry_run else ("indexed", "stored", "removed")
        )
        chunks = f"{self.chunks_added:,} chunk{'' if self.chunks_added == 1 else 's'} {stored}"
        line = f"{verb} {total:,} file{'' if total == 1 else 's'}: {files}; {chunks}, {self.chunks_removed:,} {removed}"
        if self.chunks_moved:
            line += f", {self.chunks_moved:,} {'to move' if self.dry_run else 'moved'}"
        if self.repaired:
            count = len(self.repaired)
            line += f"; {count:,} file{'' if count == 1 else 's'} {'to repair' if self.dry_run else 'repaired'}"
        if self.dry_run and self.vectors_pending:
            line += f"; {self.vectors_pending:,} memor{'y' if self.vectors_pending == 1 else 'ies'} to embed"
        elif self.vectors_pending:
            waiting = "y waits" if self.vectors_pending == 1 else "ies wait"
            line += f"; {self.vectors_pending:,} memor{waiting} for vectors (searchable by their words meanwhile)"
        return line

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "roots": [root.to_dict() for root in self.roots],
            "files": {str(status): self.counts[status] for status in FileStatus},
            "chunks_added": self.chunks_added,
            "chunks_removed": self.chunks_removed,
            "chunks_moved": self.chunks_moved,
            "reads": self.reads,
            "changes": [line.to_dict() for line in self.files],
            "skipped": [{"path": path, "reason": reason} for path, reason in self.skipped],
            "warnings": [{"path": path, "reason": reason} for path, reason in self.warnings],
            "repaired": list(self.repaired),
            "vectors_added": self.vectors_added,
            "vectors_pending": self.vectors_pending,
            "summary": self.summary,
        }


def index_notes(
    ms: Library,
    paths: Iterable[str | os.PathLike[str]] = (),
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    dry_run: bool = False,
    progress: Progress | None = None,
    within: Sequence[str] = (),
    named: Sequence[str] = (),
    vectors: bool = True,
    on_progress: OnProgress | None = None,
) -> IndexOutcome:
    """Index the roots given (remembering them with these patterns; a root given again without
    patterns keeps the ones it has), or every remembered root when none is given (module doc);
    with `within` (and no root given), only the remembered roots that hold or lie under one of
    those paths. The roots given, and the `named` ones (resolved: a watch's own after its first
    run), are walked whoever owns them. The files' chunks are stored first, then every memory
    that waits for its vectors is embedded (not with `vectors=False`: they keep waiting).
    `progress` gets (vectors made, vectors to make); `on_progress` an IndexProgress per commit."""
    started = time.monotonic()
    include, exclude = tuple(include), tuple(exclude)
    given = [_resolved_root(path) for path in paths]
    if not given and (include or exclude):
        raise InvalidInputError(
            "applies to the folders given; give the folders to index", field="include" if include else "exclude"
        )
    store = existing_store(ms)
    state = IndexState.load(store.index_state() if store is not None else None)
    skipped: list[tuple[str, str]] = []
    try:
        runs, scope, remembered = _roots(state, given, include, exclude, skipped, [_absolute(path) for path in within])
    except NothingToIndexError:
        if store is None or not store.pending_count():
            raise
        runs, scope, remembered = {}, [], {}  # no folder, but memories that wait for vectors: they are made
    current: dict[str, FileState] = {}
    walks: list[tuple[str, list[str]]] = []  # each walk's root and the paths it held (`_held`)
    for root in [*runs.values(), *_enclosing(state, scope)]:
        walks.append((root.path, []))
        found = walk(
            [root.path], root.include, root.exclude, on_skip=lambda path, why: skipped.append((path, why)),
            named=[*given, *named], on_held=walks[-1][1].append,
        )  # fmt: skip
        current |= {file.path: file for file in found if file.path not in current and is_under(file.path, scope)}
    stored = under_roots(state.files, scope) if scope else {}
    previous = {path: record for path, record in stored.items() if not _held(path, walks)}
    repaired: set[str] = set()
    if store is not None and scope:  # checked after the held files are set aside: they keep what they have
        checked, repaired = checked_records(previous, store.key_hashes(NOTE_KEY_PREFIX), state.files, scope)
        previous = {path: record for path, record in checked.items() if not _held(path, walks)}  # strays too
    states = sorted(current.values(), key=lambda file: file.path)
    the_plan = _without_binary(plan(previous, states, walked_reader(states)))
    skipped += [(file.path, file.reason) for file in the_plan.having(FileStatus.SKIPPED)]
    takeovers = taken_over(store, the_plan) if store is not None else {}
    lines = [_file_line(file, takeovers, file.path in repaired) for file in the_plan.files]
    outcome = IndexOutcome(
        roots=tuple(runs.values()),
        counts=the_plan.counts,
        chunks_added=sum(line.chunks_added for line in lines),
        chunks_removed=sum(line.chunks_removed for line in lines),
        chunks_moved=sum(line.chunks_moved for line in lines),
        files=tuple(
            line
            for file, line in zip(the_plan.files, lines, strict=True)
            if file.status not in (FileStatus.UNCHANGED, FileStatus.TOUCHED)
        ),
        skipped=tuple(dict.fromkeys(skipped)),  # a folder under two roots is walked twice
        dry_run=dry_run,
        reads=the_plan.reads,
        warnings=tuple((f"{file.path}:{line}", reason) for file in the_plan.files for line, reason in file.problems),
        repaired=tuple(sorted(repaired & {file.path for file in the_plan.files})),
    )
    waiting = store.pending_count() if store is not None else 0
    if dry_run:
        added = outcome.chunks_added
        return replace(outcome, vectors_pending=waiting + added)
    clock = _Clock(started, on_progress, len(the_plan.having(FileStatus.NEW, FileStatus.CHANGED, FileStatus.REMOVED)))
    wrote = not (the_plan.is_empty and remembered == dict(state.roots))  # an unchanged re-run writes no file
    if wrote:
        store = ms.store(create=True)
        _Apply(ms, store, the_plan, remembered, set(previous) | set(current), takeovers, clock).run()
    if store is None:
        return outcome
    made = 0
    if vectors:
        clock.vectors_phase(store.pending_count())
        made = fill_pending(ms, store, clock.vectors_made, progress)
    if wrote or made:  # the approximate index of a large store made now, not by the next search
        clock.index_phase()
        store.prepare_search_indexes(clock.indexed)
    pending = store.pending_count()
    clock.done(pending)
    return replace(outcome, vectors_added=made, vectors_pending=pending)


class _Clock:
    """The run's progress events (`IndexProgress`), each sent after a commit."""

    def __init__(self, started: float, on_progress: OnProgress | None, files_total: int) -> None:
        self.started = self.phase_started = started
        self.on_progress = on_progress
        self.phase = "store"
        self.files_total, self.files_done, self.chunks = files_total, 0, 0
        self.vectors_total = self.vectors_done = 0
        self.index_done = self.index_total = 0

    def stored(self, files: int, chunks: int) -> None:
        self.files_done += files
        self.chunks += chunks
        self._send()

    def vectors_phase(self, waiting: int) -> None:
        self.phase, self.phase_started, self.vectors_total = "vectors", time.monotonic(), waiting
        if waiting:
            self._send()

    def vectors_made(self, done: int, total: int) -> None:
        self.vectors_done, self.vectors_total = done, max(self.vectors_total, total)
        self._send()

    def index_phase(self) -> None:
        self.phase, self.phase_started = "search index", time.monotonic()

    def indexed(self, done: int, total: int) -> None:
        """(vectors added to the approximate index, to add): an event every few percent."""
        if total and (done in (0, total) or done * 20 // total != self.index_done * 20 // total):
            self.index_done, self.index_total = done, total
            self._send()
        self.index_done, self.index_total = done, total

    def done(self, pending: int) -> None:
        self.phase = "done"
        self.vectors_total = self.vectors_done + pending
        self._send()

    def _send(self) -> None:
        if self.on_progress is None:
            return
        now = time.monotonic()
        self.on_progress(
            IndexProgress(
                self.phase, self.files_done, self.files_total, self.chunks, self.vectors_done, self.vectors_total,
                now - self.started, now - self.phase_started, self.index_done, self.index_total,
            )
        )  # fmt: skip


def _roots(
    state: IndexState,
    given: list[str],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    skipped: list[tuple[str, str]],
    within: list[str],
) -> tuple[dict[str, Root], list[str], dict[str, Root]]:
    """The roots to walk, the roots whose stored files the run decides about, and the roots to remember."""
    if given:
        chosen = {
            path: Root(path, include or _kept(state, path).include, exclude or _kept(state, path).exclude)
            for path in dict.fromkeys(given)
        }
        # the remembered roots nested in a given one are part of it: indexing ~/notes updates ~/notes/work too
        nested = {
            path: root
            for path, root in state.roots.items()
            if path not in chosen and any(Path(path).is_relative_to(other) for other in chosen)
        }
        return {**chosen, **nested}, list(chosen), {**state.roots, **chosen}
    if not state.roots:
        raise NothingToIndexError("no folder to index: none was given and none is remembered")
    chosen = {
        path: root
        for path, root in state.roots.items()
        if not within or any(is_under(inner, [path]) or is_under(path, [inner]) for inner in within)
    }
    if not chosen:
        raise InvalidInputError(f"{within[0]} is under no remembered folder", field="paths")
    runs = {}
    for path, root in chosen.items():
        if Path(path).exists():
            runs[path] = root
        else:  # an unmounted drive is no reason to drop its notes from the store
            skipped.append((path, MISSING_ROOT))
    return runs, list(runs), dict(state.roots)


MISSING_ROOT = "is a remembered root that no longer exists; what was indexed from it is kept until it is pruned"


def _absolute(path: str | os.PathLike[str]) -> str:
    """A path as the state names it (absolute, links resolved as far as they exist)."""
    return str(Path(path).expanduser().resolve())


def _enclosing(state: IndexState, scope: Sequence[str]) -> list[Root]:
    """The remembered roots above a root of the run: a file under both that either one's patterns
    take stays indexed, so indexing ~/notes/work with its own patterns keeps what ~/notes takes."""
    return [
        root
        for path, root in state.roots.items()
        if path not in scope and any(Path(inner).is_relative_to(path) for inner in scope)
    ]


def _held(path: str, walks: Sequence[tuple[str, Sequence[str]]]) -> bool:
    """Whether every walk that could reach the stored file held it (a folder on the way refused,
    unreadable or replaced): it stays as stored, neither removed nor re-read."""
    reaching = [held for root, held in walks if is_under(path, [root])]
    return bool(reaching) and all(is_under(path, held) for held in reaching)


def _kept(state: IndexState, path: str) -> Root:
    return state.roots.get(path) or Root(path)


def _resolved_root(path: str | os.PathLike[str]) -> str:
    given = Path(path).expanduser()
    try:
        return str(given.resolve(strict=True))
    except (OSError, RuntimeError):
        raise InvalidInputError(f"{quoted(str(given))}: no such file or folder") from None


def existing_store(ms: Library) -> Store | None:
    """The store if there is one yet: a dry run or a run that finds nothing must not create it."""
    try:
        return ms.store()
    except StoreNotFoundError:
        return None


def _without_binary(the_plan: IndexPlan) -> IndexPlan:
    """A file with NUL characters is not a note (PostgreSQL's text cannot even hold one): skipped."""
    files = tuple(
        FilePlan(file.path, FileStatus.SKIPPED, reason="holds NUL bytes: a binary file, not a note")
        if any("\0" in chunk.text for chunk in file.add_chunks)
        else file
        for file in the_plan.files
    )
    return IndexPlan(files, the_plan.reads)


REPAIRED = "the store did not hold what the file says: repaired"


def _file_line(file: FilePlan, takeovers: Mapping[str, str], repaired: bool = False) -> FileLine:
    """A file's counts: chunks added (embedded), removed (deleted, not stored again under their
    key or taken over by a chunk of the same text) and moved (amended, or taken over)."""
    added = {chunk.key for chunk in file.add_chunks}
    taken = set(takeovers.values())
    removed = sum(key not in added and key not in taken for key in file.delete_keys)
    moved = sum(chunk.key in takeovers for chunk in file.add_chunks)
    reason = REPAIRED if repaired and not file.reason else file.reason
    return FileLine(
        file.path, str(file.status), len(file.add_chunks) - moved, removed, reason, len(file.amend_chunks) + moved
    )


class _Apply:
    """Writes a plan a few files per transaction, each with the state that names them (module doc)."""

    def __init__(
        self,
        ms: Library,
        store: Store,
        the_plan: IndexPlan,
        roots: Mapping[str, Root],
        owned: set[str],
        takeovers: Mapping[str, str],
        clock: _Clock,
    ) -> None:
        self.ms, self.store, self.plan, self.clock = ms, store, the_plan, clock
        self.takeovers = takeovers  # added chunk's key → the key of the stored chunk of the same text it takes over
        self.taken = set(takeovers.values())  # kept from every delete
        self.roots = dict(roots)
        self.owned = owned  # the paths this run decides about; the others are as the stored state says
        stored = IndexState.load(store.index_state()).files
        self.files = {path: record for path, record in stored.items() if path in owned}

    def run(self) -> None:
        queue = deque(self.plan.having(FileStatus.NEW, FileStatus.CHANGED, FileStatus.REMOVED))
        if len(self.plan.add_chunks) > len(self.takeovers):  # the model is loaded and checked before any delete
            self.store.check_model(self.ms.encoder().info)
        for file in self.plan.having(FileStatus.TOUCHED):
            assert file.record is not None
            self.files[file.path] = file.record
        while True:
            with self.store.batch():  # the files and the state that names them: all or none
                deadline = time.monotonic() + COMMIT_SECONDS
                batch: list[FilePlan] = []
                chunks = 0
                while queue and (not batch or time.monotonic() < deadline):
                    file = queue.popleft()
                    chunks += self._write(file)
                    batch.append(file)
                    if file.status == FileStatus.REMOVED:
                        self.files.pop(file.path, None)
                    elif file.record is not None:
                        self.files[file.path] = file.record
                self._save()
            self.clock.stored(len(batch), chunks)
            if not queue:
                return

    def _save(self) -> None:
        """The state as stored now, with this run's roots and the files it decides about."""
        stored = IndexState.load(self.store.index_state())
        files = {path: record for path, record in stored.files.items() if path not in self.owned}
        files.update(self.files)
        self.store.save_index_state(IndexState({**stored.roots, **self.roots}, files).dump())

    def _write(self, file: FilePlan) -> int:
        """One file's deletes, amends and new memories (stored without vectors: they wait for
        them); returns how many memories were added."""
        ids = [
            id_ for key in file.delete_keys if key not in self.taken and (id_ := self.store.id_for_key(key)) is not None
        ]
        if ids:
            self.store.delete(ids)
        memories = [chunk_memory(plan, chunk) for plan, chunk in self._amend([file])]
        if memories:
            self.store.insert(memories, None, None, utc_now(), replace=True)
        return len(memories)

    def _amend(self, batch: Sequence[FilePlan]) -> list[tuple[FilePlan, NoteChunk]]:
        """Amend in place the stored memories that the batch's chunks keep or take over (`restamped`);
        returns the chunks to add as new memories."""
        targets: list[tuple[int, FilePlan, NoteChunk]] = []
        fresh: list[tuple[FilePlan, NoteChunk]] = []
        for file in batch:
            for chunk in file.amend_chunks:
                memory_id = self.store.id_for_key(chunk.key)
                if memory_id is None:  # gone meanwhile: made anew
                    fresh.append((file, chunk))
                else:
                    targets.append((memory_id, file, chunk))
            for chunk in file.add_chunks:
                old = self.takeovers.get(chunk.key)
                memory_id = self.store.id_for_key(old) if old is not None else None
                if memory_id is None:
                    fresh.append((file, chunk))
                else:
                    targets.append((memory_id, file, chunk))
        stored = self.store.get_many([memory_id for memory_id, _, _ in targets]) if targets else {}
        changes: dict[int, dict[str, Any]] = {}
        for memory_id, file, chunk in targets:
            memory = stored.get(memory_id)
            if memory is None:
                fresh.append((file, chunk))
                continue
            occupant = self.store.id_for_key(chunk.key)
            if occupant is not None and occupant != memory_id:  # a stray under the key it takes
                self.store.delete([occupant])
            if change := restamped(file, chunk, memory):
                changes[memory_id] = change
        self.store.amend(changes)
        return fresh
