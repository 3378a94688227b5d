"""A query read once: `parse_query` scans the text for everything the stages need (the route's
features, the lexical legs' words and phrases, whether it asks when or for a name, its content
words and its words' places; the dates it names on first use), and every stage reads the
ParsedQuery instead of scanning the text again.

A query may be a whole document (a search by example, up to operations.MAX_QUERY_CHARS): what
makes it a question (its route, the dates and names it asks about) is read from its first
ROUTE_CHARS characters, and its lexical legs search its MAX_TERMS most distinctive words
(`distinctive_words`) rather than its first ones."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from functools import cached_property

from memsearch.retrieval.answers import asks_name
from memsearch.retrieval.dates import NamedDates, as_when, asks_when, named_dates
from memsearch.retrieval.routing import ROUTE_CHARS, RouteFeatures, route_features
from memsearch.text import MAX_TERMS, STOPWORDS, WORD, LexicalQuery, idf, word_counts

# A word with its possessive ("Ana's"): the word is what a speaker's name is compared with.
_WORD_WITH_POSSESSIVE = re.compile(r"\b(\w+)(?:'s)?\b")


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class WordSpan:
    """Where a word (with its possessive 's, if any) stands in the query, and the word lower-cased."""

    start: int
    end: int
    word: str


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class ParsedQuery:
    """A query's text and what the stages read of it (see parse_query)."""

    text: str  # what the legs search: the query, a time frame opening it read as "When" (dates.as_when)
    route: RouteFeatures  # intents, exact tokens, distinctive words, symbols (routing)
    lexical: LexicalQuery  # words, quoted phrases, gram terms (the lexical legs, in the store)
    asks_when: bool  # the `when` adjustment
    asks_name: bool  # the `names` adjustment
    content_words: frozenset[str]  # lower-cased words but stop words (the deterministic re-ranker)
    word_spans: tuple[WordSpan, ...]  # the head's words with their possessives (speaker names the vector leg drops)
    word_counts: tuple[tuple[str, int], ...]  # every word (but stop words), how often: the lexical legs' choice

    @property
    def intents(self) -> tuple[str, ...]:
        return self.route.intents

    @property
    def head(self) -> str:
        """What is read as a question of a query that may be a whole document: of the searched
        text (`text`, its time frame read as "When"), for the dates and names it holds; whether it
        asks when or for a name is read from the query as written (parse_query)."""
        return self.text[:ROUTE_CHARS]

    @property
    def has_more_words(self) -> bool:
        """Whether the query has more words than its lexical legs search (MAX_TERMS)."""
        return len(self.word_counts) > MAX_TERMS

    @cached_property
    def dates(self) -> NamedDates:
        """The dates it names (the time leg's): read on first use, so a search without a time leg
        neither compiles nor runs the date patterns."""
        return named_dates(self.head)

    def date_ranges(self, today: date | None) -> list[tuple[date, date]]:
        """The dates named, with `today` months named without a year too (see NamedDates)."""
        return self.dates.ranges(today)

    def names(self, speakers: Sequence[str]) -> tuple[str, ...]:
        """The speakers the query names (whole words, any case), in the order given: who speaks is
        known only once the candidates are."""
        return tuple(s for s in speakers if re.search(rf"\b{re.escape(s)}\b", self.head, re.IGNORECASE))

    @property
    def name_words(self) -> frozenset[str]:
        """The query's words (possessives without their 's), lower-cased, but stop words."""
        return frozenset(span.word for span in self.word_spans) - STOPWORDS

    def without(self, words: frozenset[str]) -> str:
        """The text with these (lower-cased) words and their possessives left out, runs of white
        space made one space; the whole text when no word would remain."""
        pieces, last = [], 0
        for span in self.word_spans:
            if span.word in words:
                pieces.append(self.text[last : span.start])
                last = span.end
        pieces.append(self.text[last:])
        kept = " ".join("".join(pieces).split())
        return kept if WORD.search(kept) else self.text


def parse_query(text: str) -> ParsedQuery:
    """Read the query's text once for every stage of a search. What it asks (its route, whether it
    asks when or for a name) is read from the query as written; what the legs search, from the
    query with a time frame opening it read as "When" (dates.as_when: "Which year did Ana move?"
    searches as "When did Ana move?")."""
    head = text[:ROUTE_CHARS]
    searched = as_when(text)
    searched_head = searched[:ROUTE_CHARS]
    counts = word_counts(searched)
    return ParsedQuery(
        text=searched,
        route=route_features(head),
        lexical=LexicalQuery.of(searched, counts),
        asks_when=asks_when(head),
        asks_name=asks_name(head),
        content_words=frozenset(word for word in WORD.findall(searched.lower()) if word not in STOPWORDS),
        word_spans=tuple(
            WordSpan(m.start(), m.end(), m.group(1).lower()) for m in _WORD_WITH_POSSESSIVE.finditer(searched_head)
        ),
        word_counts=tuple(counts.items()),
    )


def distinctive_words(
    counts: Sequence[tuple[str, int]], documents: Sequence[int], memories: int, limit: int = MAX_TERMS
) -> tuple[str, ...]:
    """The `limit` words that tell a document given as the query apart (as Lucene's MoreLikeThis
    chooses them): each word weighs how often the query says it times its idf in the store (BM25's,
    from `documents`, how many of the `memories` hold each); words no memory holds are left out,
    as they match nothing. In the query's order; ties go to the earlier word."""
    weights = [
        (count * idf(memories, held), -place)
        for place, ((_, count), held) in enumerate(zip(counts, documents, strict=True))
        if held > 0
    ]
    chosen = sorted(-place for _, place in sorted(weights, reverse=True)[:limit])
    return tuple(counts[place][0] for place in chosen)
