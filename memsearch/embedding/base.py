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


@dataclass(frozen=True)
class ModelSpec:
    """A model as the store records it (`name`) and where its files are (`path`)."""

    name: str
    path: Path


class Encoder(Protocol):
    info: EmbeddingModelInfo

    def encode(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        """L2-normalised float32 vectors, one row per text; `progress` gets (done, total) as it goes."""
        ...
