"""The sentence-transformers route: slow to import, and the reference for the fast route."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from memsearch.embedding.base import ModelSpec, Progress
from memsearch.errors import EmbeddingError

BATCH_SIZE = 64


def load_sentence_transformer(spec: ModelSpec) -> Any:
    """Load the model from its local directory, with every hub look-up switched off."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
        transformers_logging.set_verbosity_error()
        return SentenceTransformer(str(spec.path), device="cpu")
    except Exception as error:  # any failure to load is reported the same way
        raise EmbeddingError(f"cannot load the model {spec.name} from {spec.path}: {error}") from error


def embedding_dimension(model: Any) -> int:
    # sentence-transformers 6 renamed the method; older releases only have the old name.
    method = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(method())


class SentenceTransformerEncoder:
    def __init__(self, spec: ModelSpec) -> None:
        self._model = load_sentence_transformer(spec)
        self.info = spec.info(embedding_dimension(self._model))

    def encode(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        done = 0
        parts = []
        for start in range(0, len(texts), BATCH_SIZE):
            batch = list(texts[start : start + BATCH_SIZE])
            parts.append(self._model.encode(batch, normalize_embeddings=True, convert_to_numpy=True))
            done += len(batch)
            if progress:
                progress(done, len(texts))
        if not parts:
            return np.zeros((0, self.info.dim), dtype=np.float32)
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)
