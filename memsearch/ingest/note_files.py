"""Which note files to index and what to change in the store: the walk of the folders and the plan
that makes a re-index incremental and exact.

`walk` lists the files under the roots with their size and mtime (one stat each). `plan` compares
them with what was stored last time: a file whose size and mtime are the same is unchanged and not
read; one whose mtime moved is read and hashed, and unchanged if its hash is the same (only its
stored mtime is updated); a changed file's chunks are re-made (`notes`: a chunk's key is its
trail and text, not its place), and a chunk whose key and digest (everything stored of it, line
numbers included) are the same is kept; one whose key and text are the same but whose lines,
tags, title or date moved is amended in place (`amend_chunks`: no new id, no new vector); every
other old chunk is deleted and every new one added; a file no longer walked (deleted, excluded)
has all its chunks removed. Applying a plan: per file, amend its `amend_chunks`, delete its
`delete_keys` before adding its `add_chunks` (a key can be in both when what was stored under it
is not known to be its text), then write its `record`.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path

from pathspec import GitIgnoreSpec

from memsearch.errors import InvalidInputError
from memsearch.ingest.notes import NoteChunk, UnreadableNoteError, read_note, text_fingerprint

DEFAULT_INCLUDE = ("*.md", "*.markdown", "*.txt")
MAX_NOTE_BYTES = 8 * 1024 * 1024  # a larger "note" is a log or a dump: skipped, with the reason, unread
IGNORE_FILE = ".gitignore"


@dataclass(frozen=True)
class FileState:
    path: str  # absolute, symlinks resolved: the file's identity in the store
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class IndexedFile:
    """What the store keeps of a file it indexed: its state then and its chunks' keys and digests."""

    size: int
    mtime_ns: int
    sha256: str  # of the file's bytes
    chunks: Mapping[str, str] = field(default_factory=dict)  # chunk key → digest ("": not known to be right)


class FileStatus(StrEnum):
    NEW = "new"
    CHANGED = "changed"
    REMOVED = "removed"  # deleted, excluded or out of the walk: all its chunks go
    UNCHANGED = "unchanged"  # same size and mtime: not read
    TOUCHED = "touched"  # mtime moved, same bytes: only the record's mtime is updated
    SKIPPED = "skipped"  # unreadable or too large: what was stored of it stays as it was


@dataclass(frozen=True)
class FilePlan:
    path: str
    status: FileStatus
    record: IndexedFile | None = None  # to write (new, changed, touched); None: nothing to write
    delete_keys: tuple[str, ...] = ()
    add_chunks: tuple[NoteChunk, ...] = ()
    kept_keys: tuple[str, ...] = ()  # chunks of a changed file already stored exactly as they would be
    amend_chunks: tuple[NoteChunk, ...] = ()  # stored with this text, but their lines, tags, title or date moved
    tags: tuple[str, ...] = ()  # the front matter's tags, for every added chunk
    lossy: bool = False  # not valid UTF-8: the added chunks hold U+FFFD where the bad bytes were
    reason: str = ""  # why it was skipped
    title: str | None = None  # the front matter's title
    date: datetime | None = None  # the front matter's date: the time of every chunk
    mtime_ns: int = 0  # the file's modification time as read: the time of its new chunks without a date
    problems: tuple[tuple[int, str], ...] = ()  # (line, reason): front matter left unused


@dataclass(frozen=True)
class IndexPlan:
    files: tuple[FilePlan, ...]  # current files in path order, then the removed ones in path order
    reads: int = 0  # files read and hashed to make the plan

    def having(self, *statuses: FileStatus) -> tuple[FilePlan, ...]:
        return tuple(file for file in self.files if file.status in statuses)

    @property
    def delete_keys(self) -> tuple[str, ...]:
        return tuple(key for file in self.files for key in file.delete_keys)

    @property
    def add_chunks(self) -> tuple[NoteChunk, ...]:
        return tuple(chunk for file in self.files for chunk in file.add_chunks)

    @property
    def amend_chunks(self) -> tuple[NoteChunk, ...]:
        return tuple(chunk for file in self.files for chunk in file.amend_chunks)

    @property
    def is_empty(self) -> bool:
        """Nothing to write: no chunk to add or delete and no record to update."""
        return all(file.status in (FileStatus.UNCHANGED, FileStatus.SKIPPED) for file in self.files)

    def summary(self) -> str:
        """One line for `--dry-run` and the end of an index run."""
        counts = {status: 0 for status in FileStatus}
        for file in self.files:
            counts[file.status] += 1
        new = counts[FileStatus.NEW]
        unchanged = counts[FileStatus.UNCHANGED] + counts[FileStatus.TOUCHED]
        line = (
            f"{new:,} file{'' if new == 1 else 's'} new, {counts[FileStatus.CHANGED]:,} changed, "
            f"{counts[FileStatus.REMOVED]:,} removed, {unchanged:,} unchanged"
        )
        if counts[FileStatus.SKIPPED]:
            line += f", {counts[FileStatus.SKIPPED]:,} skipped"
        return line


