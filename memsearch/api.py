"""The library's front door. The CLI is a thin layer over this class."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.consolidate import ConsolidationPlan, plan
from memsearch.embedding import Encoder, Progress, load_encoder, resolve_model
from memsearch.errors import InvalidInputError
from memsearch.models import VECTOR_VIEWS, Memory, NewMemory, check_range, normalise_tags
from memsearch.paths import resolve_db_path
from memsearch.profiles import Profile
from memsearch.retrieval.pipeline import (
    SearchOutcome,
    SearchRequest,
    encoder_query_vector,
    resolve_profile,
    run_search,
    with_tau,
)
from memsearch.store import EVERYTHING, Scope, Store, open_store
from memsearch.timeutil import utc_now

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class AddOutcome:
    """What became of one memory given to `add`: stored under `id`, or not stored because it is a
    near-duplicate of memory `duplicate_of` (then `id` is that memory's)."""

    id: int
    stored: bool = True
    duplicate_of: int | None = None
    similarity: float | None = None


def embed_memories(
    encoder: Encoder, memories: Sequence[NewMemory], progress: Progress | None = None
) -> tuple[np.ndarray, dict[int, dict[str, np.ndarray]]]:
    """Vectors of the memories' texts and of their vector views, each distinct text embedded once
    (a turn's text is also its predecessor's `next` view, for instance). A view whose text is the
    memory's own gets no vector of its own (the memory's vector stands for it), except a facet,
    whose route searches only the memories that have it."""
    texts = [m.text for m in memories]
    view_texts = {
        (i, view): text
        for i, m in enumerate(memories)
        for view, text in m.views.items()
        if view in VECTOR_VIEWS and (text != m.text or view.startswith("facet_"))
    }
    unique = list(dict.fromkeys([*texts, *view_texts.values()]))
    encoded = encoder.encode(unique, progress=progress)
    row = {text: n for n, text in enumerate(unique)}
    view_vectors: dict[int, dict[str, np.ndarray]] = {}
    for (i, view), text in view_texts.items():
        view_vectors.setdefault(i, {})[view] = encoded[row[text]]
    return encoded[[row[text] for text in texts]], view_vectors


def near_duplicates(
    store: Store, memories: Sequence[NewMemory], vectors: np.ndarray, threshold: float
) -> dict[int, tuple[tuple[bool, int], float]]:
    """Batch position → ((in batch?, stored id or earlier batch position), cosine) for each memory
    whose best match, among stored memories and earlier kept ones of the batch, reaches `threshold`.
    A memory being replaced by key is not its own duplicate."""
    replaced = {store.id_for_key(m.key) for m in memories if m.key is not None} - {None}
    stored_best = store.nearest(vectors, exclude={i for i in replaced if i is not None})
    found: dict[int, tuple[tuple[bool, int], float]] = {}
    kept: list[int] = []
    for position, stored in enumerate(stored_best):
        best: tuple[tuple[bool, int], float] | None = ((False, stored[0]), stored[1]) if stored else None
        for earlier in kept:
            similarity = float(vectors[earlier] @ vectors[position])
            if best is None or similarity > best[1]:
                best = ((True, earlier), similarity)
        if best is not None and best[1] >= threshold:
            found[position] = best
        else:
            kept.append(position)
    return found


class Memsearch:
    """A memsearch store with its encoder.

    >>> ms = Memsearch("/tmp/notes.db")
    >>> ms.add(NewMemory("The deploy key lives in 1Password", tags=("ops",)))
    >>> ms.search(SearchRequest("where is the deploy key?", k=3)).results

    The store opens on first use (created by the first write); the encoder loads on the first
    call that embeds, so lexical searches and reads never load a model.
    """

    def __init__(
        self,
        db: str | os.PathLike[str] | None = None,
        *,
        model: str | None = None,
        encoder: Encoder | None = None,
        encoder_factory: Callable[[], Encoder] | None = None,
    ) -> None:
        self.path: Path = resolve_db_path(db)
        self._model = model
        self._encoder = encoder
        self._encoder_factory = encoder_factory
        self._store: Store | None = None

    # -- plumbing -------------------------------------------------------------------------

    def store(self, *, create: bool = False) -> Store:
        if self._store is None:
            self._store = open_store(self.path, create=create)
        return self._store

    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = (
                self._encoder_factory() if self._encoder_factory else load_encoder(resolve_model(self._model))
            )
        return self._encoder

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> Memsearch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writes ---------------------------------------------------------------------------

    def add(self, memory: NewMemory, *, replace: bool = False, dedup: float | None = None) -> AddOutcome:
        return self.add_many([memory], replace=replace, dedup=dedup)[0]

    def add_many(
        self,
        memories: Sequence[NewMemory],
        *,
        replace: bool = False,
        dedup: float | None = None,
        progress: Progress | None = None,
    ) -> list[AddOutcome]:
        """Embed and store all memories in one transaction: all of them are stored, or none.

        With `dedup`, a memory whose cosine with a stored one (or an earlier one of the batch)
        reaches it is not stored and is reported as that memory's duplicate.
        """
        if not memories:
            return []
        keys = [m.key for m in memories if m.key is not None]
        if len(keys) != len(set(keys)):
            duplicate = next(key for key in keys if keys.count(key) > 1)
            raise InvalidInputError(f"key {duplicate!r} is given twice")
        if dedup is not None:
            check_range("dedup threshold", dedup, 0.0, 1.0)
        encoder = self.encoder()
        store = self.store(create=True)
        store.check_model(encoder.info)  # before the slow part, not after it
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
        )
        new_ids = dict(zip(kept, stored, strict=True))
        outcomes = []
        for position in range(len(memories)):
            if position in duplicates:
                (in_batch, ref), similarity = duplicates[position]
                target = new_ids[ref] if in_batch else ref
                outcomes.append(AddOutcome(target, stored=False, duplicate_of=target, similarity=similarity))
            else:
                outcomes.append(AddOutcome(new_ids[position]))
        return outcomes

    def delete(self, ids: Sequence[int]) -> None:
        self.store().delete(ids)

    def reindex(self, *, progress: Progress | None = None) -> int:
        """Re-embed every memory with the current model; returns how many."""
        store = self.store()
        encoder = self.encoder()
        rows = list(store.iter_texts())
        views = store.views_with_vectors()
        unique = list(dict.fromkeys([*(text for _, text in rows), *(text for _, _, text in views)]))
        encoded = encoder.encode(unique, progress=progress)
        position = {text: n for n, text in enumerate(unique)}
        store.replace_vectors(
            [memory_id for memory_id, _ in rows],
            encoded[[position[text] for _, text in rows]],
            encoder.info,
            view_vectors={(memory_id, view): encoded[position[text]] for memory_id, view, text in views},
        )
        return len(rows)

    # -- reads ----------------------------------------------------------------------------

    def get(self, ref: int | str) -> Memory:
        """A memory by id (an int) or key (a str)."""
        store = self.store()
        return store.get(ref) if isinstance(ref, int) else store.get_by_key(ref)

    def list(self, scope: Scope = EVERYTHING, *, limit: int | None = None, offset: int = 0) -> list[Memory]:
        return self.store().list(scope, limit=limit, offset=offset)

    def stats(self) -> dict[str, Any]:
        return self.store().stats()

    def search(
        self, request: SearchRequest, *, profile: Profile | str | None = None, tau_days: float | None = None
    ) -> SearchOutcome:
        return self.search_many([request], profile=profile, tau_days=tau_days)[0]

    def search_many(
        self,
        requests: Iterable[SearchRequest],
        *,
        profile: Profile | str | None = None,
        tau_days: float | None = None,
    ) -> list[SearchOutcome]:
        """Run several searches in this process, loading the encoder at most once.

        Each search records the access on the memories it returns (last_accessed_at,
        access_count) unless the request has `as_of` or `touch=False`.
        """
        store = self.store()
        chosen = with_tau(resolve_profile(profile), tau_days)
        embed = encoder_query_vector(self.encoder, store)
        outcomes = []
        for request in requests:
            outcome = run_search(store, request, embed, chosen)
            if request.records_access:
                store.touch([c.id for c in outcome.results], utc_now())
            outcomes.append(outcome)
        return outcomes

    # -- curation ---------------------------------------------------------------------------

    def update(self, ref: int | str, **changes: object) -> Memory:
        """Change importance, priority, pinned, project, namespace, memory_score or tags of a memory."""
        memory = self.get(ref)
        checked: dict[str, object] = {}
        for name, value in changes.items():
            match name:
                case "importance":
                    checked[name] = check_range(name, value, 0, 1)  # type: ignore[arg-type]
                case "memory_score":  # None goes back to the score derived from importance and use
                    checked[name] = None if value is None else check_range(name, value, 0, 1)  # type: ignore[arg-type]
                case "priority":
                    checked[name] = check_range(name, value, 1, 2)  # type: ignore[arg-type]
                case "pinned":
                    checked[name] = bool(value)
                case "tags":
                    checked[name] = normalise_tags(value)  # type: ignore[arg-type]
                case "project" | "namespace":
                    if value is not None and (not isinstance(value, str) or not value.strip()):
                        raise InvalidInputError(f"{name} must be a non-empty string")
                    checked[name] = value
                case _:
                    raise InvalidInputError(f"cannot set {name!r}")
        return self.store().update(memory.id, checked)

    def consolidate(
        self, *, duplicate: float = 0.95, related: float = 0.80, dry_run: bool = False
    ) -> ConsolidationPlan:
        """Mark older near-duplicates (cosine ≥ duplicate) superseded by the newest one and group
        related memories (cosine ≥ related); every earlier mark is replaced."""
        check_range("duplicate threshold", duplicate, 0, 1)
        check_range("related threshold", related, 0, 1)
        store = self.store()
        ids, matrix = store.all_vectors()
        order = [m.id for m in sorted(store.list(), key=lambda m: (m.created_at, m.id))]
        result = plan(ids, matrix, order, duplicate, related)
        if not dry_run:
            store.set_consolidation(result.superseded, result.groups)
        return result

    # -- TEMPORARY (replaced by the arch branch) --
    # Minimal versions of the agreed service methods the front ends of the serve branch call.

    def add(  # type: ignore[no-redef]  # noqa: F811
        self,
        memory: NewMemory,
        *,
        replace: bool = False,
        profile: str | None = None,
        dedup: float | None = None,
    ) -> AddOutcome:
        if dedup is None and profile is not None:
            from memsearch.profiles import load_profile

            dedup = load_profile(profile).ingest_dedup
        return self.add_many([memory], replace=replace, dedup=dedup)[0]

    def import_text(
        self,
        content: str,
        *,
        source: str,
        fmt: str = "jsonl",
        sessions: bool = True,
        facets: bool = False,
        replace: bool = False,
        profile: str | None = None,
        conversation: str | None = None,
        progress: Progress | None = None,
    ) -> ImportOutcome:
        if fmt == "jsonl":
            from memsearch.cli.app import parse_memories

            lines, memories = parse_memories(content, source)
        else:
            memories = _conversation_memories_of_text(content, fmt, sessions, conversation or source)
            lines = list(range(1, len(memories) + 1))
        if facets and memories:
            from memsearch.conversations import with_facets

            memories = with_facets(memories, self.encoder())
        dedup = None
        if profile is not None:
            from memsearch.profiles import load_profile

            dedup = load_profile(profile).ingest_dedup
        outcomes = self.add_many(memories, replace=replace, dedup=dedup, progress=progress) if memories else []
        counts = {kind: 0 for kind in ("note", "turn", "session")}
        for memory, outcome in zip(memories, outcomes, strict=True):
            if outcome.stored:
                counts[memory.kind] += 1
        duplicates = [(line, o) for line, o in zip(lines, outcomes, strict=True) if not o.stored]
        return ImportOutcome(source, counts, duplicates, [o.id for o in outcomes if o.stored])

    def get_many(self, refs: Sequence[int | str], *, by_key: bool = False) -> list[Memory]:
        return [self.get(str(ref) if by_key else ref) for ref in refs]

    def delete(self, refs: Sequence[int | str]) -> list[int]:  # type: ignore[no-redef]  # noqa: F811
        """Delete memories by id or key: all of them, or none if any is not found."""
        ids = list(dict.fromkeys(self.get(ref).id for ref in refs))
        self.store().delete(ids)
        return ids

    def timeline(self, ref: int | str, *, before: int = 5, after: int = 5) -> Timeline:
        memory = self.get(ref)
        return Timeline(memory.id, self.store().around(memory, before, after))


