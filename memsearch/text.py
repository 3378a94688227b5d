"""Words of a query: the one tokenisation the lexical legs and the query analysis share."""

from __future__ import annotations

import re

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