# -- the walk -------------------------------------------------------------------------------------


def walk(
    roots: Iterable[str | os.PathLike[str]],
    include_globs: Sequence[str] = (),
    exclude_patterns: Sequence[str] = (),
    on_skip: Callable[[str, str], None] | None = None,
) -> list[FileState]:
    """The note files under the roots, sorted by path, each once.

    A root that is a file is taken as named, whatever its suffix and the exclude patterns (as
    ripgrep does). In a folder: files matching `include_globs` (gitignore globs against the path
    under the root; `DEFAULT_INCLUDE` when empty), less those ignored by a `.gitignore` of a walked
    folder (deeper ones win; a .gitignore above the root is not read) or by `exclude_patterns`
    (gitignore syntax, relative to the root; they win over the .gitignore files, so `!keep.md`
    brings back an ignored file). Hidden files and folders (`.git`, `.obsidian`) are skipped, and
    so are symlinks that lead out of the root, broken ones, folders already walked (a link loop),
    folders that cannot be listed and invalid .gitignore lines: `on_skip(path, reason)` hears of
    each but hidden and ignored ones. Each root is walked with its own rules and the result is the
    union. A missing root, or a pattern that is not gitignore syntax, is an `InvalidInputError`
    (its field "include" or "exclude" for a pattern).
    """
    include = _spec(include_globs or DEFAULT_INCLUDE, "include")
    exclude = _spec(exclude_patterns, "exclude")
    skip = on_skip or (lambda path, reason: None)
    found: dict[str, FileState] = {}
    for root in roots:
        given = Path(root).expanduser()
        try:
            resolved = given.resolve(strict=True)
        except (OSError, RuntimeError):
            raise InvalidInputError(f"{given}: no such file or folder") from None
        if resolved.is_dir():
            _walk_folder(resolved, include, exclude, found, skip)
        elif resolved.is_file():
            _add(resolved, found, skip)
        else:
            raise InvalidInputError(f"{given} is neither a file nor a folder")
    return sorted(found.values(), key=lambda state: state.path)


def _spec(patterns: Sequence[str], name: str) -> GitIgnoreSpec:
    try:
        return GitIgnoreSpec.from_lines(patterns)
    except (ValueError, TypeError, re.error) as error:
        raise InvalidInputError(f"has a pattern that is not valid gitignore syntax ({error})", field=name) from None


Layers = tuple[tuple[str, GitIgnoreSpec], ...]  # (folder under the root, its .gitignore), root first


Skip = Callable[[str, str], None]  # (path, reason)


def _walk_folder(
    root: Path, include: GitIgnoreSpec, exclude: GitIgnoreSpec, found: dict[str, FileState], skip: Skip
) -> None:
    visited = {root}
    stack: list[tuple[Path, str, Layers]] = [(root, "", ())]
    while stack:
        folder, relative, layers = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as error:
            skip(str(folder), f"cannot be listed ({error.strerror or error})")
            continue
        layers = _with_ignore_file(folder, relative, layers, entries, skip)
        subfolders = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = f"{relative}{entry.name}"
            target = Path(entry.path)
            if entry.is_symlink():
                try:
                    target = target.resolve(strict=True)
                except (OSError, RuntimeError):
                    skip(entry.path, "is a broken symlink")
                    continue
                if not target.is_relative_to(root):
                    skip(entry.path, f"is a symlink out of {root}")
                    continue
            if target.is_dir():
                if _ignored(f"{path}/", layers, exclude):
                    continue
                if target in visited:
                    skip(entry.path, "leads to a folder already walked")
                    continue
                visited.add(target)
                subfolders.append((target, f"{path}/", layers))
            elif target.is_file() and include.match_file(path) and not _ignored(path, layers, exclude):
                _add(target, found, skip)
        stack.extend(reversed(subfolders))  # walked in name order


def _with_ignore_file(
    folder: Path, relative: str, layers: Layers, entries: list[os.DirEntry[str]], skip: Skip
) -> Layers:
    if not any(entry.name == IGNORE_FILE and entry.is_file() for entry in entries):
        return layers
    path = folder / IGNORE_FILE
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as error:
        skip(str(path), f"cannot be read ({error.strerror or error})")
        return layers
    valid = []
    for number, line in enumerate(lines, start=1):
        try:
            GitIgnoreSpec.from_lines([line])
        except (ValueError, TypeError, re.error):
            skip(f"{path}:{number}", "is not a valid gitignore pattern; the file's other lines apply")  # as git does
            continue
        valid.append(line)
    return (*layers, (relative, GitIgnoreSpec.from_lines(valid)))


