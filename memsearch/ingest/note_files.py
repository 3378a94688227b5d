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
import stat
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from pathlib import Path

import re2
from pathspec import GitIgnoreSpec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

from memsearch.errors import InvalidInputError, short_repr
from memsearch.ingest.notes import NOTE_READERS, NoteChunk, UnreadableNoteError, read_note, text_fingerprint
from memsearch.ingest.safe_files import (
    Identity,
    RefusedFileError,
    identity,
    kind,
    lstat_beneath,
    open_folder,
    printable,
    quoted,
    read_in_folder,
    read_walked,
    storable,
    untrusted,
)

MAX_NOTE_BYTES = 8 * 1024 * 1024  # a larger "note" is a log or a dump: skipped, with the reason, unread
IGNORE_FILE = ".gitignore"
MAX_IGNORE_BYTES = 1024 * 1024  # a larger .gitignore is no one's hand-kept list: skipped, with the reason


def default_include() -> tuple[str, ...]:
    """What a folder's walk takes when `--include` names nothing: the suffixes that have a reader."""
    return tuple(f"*{suffix}" for suffix in NOTE_READERS)


@dataclass(frozen=True)
class FileState:
    path: str  # absolute, symlinks resolved: the file's identity in the store
    size: int
    mtime_ns: int
    device: int = -1  # with the inode, the file the walk saw at the path: the only one read (-1: none)
    inode: int = -1


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

    @property
    def counts(self) -> dict[str, int]:
        """Files by status, every status present."""
        counts: dict[str, int] = dict.fromkeys(FileStatus, 0)
        for file in self.files:
            counts[file.status] += 1
        return counts


def counts_line(counts: Mapping[str, int]) -> str:
    """'3 new, 1 changed, 2 removed, 6 unchanged' (touched files count as unchanged), and the
    skipped ones when there are: the files part of an index run's summary."""
    unchanged = counts[FileStatus.UNCHANGED] + counts[FileStatus.TOUCHED]
    line = (
        f"{counts[FileStatus.NEW]:,} new, {counts[FileStatus.CHANGED]:,} changed, "
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
    *,
    named: Sequence[str] = (),
    on_held: Callable[[str], None] | None = None,
) -> list[FileState]:
    """The note files under the roots, sorted by path, each once.

    A root that is a file is taken as named, whatever its suffix and the exclude patterns (as
    ripgrep does). In a folder: files matching `include_globs` (gitignore globs against the path
    under the root; `default_include()` when empty), less those ignored by a `.gitignore` of a walked
    folder (deeper ones win; a .gitignore above the root is not read, nor one that is a symlink, as
    git does) or by `exclude_patterns` (gitignore syntax, relative to the root; they win over the
    .gitignore files, so `!keep.md` brings back an ignored file). Patterns match in time linear in
    the path's length, whatever they are (`_pattern`). Hidden files and folders (`.git`,
    `.obsidian`) are skipped, and so are symlinks that lead out of the root, broken ones, folders
    already walked (a link loop), folders that cannot be listed, invalid .gitignore lines, FIFOs,
    sockets and devices, names that are not valid UTF-8 (no store can hold them), and every folder
    or file that another user could have written (`safe_files.untrusted`) unless it is at or under
    one of the `named` paths (the roots the user gave by name). `on_skip(path, reason)` hears of
    each but hidden and ignored ones (the path as valid Unicode, `safe_files.printable`);
    `on_held(path)` of each folder or file the walk could not or would not look into, whose stored
    notes should stay as they are. Each root is walked with its own rules and the result is the
    union. A missing root, or a pattern that is not gitignore syntax, is an `InvalidInputError`
    (its field "include" or "exclude" for a pattern).
    """
    walker = _Walker(
        _spec(include_globs or default_include(), "include"),
        _spec(exclude_patterns, "exclude"),
        named,
        on_skip,
        on_held,
    )
    for root in roots:
        walker.root(Path(root).expanduser())
    return sorted(walker.found.values(), key=lambda state: state.path)


def is_under(path: str, roots: Iterable[str]) -> bool:
    """Whether the path is one of the roots or inside one (all absolute)."""
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def refusal(root: str) -> str | None:
    """Why a walk that is not told the root is named refuses it (it leads elsewhere now, through a
    symlink, or another user could have written it: `safe_files.untrusted`), or None; None too for
    a root that is not there. For `index --roots`: folders and files under it are judged by walks."""
    try:
        path = str(Path(root).resolve(strict=True))
        info = lstat_beneath(path)
    except (OSError, RuntimeError, ValueError):
        return None
    return _leads_to(path) if path != os.path.abspath(root) else untrusted(info)


