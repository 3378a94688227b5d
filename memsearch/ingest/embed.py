"""Embedding what is imported: each distinct text once, and near-duplicates of stored memories."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from memsearch.embedding.base import Encoder, Progress
from memsearch.embedding.registry import model_key
from memsearch.models import VECTOR_VIEWS, NewMemory, chunk_view, is_chunk_view
from memsearch.store.base import Store
from memsearch.text import embedding_chunks

if TYPE_CHECKING:
    import numpy as np

    from memsearch.ingest import Library


def with_chunks(memory: NewMemory) -> NewMemory:
    """A note longer than the model's window with its chunks after the first as vector views
    (`chunk_2`, …; see models.CHUNK_VIEW_PREFIX): the first is what its own vector holds. Turns and
    session chunks are searched through their own views and turns, and are not chunked."""
    if memory.kind != "note":
        return memory
    chunks = embedding_chunks(memory.text)
    if len(chunks) == 1:
        return memory
    views = {chunk_view(number): text for number, text in enumerate(chunks[1:], start=2)}
    return replace(memory, views={**memory.views, **views})


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
        if (view in VECTOR_VIEWS or is_chunk_view(view)) and (text != m.text or view.startswith("facet_"))
    }
    unique = list(dict.fromkeys([*texts, *view_texts.values()]))
    encoded = encoder.encode(unique, progress=progress)
    row = {text: n for n, text in enumerate(unique)}
    view_vectors: dict[int, dict[str, np.ndarray]] = {}
    for (i, view), text in view_texts.items():
        view_vectors.setdefault(i, {})[view] = encoded[row[text]]
    return encoded[[row[text] for text in texts]], view_vectors


def other_model_vectors(target: Library, store: Store, texts: Sequence[str]) -> dict[str, np.ndarray]:
    """The texts' vectors of each of the store's other models (by name; none when it has none),
    each made by that model's encoder, with its document prefix: what every write of a text
    stores beside the store's own vector."""
    import numpy as np

    found: dict[str, np.ndarray] = {}
    for model in store.extra_models():
        encoder = target.model_encoder(model)
        found[model_key(model.name)] = encoder.encode(list(texts)) if texts else np.zeros((0, model.dim), np.float32)
    return found


def near_duplicates(
    store: Store, memories: Sequence[NewMemory], vectors: np.ndarray, threshold: float
) -> dict[int, tuple[tuple[bool, int], float]]:
    """Batch position → ((in batch?, stored id or earlier batch position), cosine) for each memory
    whose best match, among stored memories and earlier kept ones of the batch, reaches `threshold`.
    A memory being replaced by key is not its own duplicate."""
    replaced = {store.id_for_key(m.key) for m in memories if m.key is not None} - {None}
    stored_best: list[tuple[int, float] | None] = store.nearest(vectors, exclude={i for i in replaced if i is not None})
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
