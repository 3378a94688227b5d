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
        self.path: Path | str = resolve_db_path(db)  # a SQLite path or a postgresql:// URL
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
