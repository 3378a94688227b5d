"""Words of a query: the one tokenisation the lexical legs and the query analysis share."""

from __future__ import annotations

import re
import unicodedata

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


def query_terms(query: str) -> list[str]:
    """Lower-cased words of the query, de-duplicated, stop words dropped when others remain."""
    words = list(dict.fromkeys(word.lower() for word in WORD.findall(query)))
    content = [word for word in words if word not in STOPWORDS]
    return (content or words)[:MAX_TERMS]


# Scripts written without spaces between words (Chinese, Japanese; Korean joins particles to
# words): a run of them is one "word" to the full-text tokenizer, so a word inside it is found
# only through its overlapping pairs of characters (CJK bigrams, as Lucene's CJK analyzer does).
_CJK_RUN = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\U00020000-\U0002ffff]+")


def gram_terms(text: str) -> list[str]:
    """The terms the full-text `grams` column holds for `text`, in order: the bigrams of each CJK
    run (a lone character as itself), then each symbol (emoji, ©, ✓: Unicode category So, which
    the word tokenizer drops) as `u<hex code point>`. Plain English text has none."""
    terms: list[str] = []
    for run in _CJK_RUN.findall(text):
        terms += [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
    if not text.isascii():
        terms += [f"u{ord(char):x}" for char in text if unicodedata.category(char) == "So"]
    return terms


def query_grams(query: str) -> list[str]:
    """The distinct gram terms of a query (see gram_terms), at most MAX_TERMS."""
    return list(dict.fromkeys(gram_terms(query)))[:MAX_TERMS]


def symbols(text: str) -> list[str]:
    """The distinct symbol characters (category So: emoji and the like) of `text`."""
    if text.isascii():
        return []
    return list(dict.fromkeys(char for char in text if unicodedata.category(char) == "So"))
