"""An encoder loaded when first wanted, or meanwhile in a thread for a search that will embed. Outside
the embedding package, whose import (the model registry, the encoders' base) a search that does not
embed does without."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import Future

    from memsearch.embedding.base import Encoder


class EncoderLoader:
    """The encoder `load` makes (or the one given), loaded once; a load that failed is tried afresh next time."""

    def __init__(self, load: Callable[[], Encoder], encoder: Encoder | None = None) -> None:
        self._load = load
        self._encoder = encoder
        self._loading: Future[Encoder] | None = None

    def get(self) -> Encoder:
        """The encoder: waits for a load started meanwhile (and raises what it raised), else loads it here."""
        if self._encoder is None:
            loading, self._loading = self._loading, None
            self._encoder = loading.result() if loading else self._load()
        return self._encoder

    def settle(self) -> None:
        """Wait for a load started meanwhile to end (its outcome is kept for `get`): the load may be
        reading the store, which must not be closed under it (closing a SQLite connection another
        thread is using crashes the interpreter)."""
        if self._loading is not None:
            from concurrent.futures import wait

            wait([self._loading])

    def load_meanwhile(self) -> None:
        """Start loading the encoder in a thread: onnxruntime builds its session (a fifth of a second)
        without holding the GIL, while the caller imports the pipeline, opens the store and runs the
        lexical legs."""
        if self._encoder is None and self._loading is None:
            from concurrent.futures import ThreadPoolExecutor

            # Its thread is joined at exit: an interpreter that ends waits for the load rather than
            # stop it inside onnxruntime.
            loader = ThreadPoolExecutor(1, thread_name_prefix="memsearch-encoder-load")
            self._loading = loader.submit(self._load)
            loader.shutdown(wait=False)