@dataclass(frozen=True)
class ImportOutcome:
    """TEMPORARY (replaced by the arch branch)."""

    source: str
    counts: dict[str, int]
    duplicates: list[tuple[int, AddOutcome]]
    ids: list[int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "counts": dict(self.counts),
            "ids": list(self.ids),
            "duplicates": [
                {"line": line, "duplicate_of": o.duplicate_of, "similarity": o.similarity}
                for line, o in self.duplicates
            ],
        }


@dataclass(frozen=True)
class Timeline:
    """TEMPORARY (replaced by the arch branch)."""

    current: int
    memories: list[Memory]

    def to_dict(self) -> dict[str, Any]:
        return {
            "current": self.current,
            "memories": [{**m.to_dict(), "current": m.id == self.current} for m in self.memories],
        }


def _conversation_memories_of_text(content: str, fmt: str, sessions: bool, name: str) -> list[NewMemory]:
    """TEMPORARY (replaced by the arch branch): the memories of a chat JSONL, LoCoMo or LongMemEval text."""
    import tempfile

    from memsearch.conversations import conversation_memories
    from memsearch.eval.datasets import load_chat_jsonl, load_locomo, load_longmemeval

    if fmt not in ("chat", "locomo", "longmemeval"):
        raise InvalidInputError(f"must be one of jsonl, chat, locomo, longmemeval, not {fmt!r}", field="fmt")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "import.json"
        path.write_text(content, encoding="utf-8")
        if fmt == "chat":
            conversations = [load_chat_jsonl(path, conversation_id=name)]
        else:
            loader = load_locomo if fmt == "locomo" else load_longmemeval
            conversations = [conversation for conversation, _ in loader(path)]
    return [m for c in conversations for m in conversation_memories(c, sessions=sessions)]
