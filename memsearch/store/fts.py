"""Turning any user query into a safe FTS5 MATCH expression.

Every word becomes a double-quoted FTS5 string, so operators (AND, NEAR, column filters,
`*`, `^`, `-`) in the query are searched as words instead of parsed as syntax.
"""

from __future__ import annotations

import re

from memsearch.text import WORD, query_terms

_QUOTED_PHRASE = re.compile(r'"([^"]+)"')


def match_phrases(query: str) -> list[str]:
    """The query's words, then its quoted phrases of several words: the phrases FTS5 is asked for,
    in order (the PostgreSQL store ranks the same phrases)."""
    phrases = list(query_terms(query))
    for phrase in _QUOTED_PHRASE.findall(query):
        words = WORD.findall(phrase)
        if len(words) > 1:
            phrases.append(" ".join(words).lower())
    return phrases


def match_expression(query: str) -> str | None:
    """An OR of the query's words (and of its quoted phrases, as phrases); None if it has no words."""
    terms = [f'"{phrase}"' for phrase in match_phrases(query)]
    return " OR ".join(terms) if terms else None