def _leads_to(path: str) -> str:
    return f"leads to {quoted(path)} now, through a symlink"


_PATTERN_ERRORS = (ValueError, TypeError, re.error, re2.error)


def _pattern(line: str) -> GitIgnoreSpecPattern:
    """One gitignore line as pathspec reads it, its regular expression run by RE2, which matches in
    time linear in the path's length: Python's re backtracks, and `*a*a*a*a*a*a*a*a*b` took it
    hours against a long name."""
    with warnings.catch_warnings():  # re's FutureWarning about `[[` is no news to the user of a .gitignore
        warnings.simplefilter("ignore", FutureWarning)
        parsed = GitIgnoreSpecPattern(line)
    if parsed.regex is None:  # a comment or a blank line
        return parsed
    return GitIgnoreSpecPattern(re2.compile(parsed.regex.pattern), parsed.include)


def _matcher(patterns: Sequence[GitIgnoreSpecPattern]) -> GitIgnoreSpec:
    """The patterns as one RE2 set (pathspec's re2 backend: one pass over a path for them all) or,
    when RE2 cannot fit the set in its memory budget, each pattern's RE2 expression in turn."""
    try:
        return GitIgnoreSpec(patterns, backend="re2")
    except re2.error:
        return GitIgnoreSpec(patterns, backend="simple")


def _spec(patterns: Sequence[str], name: str) -> GitIgnoreSpec:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(_pattern(pattern))
        except _PATTERN_ERRORS:
            shown = short_repr(pattern, 60) or "one of them"
            raise InvalidInputError(f"has a pattern that is not valid gitignore syntax: {shown}", field=name) from None
    return _matcher(compiled)


_UNLESS_NAMED = "read only when named as a root; what was indexed from it is kept"
Layers = tuple[tuple[str, GitIgnoreSpec], ...]  # (folder under the root, its .gitignore), root first
Subfolder = tuple[str, str, Layers, Identity]  # its path, its path under the root with "/", layers, identity


