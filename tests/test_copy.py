"""Copying a store (memsearch.store.copy) between two SQLite stores, with made-up vectors: no
model, so in the quick tier; tests/test_postgres.py copies to PostgreSQL and back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memsearch.errors import InvalidInputError
from memsearch.store.copy import copy_between
from memsearch.store.sqlite import SQLiteStore
from tests.test_ann import filled


def test_a_copy_keeps_ids_texts_and_vectors(tmp_path: Path) -> None:
    source = filled(tmp_path / "source.db", 12)
    source.close()
    assert copy_between(tmp_path / "source.db", tmp_path / "new" / "copy.db") == 12
    source, copy = SQLiteStore.open(tmp_path / "source.db"), SQLiteStore.open(tmp_path / "new" / "copy.db")
    try:
        assert [e.memory for e in copy.export()] == [e.memory for e in source.export()]
        assert copy.embedding_model() == source.embedding_model()
        (copied_ids, copied), (ids, vectors) = copy.all_vectors(), source.all_vectors()
        assert np.array_equal(copied_ids, ids) and np.array_equal(copied, vectors)
    finally:
        source.close()
        copy.close()


def test_a_store_is_not_copied_onto_itself(tmp_path: Path) -> None:
    filled(tmp_path / "source.db", 2).close()
    with pytest.raises(InvalidInputError, match="source store itself"):
        copy_between(tmp_path / "source.db", tmp_path / "source.db")
