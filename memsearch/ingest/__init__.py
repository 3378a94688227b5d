"""What goes into a store: JSONL records with line numbers (`records`), conversation readers
(`readers`), conversations as memories with their views and facets (`conversations`), the
embedding of distinct texts with near-duplicate detection (`embed`), note files as chunks at their
headings (`notes`), the walk and incremental plan of indexing folders of them (`note_files`), its
runs (`indexing`), its remembered roots (`roots`) and its watch (`watching`), and adding and
importing memories (`importing`).

The product and the benchmarks (`memsearch.eval`) both use this package; it never imports `eval`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from memsearch.embedding.base import Encoder
    from memsearch.models import EmbeddingModelInfo
    from memsearch.store.base import Store


class Library(Protocol):
    """What ingest needs of its caller, `memsearch.api.Memsearch` (a protocol: ingest sits below the
    facade): the store at `path`, opened on first use (created by a write), and the encoder its
    vectors are made by, loaded on first use (so a batch that fails its checks loads no model)."""

    @property
    def path(self) -> Path | str: ...

    def store(self, *, create: bool = False) -> Store: ...

    def encoder(self) -> Encoder: ...

    def model_encoder(self, model: EmbeddingModelInfo) -> Encoder:
        """The encoder of one of the store's other models (see `Store.extra_models`), loaded once."""
        ...