def _ignored(path: str, layers: Layers, exclude: GitIgnoreSpec) -> bool:
    """Whether git would ignore the path (a folder's ends in "/"), the user's patterns last."""
    ignored = False
    for folder, spec in layers:
        verdict = spec.check_file(path[len(folder) :]).include
        ignored = ignored if verdict is None else verdict
    verdict = exclude.check_file(path).include
    return ignored if verdict is None else bool(verdict)


def _add(path: Path, found: dict[str, FileState], skip: Skip) -> None:
    try:
        stat = path.stat()
    except OSError as error:
        skip(str(path), f"cannot be read ({error.strerror or error})")
        return
    found.setdefault(str(path), FileState(str(path), stat.st_size, stat.st_mtime_ns))


def is_under(path: str, roots: Iterable[str]) -> bool:
    """Whether the path is one of the roots or inside one (all absolute)."""
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def under_roots(previous: Mapping[str, IndexedFile], roots: Iterable[str | os.PathLike[str]]) -> dict[str, IndexedFile]:
    """The stored files at or under the roots: the `previous` of a plan for those roots, so that
    indexing one folder does not remove the files indexed from another."""
    resolved = [Path(root).expanduser().resolve() for root in roots]
    return {
        path: record for path, record in previous.items() if any(Path(path).is_relative_to(root) for root in resolved)
    }


# -- the plan -------------------------------------------------------------------------------------


def plan(previous: Mapping[str, IndexedFile], current: Sequence[FileState], read: Callable[[str], bytes]) -> IndexPlan:
    """What to change in the store so it holds exactly the current files' chunks (module doc).
    `read(path)` gives a file's bytes; an OSError from it skips the file with the reason."""
    files: list[FilePlan] = []
    reads = 0
    for state in current:
        before = previous.get(state.path)
        if before is not None and (before.size, before.mtime_ns) == (state.size, state.mtime_ns):
            files.append(FilePlan(state.path, FileStatus.UNCHANGED))
            continue
        if state.size > MAX_NOTE_BYTES:
            files.append(_skipped(state.path, f"is {state.size:,} bytes, over the {MAX_NOTE_BYTES:,} of a note file"))
            continue
        try:
            reads += 1
            data = read(state.path)
        except OSError as error:
            files.append(_skipped(state.path, f"cannot be read ({error.strerror or error})"))
            continue
        files.append(_file_plan(state, before, data))
    gone = sorted(set(previous) - {state.path for state in current})
    files.extend(FilePlan(path, FileStatus.REMOVED, delete_keys=tuple(previous[path].chunks)) for path in gone)
    return IndexPlan(tuple(files), reads)


def _file_plan(state: FileState, before: IndexedFile | None, data: bytes) -> FilePlan:
    sha256 = hashlib.sha256(data).hexdigest()
    # the size too: a file read while it was being written may not be the size its stat said
    if before is not None and before.sha256 == sha256:
        record = IndexedFile(len(data), state.mtime_ns, sha256, before.chunks)
        return FilePlan(state.path, FileStatus.TOUCHED, record)
    try:
        note = read_note(data, state.path)
    except UnreadableNoteError as error:
        return _skipped(state.path, str(error))
    old = before.chunks if before is not None else {}
    kept = tuple(chunk.key for chunk in note.chunks if old.get(chunk.key) == chunk.digest)
    amend = tuple(chunk for chunk in note.chunks if chunk.key not in kept and _same_text(old.get(chunk.key), chunk))
    stays = {*kept, *(chunk.key for chunk in amend)}
    return FilePlan(
        state.path,
        FileStatus.NEW if before is None else FileStatus.CHANGED,
        IndexedFile(len(data), state.mtime_ns, sha256, {chunk.key: chunk.digest for chunk in note.chunks}),
        delete_keys=tuple(key for key in old if key not in stays),
        add_chunks=tuple(chunk for chunk in note.chunks if chunk.key not in stays),
        kept_keys=kept,
        amend_chunks=amend,
        tags=note.tags,
        lossy=note.lossy,
        title=note.title,
        date=note.date,
        mtime_ns=state.mtime_ns,
        problems=note.problems,
    )


def _same_text(digest: str | None, chunk: NoteChunk) -> bool:
    """Whether the chunk stored under its key (with this digest) holds its text: then only where it
    is moved. An empty digest (a run that stopped, a store found to disagree) is no proof."""
    return bool(digest) and text_fingerprint(digest or "") == text_fingerprint(chunk.digest)


def _skipped(path: str, reason: str) -> FilePlan:
    return FilePlan(path, FileStatus.SKIPPED, reason=reason)
