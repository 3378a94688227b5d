"""Moving a store: every memory with its views, vectors, access counts and consolidation marks,
from any store to any other (SQLite → PostgreSQL and back), keeping ids, without re-embedding."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import closing

from memsearch.errors import InvalidInputError
from memsearch.store.base import Store


def copy_store(source: Store, destination: Store) -> int:
    """Copy everything in `source` into the empty `destination` in one transaction of the
    destination (all or nothing), then each of its other models' vectors (Memsearch.add_model)
    in one of its own; return how many memories were copied."""
    if source.location == destination.location:
        raise InvalidInputError("is the source store itself", field="destination")
    copied = destination.restore(source.export(), source.embedding_model())
    for model in source.extra_models():
        ids, vectors = source.all_model_vectors(model.name)
        destination.add_model_vectors(model, ids.tolist(), vectors)
    return copied


def copy_between(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Open the stores at two locations (a SQLite path or a postgresql:// URL each; the destination
    is created if missing), copy the first into the second, and make what the destination's first
    search would otherwise make (`Store.prepare_search_indexes`, told `progress`)."""
    from memsearch.paths import resolve_db_path
    from memsearch.store import open_store

    with (
        closing(open_store(resolve_db_path(source))) as src,
        closing(open_store(resolve_db_path(destination), create=True)) as dst,
    ):
        copied = copy_store(src, dst)
        dst.prepare_search_indexes(progress)
        return copied