class _Walker:
    """One walk: its rules, what it found, and whom it tells what it skipped (`walk`)."""

    def __init__(
        self,
        include: GitIgnoreSpec,
        exclude: GitIgnoreSpec,
        named: Sequence[str],
        on_skip: Callable[[str, str], None] | None,
        on_held: Callable[[str], None] | None,
    ) -> None:
        self.include, self.exclude, self.named = include, exclude, tuple(named)
        self.on_skip = on_skip or (lambda path, reason: None)
        self.on_held = on_held or (lambda path: None)
        self.found: dict[str, FileState] = {}

    def skip(self, path: str, reason: str, *, held: bool = False) -> None:
        self.on_skip(printable(path), reason)
        if held:
            self.on_held(path)

    def refused(self, path: str, info: os.stat_result) -> bool:
        """Whether the folder or file is passed over as another user's to write; says why."""
        if is_under(path, self.named) or (why := untrusted(info)) is None:
            return False
        self.skip(path, f"{why}: {_UNLESS_NAMED}", held=True)
        return True

    def root(self, given: Path) -> None:
        try:
            path = str(given.resolve(strict=True))
            info = lstat_beneath(path)
        except (OSError, RuntimeError, ValueError):  # ValueError: a NUL character
            raise InvalidInputError(f"{quoted(str(given))}: no such file or folder") from None
        if not storable(path):
            raise InvalidInputError(f"{quoted(path)}: the name is not valid UTF-8, which no store can hold")
        if path != os.path.abspath(given) and not is_under(path, self.named):  # a remembered root is stored resolved
            self.skip(os.path.abspath(given), f"{_leads_to(path)}: {_UNLESS_NAMED}", held=True)
            return
        if stat.S_ISDIR(info.st_mode):
            self.folder(path, identity(info))
        elif stat.S_ISREG(info.st_mode):
            self.add(path, info)
        else:
            raise InvalidInputError(f"{quoted(str(given))} is neither a file nor a folder")

    def add(self, path: str, info: os.stat_result) -> None:
        if not self.refused(path, info):
            self.found.setdefault(path, FileState(path, info.st_size, info.st_mtime_ns, info.st_dev, info.st_ino))

    def folder(self, root: str, walked: Identity) -> None:
        """The files under the folder `root`, each subfolder opened without following a link and
        listed only if it is the folder its parent's listing showed."""
        visited = {walked}
        stack: list[Subfolder] = [(root, "", (), walked)]
        while stack:
            path, relative, layers, expected = stack.pop()
            try:
                descriptor = open_folder(path)
            except OSError as error:
                reason = str(error) if isinstance(error, RefusedFileError) else f"cannot be listed ({error.strerror})"
                self.skip(path, reason, held=True)
                continue
            try:
                subfolders = self.listing(descriptor, root, (path, relative, layers, expected), visited)
            finally:
                os.close(descriptor)
            stack.extend(reversed(subfolders))  # walked in name order

    def listing(self, descriptor: int, root: str, folder: Subfolder, visited: set[Identity]) -> list[Subfolder]:
        path, relative, layers, expected = folder
        info = os.fstat(descriptor)
        if identity(info) != expected:
            self.skip(path, "was replaced by another folder while it was walked; not read", held=True)
            return []
        if self.refused(path, info):
            return []
        try:
            with os.scandir(descriptor) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError as error:
            self.skip(path, f"cannot be listed ({error.strerror or error})", held=True)
            return []
        layers = self.with_ignore_file(descriptor, path, relative, layers, entries)
        subfolders: list[Subfolder] = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            entry_path, name = os.path.join(path, entry.name), f"{relative}{entry.name}"
            found = self.entry(entry, entry_path, root)
            if found is None:
                continue
            target, info = found
            if stat.S_ISDIR(info.st_mode):
                if self.ignored(f"{name}/", layers):
                    continue
                if identity(info) in visited:
                    self.skip(entry_path, "leads to a folder already walked")
                    continue
                visited.add(identity(info))
                subfolders.append((target, f"{name}/", layers, identity(info)))
            elif self.include.match_file(name) and not self.ignored(name, layers):
                if stat.S_ISREG(info.st_mode):
                    self.add(target, info)
                else:
                    self.skip(entry_path, f"is {kind(info)}, not a regular file")
        return subfolders

    def entry(self, entry: os.DirEntry[str], path: str, root: str) -> tuple[str, os.stat_result] | None:
        """What a listed name is (its path, a symlink's resolved, and its lstat), or None if skipped."""
        if not storable(entry.name):
            self.skip(path, "has a name that is not valid UTF-8, which no store can hold; rename it to index it")
            return None
        try:
            info = entry.stat(follow_symlinks=False)  # relative to the open folder: no link followed
        except OSError as error:
            self.skip(path, f"cannot be read ({error.strerror or error})", held=True)
            return None
        if not stat.S_ISLNK(info.st_mode):
            return path, info
        try:
            target = str(Path(path).resolve(strict=True))
        except (OSError, RuntimeError):
            self.skip(path, "is a broken symlink")
            return None
        if not is_under(target, [root]):
            self.skip(path, f"is a symlink out of {root}")
            return None
        if not storable(target):
            self.skip(path, "leads to a name that is not valid UTF-8, which no store can hold")
            return None
        try:
            return target, lstat_beneath(target)
        except OSError as error:
            self.skip(path, f"cannot be read ({error.strerror or error})")
            return None

    def with_ignore_file(
        self, descriptor: int, folder: str, relative: str, layers: Layers, entries: list[os.DirEntry[str]]
    ) -> Layers:
        entry = next((entry for entry in entries if entry.name == IGNORE_FILE), None)
        if entry is None:
            return layers
        path = os.path.join(folder, IGNORE_FILE)
        try:
            info = entry.stat(follow_symlinks=False)  # (a link is refused by the read, whatever its mode)
            if stat.S_ISREG(info.st_mode) and self.refused(path, info):
                return layers
            data = read_in_folder(descriptor, IGNORE_FILE, MAX_IGNORE_BYTES)
        except RefusedFileError as error:
            self.skip(path, f"{error}; its patterns do not apply")
            return layers
        except OSError as error:
            self.skip(path, f"cannot be read ({error.strerror or error})")
            return layers
        patterns = []
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
            try:
                patterns.append(_pattern(line))
            except _PATTERN_ERRORS:  # as git does
                self.skip(f"{path}:{number}", "is not a valid gitignore pattern; the file's other lines apply")
        return (*layers, (relative, _matcher(patterns)))

    def ignored(self, path: str, layers: Layers) -> bool:
        """Whether git would ignore the path (a folder's ends in "/"), the user's patterns last."""
        ignored = False
        for folder, spec in layers:
            verdict = spec.check_file(path[len(folder) :]).include
            ignored = ignored if verdict is None else verdict
        verdict = self.exclude.check_file(path).include
        return ignored if verdict is None else bool(verdict)


def walked_reader(states: Iterable[FileState]) -> Callable[[str], bytes]:
    """The `read` of a plan of these walked files: each path opens only the file the walk saw there
    (`safe_files.read_walked`), and no more than a note's size limit of it is read."""
    walked = {state.path: (state.device, state.inode) for state in states}
    return lambda path: read_walked(path, walked[path], MAX_NOTE_BYTES)


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
        except RefusedFileError as error:
            files.append(_skipped(state.path, str(error)))
            continue
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
