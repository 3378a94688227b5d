"""Auto mode: pick a strategy for each query by rules, and say why.

The intent patterns are CEMS's (preference, temporal, aggregation); queries with those, or
with exact tokens (identifiers, paths, error strings, quoted phrases, numbers), need the
lexical leg. A query with no distinctive word gives the lexical leg nothing to match, so it
goes to the vector leg alone (unless it has symbols, emoji, which the lexical leg matches).
Everything else is searched by both legs: on measured data (LoCoMo, see the benchmark README)
fusing both beats either leg alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memsearch.text import STOPWORDS, WORD, symbols

INTENT_PATTERNS: dict[str, tuple[str, ...]] = {
    "preference": (
        "recommend", "suggest", "advice", "resources", "tools", "accessories",
        "what should", "would you", "based on my", "given my",
    ),
    "temporal": (
        "first", "last", "before", "after", "when", "how many days", "how long",
        "earliest", "latest", "most recent", "happened first",
    ),
    "aggregation": (
        "how many", "how much", "total", "combined", "all the times", "how often",
        "different", "various", "all the different",
    ),
}  # fmt: skip

_INTENT_RES = {
    intent: re.compile(r"\b(?:" + "|".join(re.escape(p) for p in patterns) + r")\b", re.IGNORECASE)
    for intent, patterns in INTENT_PATTERNS.items()
}

# Routing reads this much of a query: enough for any question, and it bounds the work a pasted
# megabyte can cause. (The patterns are linear in what they read as well: each token pattern can
# only start where a token starts, so no start position rescans the text after it.)
ROUTE_CHARS = 4096

# Each pattern finds one kind of token whose exact surface form matters.
_EXACT_TOKEN_RES = (
    re.compile(r'"[^"]+"|`[^`]+`'),  # quoted phrase or code
    re.compile(
        r"(?<![\w.~-])[\w.~-]*(?:/[\w.-][\w.~-]*)*/[\w.-]+/?"  # paths: a/b, ./x, ~/y/, /etc/hosts
        r"|\b\w+\.(?:py|js|ts|rs|go|md|json|toml|yaml|yml|txt|sh|c|h|cpp|java|sql|html|css)\b"
    ),
    re.compile(r"\b[a-z]+[A-Z]\w*\b|\b[A-Z][a-z]+[A-Z]\w*\b"),  # camelCase, PascalCase
    re.compile(r"\b\w+_\w+\b|\b\w+(?:::|->)\w+|\b\w+\(\)"),  # snake_case, paths in code, calls
    re.compile(r"\b[A-Z]{2,}\d*\b"),  # ENOENT, HTTP, E404
    re.compile(r"\b\w*\d\w*\b"),  # anything with a digit: versions, hashes, codes, years
    re.compile(r"(?<!\w)--?[a-zA-Z][\w-]*"),  # command-line flags
)


@dataclass(frozen=True)
class Route:
    strategy: str
    reason: str
    intents: tuple[str, ...] = ()
    exact_tokens: tuple[str, ...] = ()


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class RouteFeatures:
    """What routing reads of a query's first ROUTE_CHARS characters (see route_features)."""

    intents: tuple[str, ...]
    exact_tokens: tuple[str, ...]
    distinctive: bool  # a word that is not a stop word
    symbols: tuple[str, ...]  # emoji and the like, which the lexical leg matches


def detect_intents(query: str) -> tuple[str, ...]:
    return tuple(intent for intent, pattern in _INTENT_RES.items() if pattern.search(query))


def exact_tokens(query: str) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for pattern in _EXACT_TOKEN_RES:
        for match in pattern.finditer(query):
            found.setdefault(match.group(0), None)
    return tuple(found)


def route_features(query: str) -> RouteFeatures:
    """The query's route features, read from its first ROUTE_CHARS characters (once a query, by
    retrieval.query.parse_query)."""
    head = query[:ROUTE_CHARS]
    words = WORD.findall(head.lower())
    distinctive = any(word not in STOPWORDS for word in words)
    return RouteFeatures(detect_intents(head), exact_tokens(head), distinctive, tuple(symbols(head)))


def route_query(features: RouteFeatures) -> Route:
    """The strategy for a query with these features."""
    intents, tokens = features.intents, features.exact_tokens
    if tokens:
        shown = ", ".join(tokens[:3]) + (", …" if len(tokens) > 3 else "")
        return Route("hybrid", f"exact tokens ({shown}) need the lexical leg", intents, tokens)
    if intents:
        return Route("hybrid", f"{' and '.join(intents)} question: both legs", intents)
    if not features.distinctive:
        if (
            found := features.symbols
        ):  # an emoji is an exact token to the full-text index, and means little to the model
            return Route("hybrid", f"symbols ({' '.join(found[:3])}) need the lexical leg", intents, found)
        return Route("vector", "no distinctive words for full-text search", intents)
    return Route("hybrid", "plain query: both legs, fused", intents)
