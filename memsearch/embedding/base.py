"""The encoder's types, shared by the routes (`onnx`, `reference`) and their users without a cycle."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from memsearch.models import EmbeddingModelInfo

if TYPE_CHECKING:
    import numpy as np

Progress = Callable[[int, int], None]  # (texts done, texts in all)
# A model's vectors on the onnx-int8 route differ from its own: their name and version say so.
QUANTIZED_SUFFIX = " (int8)"
INT8_VERSION_SUFFIX = "+int8"


@dataclass(frozen=True)
class ModelSpec:
    """A model as the store records it (`name`, `version`), where its files are (`path`), the
    prefixes it wants before a query and before a document, and the route it needs (None: any)."""

    name: str
    path: Path
    version: str | None = None
    query_prefix: str = ""
    document_prefix: str = ""
    backend: str | None = None
    by_path: bool = False  # given as a folder: the store keeps its location as a hint to find it again

    def info(self, dim: int, *, name_suffix: str = "", version_suffix: str = "") -> EmbeddingModelInfo:
        """What a store records for this model's vectors (a route with vectors of its own adds suffixes)."""
        version = self.version + version_suffix if self.version else None
        location = str(self.path) if self.by_path else None
        return EmbeddingModelInfo(self.name + name_suffix, dim, version, location)


class Encoder(Protocol):
    info: EmbeddingModelInfo

    def encode(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text; `progress` gets (done, total) as it goes."""
        ...


def encode_queries(encoder: Encoder, texts: Sequence[str]) -> np.ndarray:
    """The vectors of search queries: with the model's query prefix where it has one (an encoder
    whose model embeds a query unlike a document has `encode_query(texts)`; `encode` embeds
    documents). Looked up by name: a runtime protocol check cost ~30 µs a search."""
    encode_query = getattr(encoder, "encode_query", None)
    if callable(encode_query):
        result: np.ndarray = encode_query(texts)
        return result
    return encoder.encode(texts)


class PrefixedEncoder:
    """A model that wants a prefix before each text: `query_prefix` before a query, `document_prefix`
    before whatever is stored (e5's "query: " / "passage: ", EmbeddingGemma's prompts)."""

    def __init__(self, inner: Encoder, query_prefix: str, document_prefix: str) -> None:
        self.inner = inner
        self.info = inner.info
        self._query_prefix, self._document_prefix = query_prefix, document_prefix

    def encode(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        return self.inner.encode([self._document_prefix + text for text in texts], progress=progress)

    def encode_query(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.encode([self._query_prefix + text for text in texts])
