"""Turning any user query (its LexicalQuery) into a safe FTS5 MATCH expression.

Every word becomes a double-quoted FTS5 string, so operators (AND, NEAR, column filters,
`*`, `^`, `-`) in the query are searched as words instead of parsed as syntax.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memsearch.models import LEXICAL_VIEWS, default_view_text
from memsearch.text import LexicalQuery, gram_terms

# The full-text tokenizer of both stores (SQLite's FTS5 table; the PostgreSQL store tokenizes with it too).
TOKENIZER = "porter unicode61 remove_diacritics 2"

# Each text searched by words (text and tags together, each lexical view) has a column of its CJK
# bigrams and symbols (see text.gram_terms) beside it: empty for plain English text.
GRAM_COLUMNS: dict[str | None, str] = {None: "grams", **{view: f"{view}_grams" for view in LEXICAL_VIEWS}}
# The full-text columns, in the stores' order: text, tags, the lexical views, their gram columns.
FTS_COLUMNS = ("text", "tags", *LEXICAL_VIEWS, *GRAM_COLUMNS.values())


def match_expression(query: LexicalQuery) -> str | None:
    """An OR of the query's words (and of its quoted phrases, as phrases); None if it has no words."""
    terms = [f'"{phrase}"' for phrase in query.match_phrases]
    return " OR ".join(terms) if terms else None


def fts_row(text: str, tags: Sequence[str], kind: str, views: Mapping[str, str]) -> tuple[str, ...]:
    """A memory's text for each of FTS_COLUMNS; a lexical view it has no text of its own for is
    indexed as models.default_view_text says."""
    own = [views.get(view, default_view_text(kind, view, text)) for view in LEXICAL_VIEWS]
    tag_text = " ".join(tags)
    return (text, tag_text, *own, gram_text(text, tag_text), *(gram_text(view_text) for view_text in own))


def gram_text(text: str, tags: str = "") -> str:
    """What the `grams` full-text column indexes for a memory's text and tags (see text.gram_terms)."""
    return " ".join(gram_terms(f"{text} {tags}" if tags else text))


def gram_expression(query: LexicalQuery) -> str | None:
    """An OR of the query's gram terms (CJK bigrams, symbols), for the `grams` column; None if it has none."""
    terms = [f'"{term}"' for term in query.grams]
    return " OR ".join(terms) if terms else None
