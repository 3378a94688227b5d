"""The vectors of memories that wait for them (`Store.pending_count`): `memsearch index` stores a
file's chunks first (searchable by their words at once) and embeds them after, a batch per
transaction, so an interrupted run keeps every vector it made and the next run makes the rest.

A batch is about FILL_SECONDS of embedding (its size follows the rate measured so far). A note's
vectors are its text's and, for a note longer than the model's window, its chunks' (`with_chunks`);
with them go the vectors of the store's other models. A memory whose text changed while it was
embedded is left waiting, to be embedded again with its new text.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from memsearch.embedding.base import Progress
from memsearch.ingest import Library
from memsearch.ingest.embed import embed_memories, other_model_vectors, with_chunks
from memsearch.models import Memory, NewMemory
from memsearch.store.base import FilledVectors, Store

# About this much embedding per transaction: a Ctrl-C loses at most this much work, and calls of a
# few hundred texts run at the encoder's floor where calls of ~50 run at 0.82-0.87x of it
# (bench/results/encoder-floor-calls.log; 2 cores).
FILL_SECONDS = 3.0
FIRST_BATCH = 64
MAX_BATCH = 1_024


def fill_pending(
    ms: Library,
    store: Store,
    on_batch: Callable[[int, int], None] | None = None,
    progress: Progress | None = None,
) -> int:
    """Embed every memory that waits for its vectors, a batch per transaction; `on_batch` gets
    (filled so far, waiting at the start) after each commit, `progress` the same as (done, total)
    while a batch is embedded too. Returns how many were filled."""
    total = store.pending_count()
    if not total:
        return 0
    encoder = ms.encoder()
    store.check_model(encoder.info)
    done, size, stalled = 0, FIRST_BATCH, 0
    while (ids := store.pending_ids(size)) and stalled < 2:
        started = time.monotonic()
        memories = [memory for memory_id, memory in sorted(store.get_many(ids).items())]
        news = [_embedded(memory) for memory in memories]
        base = done

        def batch_progress(texts_done: int, texts_total: int, base: int = base, count: int = len(news)) -> None:
            if progress is not None:
                progress(min(total, base + round(count * texts_done / max(1, texts_total))), max(total, base + count))

        vectors, view_vectors = embed_memories(encoder, news, batch_progress if progress is not None else None)
        filled = [
            FilledVectors(
                memory.id,
                memory.text,
                vectors[row],
                {view: (news[row].views[view], vector) for view, vector in view_vectors.get(row, {}).items()},
            )
            for row, memory in enumerate(memories)
        ]
        others = other_model_vectors(ms, store, [memory.text for memory in memories])
        count = store.fill_vectors(encoder.info, filled, others)
        done += count
        stalled = stalled + 1 if count == 0 else 0  # another writer keeps changing them: leave them waiting
        if on_batch is not None:
            on_batch(done, max(total, done))
        elapsed = time.monotonic() - started
        size = max(FIRST_BATCH, min(MAX_BATCH, size * 4, round(len(ids) * FILL_SECONDS / max(elapsed, 1e-3))))
    return done


def _embedded(memory: Memory) -> NewMemory:
    """What is embedded for a stored memory: its text and, for a long note, its chunks' views."""
    new = NewMemory(memory.text)
    return with_chunks(new) if memory.kind == "note" else new
