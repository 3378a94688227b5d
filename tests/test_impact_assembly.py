"""One assembly of the impact index (memsearch.store.lexical_index.assemble) for the file made
from a whole store and for the rows changed since, searched beside it: terms without postings
(a query token the changed rows do not hold) bound nothing and break nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memsearch.models import NewMemory
from memsearch.store.lexical_index import assemble, build_from_connection
from memsearch.store.sqlite import SQLiteStore
from tests.conftest import T0
from tests.test_lexical_index import MODEL, vectors


@pytest.mark.parametrize("empty", [(0,), (1,), (3,), (0, 2), (1, 3), (0, 1, 2, 3)])
def test_a_term_without_postings_bounds_nothing(empty: tuple[int, ...]) -> None:
    """Four terms over three rows, those named by `empty` with no postings (first, between, last):
    each other term's largest count and shortest row are its own; an empty term's are 0."""
    ids = np.asarray([10, 20, 30], np.int64)
    lengths = np.asarray([5, 2, 9], np.int64)
    postings = {0: [(0, 3), (2, 1)], 1: [(1, 7)], 2: [(0, 1), (1, 2), (2, 4)], 3: [(2, 6)]}
    terms, rows, counts = [], [], []
    for term in range(4):
        for row, count in [] if term in empty else postings[term]:
            terms.append(term)
            rows.append(row)
            counts.append(count)
    index = assemble(
        ids, lengths, ["alpha", "beta", "delta", "gamma"],
        np.asarray(terms, np.int64), np.asarray(rows, np.int64), np.asarray(counts, np.int64),
    )  # fmt: skip
    for term in range(4):
        held = [] if term in empty else postings[term]
        assert int(index.starts[term + 1] - index.starts[term]) == len(held)
        assert int(index.max_counts[term]) == max((count for _, count in held), default=0)
        assert int(index.min_lengths[term]) == min((int(lengths[row]) for row, _ in held), default=0)
    assert index.term("delta") == 2 and index.term("epsilon") is None


def test_a_stores_vocabulary_holds_only_terms_with_postings(db_path: Path) -> None:
    """The file's terms come from FTS5's own vocabulary (fts5vocab), which lists a term of a column
    only while a row holds it: a word whose every row was deleted or rewritten (before FTS5 merged
    its segments) is not a term of the file, so its assembly never meets an empty term."""
    store = SQLiteStore.open(db_path, create=True)
    ids = store.insert(
        [NewMemory("alpha zebra"), NewMemory("beta yak", tags=("quokka",)), NewMemory("alpha beta")],
        vectors(3, 1), MODEL, T0,
    )  # fmt: skip
    store.delete([ids[0]])
    store.update(ids[1], {"tags": []})
    index = build_from_connection(store._db)
    vocabulary = bytes(index.vocabulary).decode()
    assert "zebra" not in vocabulary and "quokka" not in vocabulary
    assert bool(np.all(np.diff(index.starts) > 0))
    store.close()
