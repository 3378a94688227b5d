"""The library's front door. The CLI is a thin layer over this class."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from memsearch.embedding import Encoder, Progress, load_encoder, resolve_model
from memsearch.errors import InvalidInputError
from memsearch.models import Memory, NewMemory
from memsearch.paths import resolve_db_path
from memsearch.retrieval.pipeline import (
    DEFAULT_PROFILE,
    Profile,
    SearchOutcome,
    SearchRequest,
    encoder_query_vector,
    run_search,
    with_tau,
)
from memsearch.store import EVERYTHING, Scope, SQLiteStore
from memsearch.timeutil import utc_now


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
        self._store: SQLiteStore | None = None

    # -- plumbing -------------------------------------------------------------------------

    def store(self, *, create: bool = False) -> SQLiteStore:
        if self._store is None:
            self._store = SQLiteStore.open(self.path, create=create)
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

    def add(self, memory: NewMemory, *, replace: bool = False) -> int:
        return self.add_many([memory], replace=replace)[0]

    def add_many(
        self, memories: Sequence[NewMemory], *, replace: bool = False, progress: Progress | None = None
    ) -> list[int]:
        """Embed and store all memories in one transaction: all of them are stored, or none."""
        if not memories:
            return []
        keys = [m.key for m in memories if m.key is not None]
        if len(keys) != len(set(keys)):
            duplicate = next(key for key in keys if keys.count(key) > 1)
            raise InvalidInputError(f"key {duplicate!r} is given twice")
        encoder = self.encoder()
        store = self.store(create=True)
        store.check_model(encoder.info)  # before the slow part, not after it
        vectors = encoder.encode([m.text for m in memories], progress=progress)
        return store.insert(memories, vectors, encoder.info, utc_now(), replace=replace)

    def delete(self, ids: Sequence[int]) -> None:
        self.store().delete(ids)

    def reindex(self, *, progress: Progress | None = None) -> int:
        """Re-embed every memory with the current model; returns how many."""
        store = self.store()
        encoder = self.encoder()
        rows = list(store.iter_texts())
        vectors = encoder.encode([text for _, text in rows], progress=progress)
        store.replace_vectors([memory_id for memory_id, _ in rows], vectors, encoder.info)
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
        self, request: SearchRequest, *, profile: Profile = DEFAULT_PROFILE, tau_days: float | None = None
    ) -> SearchOutcome:
        return self.search_many([request], profile=profile, tau_days=tau_days)[0]

    def search_many(
        self,
        requests: Iterable[SearchRequest],
        *,
        profile: Profile = DEFAULT_PROFILE,
        tau_days: float | None = None,
    ) -> list[SearchOutcome]:
        """Run several searches in this process, loading the encoder at most once."""
        store = self.store()
        chosen = with_tau(profile, tau_days)
        embed = encoder_query_vector(self.encoder, store)
        return [run_search(store, request, embed, chosen) for request in requests]

    @staticmethod
    def now() -> datetime:
        return utc_now()
