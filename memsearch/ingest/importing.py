"""Adding memories and importing texts of them: the checks that come before anything is embedded
(keys given twice or stored already, parents that name nothing), near-duplicates left out by a
profile's ingest dedup threshold, and one transaction for all of it.

The functions work on a `memsearch.ingest.Library` (`memsearch.api.Memsearch` is one): its store
opens and its encoder loads on first use, so a batch that fails its checks loads no model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import TYPE_CHECKING

from memsearch.arguments import check_threshold
from memsearch.choices import IMPORT_FORMATS
from memsearch.embedding.base import Progress
from memsearch.errors import DuplicateKeyError, ImportLineError, InvalidInputError, StoreNotFoundError
from memsearch.ingest import Library
from memsearch.ingest.embed import embed_memories, near_duplicates, other_model_vectors, with_chunks
from memsearch.models import NewMemory
from memsearch.outcomes import KIND_NAMES, AddOutcome, ImportOutcome
from memsearch.timeutil import utc_now

if TYPE_CHECKING:
    from memsearch.ingest.records import ParsedMemories
    from memsearch.profiles import Profile
    from memsearch.store.base import Store


def existing_store(target: Library) -> Store | None:
    """The store if there is one yet: checks before a first import must not create it (and a new
    PostgreSQL database has no schema until the import writes)."""
    if isinstance(target.path, Path) and not target.path.exists():
        return None
    try:
        return target.store()
    except StoreNotFoundError:
        return None


def add_memories(
    target: Library,
    memories: Sequence[NewMemory],
    *,
    replace: bool,
    profile: Profile | str | None,
    progress: Progress | None,
) -> list[AddOutcome]:
    """Embed and store the (checked, non-empty) memories in one transaction (see `Memsearch.add_many`)."""
    keys = [m.key for m in memories if m.key is not None]
    if len(keys) != len(set(keys)):
        duplicate = next(key for key in keys if keys.count(key) > 1)
        raise InvalidInputError(f"key {duplicate!r} is given twice")
    dedup = ingest_dedup(profile)
    store = target.store(create=True)
    if not replace:
        for key in keys:
            existing = store.id_for_key(key)
            if existing is not None:
                raise DuplicateKeyError(f"a memory with key {key!r} exists already (id {existing})")
    encoder = target.encoder()
    store.check_model(encoder.info)  # before the slow part, not after it
    memories = [with_chunks(memory) for memory in memories]
    vectors, view_vectors = embed_memories(encoder, memories, progress)
    duplicates = near_duplicates(store, memories, vectors, dedup) if dedup is not None else {}
    kept = [i for i in range(len(memories)) if i not in duplicates]
    batch_position = {old: new for new, old in enumerate(kept)}
    kept_view_vectors = {batch_position[i]: views for i, views in view_vectors.items() if i in batch_position}
    stored = store.insert(
        [memories[i] for i in kept],
        vectors[kept],
        encoder.info,
        utc_now(),
        replace=replace,
        view_vectors=kept_view_vectors,
        model_vectors=other_model_vectors(target, store, [memories[i].text for i in kept]),
    )
    new_ids = dict(zip(kept, stored, strict=True))
    outcomes = []
    for position in range(len(memories)):
        if position in duplicates:
            (in_batch, ref), similarity = duplicates[position]
            target_id = new_ids[ref] if in_batch else ref
            outcomes.append(
                AddOutcome(target_id, stored=False, duplicate_of=target_id, similarity=similarity, threshold=dedup)
            )
        else:
            outcomes.append(AddOutcome(new_ids[position]))
    return outcomes


def ingest_dedup(profile: Profile | str | None) -> float | None:
    """The profile's ingest dedup threshold; no profile given dedups nothing."""
    if profile is None:
        return None
    from memsearch.profiles import Profile, load_profile

    threshold = (profile if isinstance(profile, Profile) else load_profile(profile or "default")).ingest_dedup
    if threshold is not None:
        check_threshold("dedup", threshold)
    return threshold


