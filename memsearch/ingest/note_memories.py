"""A note file's sections as memories, and what keeps the store true to the files: the memory a
section becomes (its titled text, the front matter's tags and title, where it is, its time), the
stored memory a section keeps or takes over (`taken_over`, `restamped`: amended in place rather than
embedded again), and the check of a store against the sections its state records
(`checked_records`). `indexing` applies them (see its module doc).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memsearch.ingest.note_files import FilePlan, IndexedFile, IndexPlan, is_under
from memsearch.ingest.notes import NoteChunk, text_fingerprint
from memsearch.models import Memory, NewMemory
from memsearch.sections import key_path
from memsearch.timeutil import EARLIEST, LATEST, to_iso, utc_now

if TYPE_CHECKING:
    from memsearch.store.base import Store


def file_time(mtime_ns: int) -> datetime:
    """A file's modification time as a memory's time (kept within the calendar memsearch takes)."""
    try:
        moment = datetime.fromtimestamp(mtime_ns / 1e9, UTC)
    except (OverflowError, OSError, ValueError):  # a time the platform cannot show
        return utc_now()
    return min(max(moment, EARLIEST), LATEST)


def chunk_memory(file: FilePlan, chunk: NoteChunk) -> NewMemory:
    """A chunk's memory: the titled text, the front matter's tags, where it is, and its time (the
    front matter's date, else the file's modification time)."""
    metadata: dict[str, Any] = {
        "path": file.path,
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
        "trail": list(chunk.trail),
    }
    if file.title is not None:
        metadata["title"] = file.title
    if file.date is not None:
        metadata["date"] = to_iso(file.date)
    if file.lossy:
        metadata["lossy"] = True
    created = file.date or file_time(file.mtime_ns)
    return NewMemory(chunk.titled_text, key=chunk.key, tags=file.tags, metadata=metadata, created_at=created)


def chunk_memories(file: FilePlan) -> list[NewMemory]:
    """The memories of a file's chunks to add."""
    return [chunk_memory(file, chunk) for chunk in file.add_chunks]


def restamped(file: FilePlan, chunk: NoteChunk, stored: Memory) -> dict[str, Any]:
    """What to change of a stored memory that a chunk of the same text takes over: its key, where
    it is, its tags and its time. A chunk under its own key keeps its time (only its place moved)
    unless the front matter dates it (or dated it); one taking over another key's memory is new
    there and takes its file's time."""
    new = chunk_memory(file, chunk)
    changes: dict[str, Any] = {"key": new.key, "metadata": dict(new.metadata), "tags": new.tags}
    if new.key != stored.key or file.date is not None or "date" in stored.metadata:
        changes["created_at"] = new.created_at
    return {name: value for name, value in changes.items() if getattr(stored, name) != value}


def taken_over(store: Store, the_plan: IndexPlan) -> dict[str, str]:
    """For each added chunk whose text a stored chunk the plan deletes has, that chunk's key (each
    taken over once): it moved to another file, its file was renamed, or it was stored under a
    position key of memsearch before identity keys. Such a memory is amended in place, never
    embedded again. Read before anything is written (a dry run reports the same)."""
    texts = {chunk.titled_text for chunk in the_plan.add_chunks}
    keyed = {key: memory_id for key in the_plan.delete_keys if (memory_id := store.id_for_key(key)) is not None}
    stored = store.get_many(list(keyed.values())) if keyed and texts else {}
    by_text: dict[str, list[str]] = {}
    for key, memory_id in keyed.items():
        if memory_id in stored and stored[memory_id].text in texts:
            by_text.setdefault(stored[memory_id].text, []).append(key)
    takeovers = {}
    for chunk in the_plan.add_chunks:
        if keys := by_text.get(chunk.titled_text):
            takeovers[chunk.key] = keys.pop(keys.index(chunk.key) if chunk.key in keys else 0)  # its own first
    return takeovers


def checked_records(
    records: Mapping[str, IndexedFile],
    stored: Mapping[str, str],
    every_record: Mapping[str, IndexedFile],
    scope: Sequence[str],
) -> tuple[dict[str, IndexedFile], set[str]]:
    """The records of a run's files as the store holds them (`stored`: each note key → its text's
    content_hash), and the files found to disagree. A chunk the store lacks, or holds with another
    text, loses its digest, so it is written anew; a note key under the run's roots that no record
    names (`every_record`) joins its file's record, so it is deleted. Those files are read again."""
    files = dict(records)
    named = {key for record in every_record.values() for key in record.chunks}
    strays: dict[str, list[str]] = {}
    for key in stored:
        path = key_path(key)
        if key not in named and path is not None and is_under(path, scope):
            strays.setdefault(path, []).append(key)
    repaired = set()
    for path in sorted({*records, *strays}):
        record = records.get(path)
        if record is None and path in every_record:
            continue  # another run's file (held back): left as it is
        chunks = dict(record.chunks) if record is not None else {}
        wrong = {key for key, digest in chunks.items() if digest and not _holds(stored, key, digest)}
        if wrong or path in strays:
            chunks = {key: "" if key in wrong else digest for key, digest in chunks.items()}
            chunks |= dict.fromkeys(strays.get(path, ()), "")
            files[path] = IndexedFile(-1, -1, "", chunks)
            repaired.add(path)
    return files, repaired


def _holds(stored: Mapping[str, str], key: str, digest: str) -> bool:
    """Whether the store holds the key with the text its digest says."""
    return key in stored and stored[key].startswith(text_fingerprint(digest))
