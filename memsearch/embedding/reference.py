"""The sentence-transformers route: slow to import, and the reference for the fast route."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from memsearch.embedding.base import ModelSpec, Progress
from memsearch.embedding.batching import encode_in_batches, usable_cpus
from memsearch.errors import EmbeddingError

# Length-sorted batches (see embedding.batching): at 8 texts a batch EmbeddingGemma spent 9 s of CPU
# on 64 turns, at 32 13 s (each batch padded to its longest text), one thread a run.
BATCH_SIZE = 8


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
    """A sentence-transformers model, its batches run as the ONNX route runs them: sorted by length
    and side by side on the usable CPUs, one torch thread each (see embedding.batching)."""

    def __init__(self, spec: ModelSpec) -> None:
        import torch

        self._model = load_sentence_transformer(spec)
        self.info = spec.info(embedding_dimension(self._model))
        # torch's own threads on a model's small matrices cost more CPU than they save (about 2.5
        # times the CPU time with another process on the two cores): one thread a run, and the runs
        # side by side. The setting is the process's; only this route runs torch.
        torch.set_num_threads(1)
        self._workers = usable_cpus()
        # The first tokenisation sets the fast tokenizer's padding and truncation (a write that
        # concurrent runs must not race: "Already borrowed"); later ones only read them.
        prepare = getattr(self._model, "preprocess", None) or self._model.tokenize  # newer releases name it preprocess
        prepare(["warm-up"])

    def encode(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.info.dim), dtype=np.float32)
        return encode_in_batches(
            [len(text) for text in texts],
            BATCH_SIZE,
            lambda rows: self._run([texts[i] for i in rows]),
            self.info.dim,
            self._workers,
            progress,
        )

    def _run(self, batch: list[str]) -> np.ndarray:
        import torch

        with torch.inference_mode():  # per thread: a pool thread starts with gradients on
            vectors: np.ndarray = self._model.encode(batch, batch_size=len(batch), convert_to_numpy=True)
        return vectors