def import_text(
    target: Library,
    content: str,
    *,
    source: str,
    fmt: str,
    sessions: bool,
    facets: bool,
    replace: bool,
    profile: Profile | str | None,
    conversation: str | None,
    progress: Progress | None,
) -> ImportOutcome:
    """Import the memories or conversations of a text (arguments checked; see `Memsearch.import_text`)."""
    from memsearch.ingest.conversations import with_facets
    from memsearch.ingest.records import ParsedMemories, parse_memories

    if not isinstance(fmt, str) or fmt not in IMPORT_FORMATS:
        raise InvalidInputError(f"unknown import format {fmt!r} (choose from {', '.join(IMPORT_FORMATS)})", field="fmt")
    if conversation is not None and fmt != "chat":
        raise InvalidInputError("names a chat's conversation; other formats name their own", field="conversation")
    if fmt == "jsonl":
        parsed = parse_memories(content, source)
        check_parents(target, parsed, source)
    else:
        memories = conversation_memories(content, source, fmt, sessions, conversation)
        parsed = ParsedMemories(list(range(1, len(memories) + 1)), memories, "item")
    memories, numbers = parsed.memories, parsed.numbers
    if not memories:
        return ImportOutcome(source, {kind: 0 for kind in KIND_NAMES}, ignored=parsed.ignored, repeats=parsed.repeats)
    if not replace and (store := existing_store(target)) is not None:
        check_new_keys(store, parsed, source)
    if facets:
        memories = with_facets(memories, target.encoder())
    outcomes = add_memories(target, memories, replace=replace, profile=profile, progress=progress)
    stored = [m for m, o in zip(memories, outcomes, strict=True) if o.stored]
    return ImportOutcome(
        source,
        {kind: sum(m.kind == kind for m in stored) for kind in KIND_NAMES},
        [(number, o) for number, o in zip(numbers, outcomes, strict=True) if not o.stored],
        parsed.unit,
        parsed.ignored,
        parsed.repeats,
    )


def conversation_memories(
    content: str, source: str, fmt: str, sessions: bool, conversation: str | None
) -> list[NewMemory]:
    """The memories of a `chat`, `locomo` or `longmemeval` text: a chat's conversation is
    `conversation`, else the source's file stem."""
    from memsearch.ingest.conversations import conversation_memories as memories_of
    from memsearch.ingest.readers import read_chat, read_locomo, read_longmemeval

    if fmt == "chat":
        conversations = [read_chat(content, source, conversation or PurePath(source).stem or source)]
    else:
        conversations = (read_locomo if fmt == "locomo" else read_longmemeval)(content, source)
    return [m for c in conversations for m in memories_of(c, sessions=sessions)]


def check_parents(target: Library, parsed: ParsedMemories, source: str) -> None:
    """A `parent_key` must name a memory earlier in the file or already stored."""
    earlier: set[str] = set()
    unit = parsed.unit
    for memory, number in zip(parsed.memories, parsed.numbers, strict=True):
        parent = memory.parent_key
        if parent is not None and parent not in earlier and not _stored_key(target, parent):
            problem = f"parent_key {parent!r} names no memory stored or on an earlier {unit}"
            raise ImportLineError(source, number, problem, unit=unit)
        if memory.key is not None:
            earlier.add(memory.key)


def _stored_key(target: Library, key: str) -> bool:
    store = existing_store(target)
    return store is not None and store.id_for_key(key) is not None


def check_new_keys(store: Store, parsed: ParsedMemories, source: str) -> None:
    """A key of the import that a stored memory has already fails with its line (or item) number."""
    for memory, number in zip(parsed.memories, parsed.numbers, strict=True):
        existing = store.id_for_key(memory.key) if memory.key is not None else None
        if existing is not None:
            raise DuplicateKeyError(
                f"{source}, {parsed.unit} {number}: a memory with key {memory.key!r} exists already (id {existing}); "
                "nothing from this file was stored"
            )
