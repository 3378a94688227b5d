"""Closing a Memsearch while its encoder loads in a thread: the load reads the store (its recorded
model), and a SQLite connection closed under a thread that uses it crashes the interpreter."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.embedding.base import Encoder

WAIT = 30.0


def test_close_waits_for_a_load_that_reads_the_store(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started, go = threading.Event(), threading.Event()
    order: list[str] = []

    def load_reading_the_store() -> Encoder:
        started.set()
        assert go.wait(WAIT)
        ms.store().embedding_model()  # what the real loader reads
        order.append("load read the store")
        raise RuntimeError("no model in this test")

    ms = Memsearch(db_path, encoder_factory=load_reading_the_store)
    store = ms.store(create=True)
    store_close = store.close

    def recorded_close() -> None:
        order.append("store closed")
        store_close()

    monkeypatch.setattr(store, "close", recorded_close)
    ms._encoder.load_meanwhile()
    assert started.wait(WAIT)
    closing = threading.Thread(target=ms.close)
    closing.start()
    closing.join(1.0)  # without the wait, close has returned by now: the load reads a closed store
    go.set()
    closing.join(WAIT)
    assert not closing.is_alive()
    assert order == ["load read the store", "store closed"]


def test_a_load_that_failed_meanwhile_still_fails_the_next_get(db_path: Path) -> None:
    def failing() -> Encoder:
        raise RuntimeError("model missing")

    with Memsearch(db_path, encoder_factory=failing) as ms:
        ms._encoder.load_meanwhile()
        ms._encoder.settle()
        with pytest.raises(RuntimeError, match="model missing"):
            ms.encoder()
