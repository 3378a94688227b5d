"""FTS5's BM25 outside SQLite, so the PostgreSQL store ranks words exactly as the SQLite store
does (with FTS5's own tokenizer and idf, `memsearch.store.fts`).
"""

from __future__ import annotations

from collections.abc import Sequence

# FTS5's bm25() constants (fts5_aux.c).
K1 = 1.2
B = 0.75


def phrase_count(token_positions: Sequence[Sequence[int]]) -> int:
    """How often the phrase occurs in one column, given each of its tokens' offsets there."""
    later = [set(offsets) for offsets in token_positions[1:]]
    return sum(1 for start in token_positions[0] if all(start + k + 1 in offsets for k, offsets in enumerate(later)))
