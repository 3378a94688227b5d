"""Words of a query: the one tokenisation the lexical legs and the query analysis share, and the
weight BM25 gives a word (FTS5's idf)."""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

MAX_TERMS = 64

WORD = re.compile(r"\w+")

# Common English function words. They are dropped from the lexical query only when the
# query has other words: they cost time on every row and BM25 gives them almost no weight.
STOPWORDS = frozenset(
    """
    a about above after again all am an and any are as at be because been before being between
    both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me
    more most my myself no nor not now of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves
    """.split()  # noqa: SIM905 - a word list reads best as words
)


def word_counts(query: str) -> dict[str, int]:
    """Lower-cased words of the query with how often each occurs, in the order they first do;
    stop words dropped when others remain."""
    counts = Counter(word.lower() for word in WORD.findall(query))
    content = {word: count for word, count in counts.items() if word not in STOPWORDS}
    return content or dict(counts)


def query_terms(query: str) -> list[str]:
    """Lower-cased words of the query, de-duplicated, stop words dropped when others remain: the
    first MAX_TERMS (a longer query's lexical legs choose among them, see retrieval.query)."""
    return list(word_counts(query))[:MAX_TERMS]


_QUOTED_PHRASE = re.compile(r'"([^"]+)"')


@dataclass(frozen=True)
class LexicalQuery:
    """What the lexical legs search for, read from a query once (`of`): its words (see
    query_terms), its quoted phrases of several words (lower-cased, one space between words) and
    its gram terms (see query_grams). The stores make their full-text match from it alone."""

    words: tuple[str, ...]
    phrases: tuple[str, ...]
    grams: tuple[str, ...]

    @classmethod
    def of(cls, query: str, counts: Mapping[str, int] | None = None) -> LexicalQuery:
        """The query's lexical part (`counts`: its word_counts, when already read)."""
        quoted = (WORD.findall(phrase) for phrase in _QUOTED_PHRASE.findall(query))
        phrases = tuple(" ".join(words).lower() for words in quoted if len(words) > 1)[:MAX_TERMS]
        words = list(word_counts(query) if counts is None else counts)[:MAX_TERMS]
        return cls(tuple(words), phrases, tuple(query_grams(query)))

    @property
    def match_phrases(self) -> tuple[str, ...]:
        """The words, then the phrases: what FTS5 is asked for, in order (the PostgreSQL store
        ranks the same phrases)."""
        return self.words + self.phrases


# Scripts written without spaces between words (Chinese, Japanese; Korean joins particles to
# words): a run of them is one "word" to the full-text tokenizer, so a word inside it is found
# only through its overlapping pairs of characters (CJK bigrams, as Lucene's CJK analyzer does).
# The patterns below are compiled on first use (a few milliseconds): a search for plain English
# words, and any command that embeds nothing, never needs them.
_CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0002ffff"


@functools.cache
def _cjk_run() -> re.Pattern[str]:
    return re.compile(f"[{_CJK_CHARS}]+")


def gram_terms(text: str) -> list[str]:
    """The terms the full-text `grams` column holds for `text`, in order: the bigrams of each CJK
    run (a lone character as itself), then each symbol (emoji, ©, ✓: Unicode category So, which
    the word tokenizer drops) as `u<hex code point>`. Plain English text has none."""
    if text.isascii():  # no CJK character, no symbol
        return []
    terms: list[str] = []
    for run in _cjk_run().findall(text):
        terms += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
    return terms + [f"u{ord(char):x}" for char in text if unicodedata.category(char) == "So"]


def query_grams(query: str) -> list[str]:
    """The distinct gram terms of a query (see gram_terms), at most MAX_TERMS."""
    return list(dict.fromkeys(gram_terms(query)))[:MAX_TERMS]


def symbols(text: str) -> list[str]:
    """The distinct symbol characters (category So: emoji and the like) of `text`."""
    if text.isascii():
        return []
    return list(dict.fromkeys(char for char in text if unicodedata.category(char) == "So"))


# A long text is embedded in chunks that fit the model's window (256 word pieces with [CLS] and
# [SEP]). Chunks are cut by an estimate that errs long, so no chunk is truncated by the model:
# a CJK character or a punctuation mark is one piece, a word one piece per 5 characters begun.
CHUNK_PIECES = 180  # measured on the README and DESIGN.md: at most 224 real pieces, 176 on average
CHUNK_OVERLAP = 24  # pieces each chunk repeats of the one before, so no sentence is only ever cut


@functools.cache
def unit_pattern() -> re.Pattern[str]:
    """A unit of text for the estimate: a CJK character, a run of other word characters, or a mark."""
    return re.compile(f"[{_CJK_CHARS}]|[^\\W{_CJK_CHARS}]+|[^\\w\\s]")


def word_pieces(unit: str) -> int:
    """The estimated word pieces of one unit (a word, a CJK character or a mark): one per 5 characters begun."""
    return 1 + (len(unit) - 1) // 5


def chunk_spans(text: str, pieces: int = CHUNK_PIECES, overlap: int = CHUNK_OVERLAP) -> list[tuple[int, int]]:
    """(start, end) of each chunk of `text` (see embedding_chunks); one span of the whole text when short."""
    units = [(m.start(), m.end(), word_pieces(m.group())) for m in unit_pattern().finditer(text)]
    if sum(cost for _, _, cost in units) <= pieces:
        return [(0, len(text))]
    spans: list[tuple[int, int]] = []
    first = 0
    while first < len(units):
        last, total = first, 0
        while last < len(units) and total + units[last][2] <= pieces:
            total += units[last][2]
            last += 1
        last = max(last, first + 1)  # a single unit over the budget is a chunk of its own
        spans.append((units[first][0], units[last - 1][1]))
        if last == len(units):
            break
        back, repeated = last, 0
        while back - 1 > first and repeated + units[back - 1][2] <= overlap:
            back -= 1
            repeated += units[back][2]
        first = back
    return spans


def embedding_chunks(text: str, pieces: int = CHUNK_PIECES, overlap: int = CHUNK_OVERLAP) -> list[str]:
    """`text` as overlapping chunks of at most about `pieces` word pieces each; a short text is one chunk."""
    return [text[start:end] for start, end in chunk_spans(text, pieces, overlap)]


# FTS5's idf floor (fts5_aux.c): a word in more than half the rows still counts a little.
MIN_IDF = 1e-6


def idf(rows: int, hits: int) -> float:
    """FTS5's idf: log((N - n + 0.5) / (n + 0.5)), a non-positive value replaced by 1e-6 (n is
    at most N; more would only come from counts read at different moments)."""
    value = math.log((max(0, rows - hits) + 0.5) / (hits + 0.5))
    return MIN_IDF if value <= 0.0 else value
