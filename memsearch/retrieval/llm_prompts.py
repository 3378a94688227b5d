"""The LLM stages' prompts and reply parsers as pure functions (CEMS's design,
seeds/cems-retrieval.txt): intent, query synthesis, HyDE and re-ranking, and the strategy an
intent routes to. The LLM call itself is the pipeline's (one injected client).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memsearch.llm import LLMFailure, Message

# Query synthesis: how many search terms per query type (retrieval.py:166).
TERM_COUNTS = {"preference": (4, 5), "temporal": (3, 4), "general": (2, 3)}
PROFILE_CONTEXT_MEMORIES = 5  # the user's own memories shown to preference synthesis and HyDE
RERANK_TEXT_CHARS = 400  # each candidate's text in the re-rank prompt, at most
COMPLEXITIES = ("simple", "moderate", "complex")


def query_type(intents: Sequence[str]) -> str:
    """preference, temporal or general: what synthesis and HyDE are told (preference first)."""
    return next((t for t in ("preference", "temporal") if t in intents), "general")


# -- intent and routing ----------------------------------------------------------------------


@dataclass(frozen=True)
class Intent:
    primary_intent: str = "unknown"
    complexity: str = "moderate"
    domains: tuple[str, ...] = ()
    requires_reasoning: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "primary_intent": self.primary_intent,
            "complexity": self.complexity,
            "domains": list(self.domains),
            "requires_reasoning": self.requires_reasoning,
        }


def intent_prompt(query: str) -> list[Message]:
    return [
        {
            "role": "system",
            "content": (
                "You analyse search queries against a personal memory store. Reply with one JSON object "
                'and nothing else: {"primary_intent": short label, "complexity": "simple" | "moderate" | '
                '"complex", "domains": [topic, ...], "requires_reasoning": true | false}. A query is simple '
                "when one memory with its keywords answers it; complex when it combines several facts, "
                "times or sessions."
            ),
        },
        {"role": "user", "content": f"Query: {query}"},
    ]


def _json_object(text: str) -> dict[str, Any]:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise LLMFailure("malformed reply (no JSON object)")
    try:
        value = json.loads(text[start : end + 1])
    except ValueError:
        raise LLMFailure("malformed reply (invalid JSON object)") from None
    if not isinstance(value, dict):
        raise LLMFailure("malformed reply (not a JSON object)")
    return value


def parse_intent(text: str) -> Intent:
    data = _json_object(text)
    complexity = str(data.get("complexity", "moderate")).strip().lower()
    domains = data.get("domains", [])
    reasoning = data.get("requires_reasoning", False)
    return Intent(
        primary_intent=str(data.get("primary_intent", "unknown"))[:80],
        complexity=complexity if complexity in COMPLEXITIES else "moderate",
        domains=tuple(str(d)[:40] for d in domains) if isinstance(domains, list) else (),
        requires_reasoning=reasoning is True or str(reasoning).lower() == "true",
    )


def route_to_strategy(intent: Intent) -> str:
    """retrieval.py:1129, as the seed writes it."""
    if intent.complexity == "simple" and not intent.requires_reasoning:
        return "vector"
    if intent.complexity == "complex" or intent.requires_reasoning or len(intent.domains) > 2:
        return "hybrid"
    return "hybrid"


# -- query synthesis -------------------------------------------------------------------------


def _context_block(profile_context: Sequence[str]) -> str:
    if not profile_context:
        return ""
    lines = "\n".join(f"- {text[:RERANK_TEXT_CHARS]}" for text in profile_context)
    return f"\n\nThe user's own memories, for context:\n{lines}"


SYNTHESIS_GUIDANCE = {
    "preference": (
        'The query asks for a recommendation. Bridge the gap between the question ("recommend X") '
        'and how the user\'s memories state what they use ("I use Y"): write search terms in the '
        "user's voice and name specific products, brands and tools."
    ),
    "temporal": (
        "The query is about time or order. Focus on date-related terms and chronological order; "
        'for a "which came first / last" question write terms for BOTH events.'
    ),
    "general": (
        "Stay within the query's domain (do not generalise) and prefer specific technical terms over generic words."
    ),
}


def synthesis_prompt(query: str, kind: str, profile_context: Sequence[str] = ()) -> list[Message]:
    low, high = TERM_COUNTS[kind]
    context = _context_block(profile_context) if kind == "preference" else ""
    return [
        {
            "role": "system",
            "content": (
                f"You expand a search query over a personal memory store into {low}-{high} alternative "
                f"search terms. {SYNTHESIS_GUIDANCE[kind]} Reply with a JSON array of {low} to {high} "
                "strings and nothing else."
            ),
        },
        {"role": "user", "content": f"Query: {query}{context}"},
    ]


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def parse_terms(text: str, kind: str, query: str) -> list[str]:
    """The synthesized terms (a JSON array, else one a line), at most the type's count, without
    repeats or the query itself; LLMFailure when none is left."""
    start, end = text.find("["), text.rfind("]")
    items: list[Any] = []
    if 0 <= start < end:
        try:
            parsed = json.loads(text[start : end + 1])
            items = parsed if isinstance(parsed, list) else []
        except ValueError:
            items = []
    if not items:
        items = [_BULLET.sub("", line) for line in text.splitlines()]
    seen = {query.strip().lower()}
    terms = []
    for item in items:
        term = " ".join(str(item).split()).strip("\"'` ")
        if term and term.lower() not in seen:
            seen.add(term.lower())
            terms.append(term[:200])
    if not terms:
        raise LLMFailure("malformed reply (no search terms)")
    return terms[: TERM_COUNTS[kind][1]]


# -- HyDE --------------------------------------------------------------------------------------

HYDE_GUIDANCE = {
    "preference": (
        "Generate a hypothetical memory written FROM THE USER'S PERSPECTIVE.\n"
        '- Use first-person: "I use...", "I prefer..."\n'
        "- Mention SPECIFIC products, brands, tools by NAME\n"
        "- Include context about WHY they like it"
    ),
    "temporal": (
        "Generate a hypothetical memory with specific dates/time references.\n"
        '- Include dates: "On March 15th..."\n'
        '- Mention sequence: "First X happened, then Y"\n'
        '- Include duration: "3 days before..."'
    ),
    "general": "Generate a hypothetical memory that would answer the query: one or two plain sentences.",
}


def hyde_prompt(query: str, kind: str, profile_context: Sequence[str] = ()) -> list[Message]:
    context = _context_block(profile_context) if kind == "preference" else ""
    return [
        {
            "role": "system",
            "content": f"{HYDE_GUIDANCE[kind]}\nReply with the memory's text only, at most three sentences.",
        },
        {"role": "user", "content": f"Query: {query}{context}"},
    ]


def parse_hyde(text: str) -> str:
    memory = " ".join(text.split()).strip("\"' ")
    if not memory:
        raise LLMFailure("malformed reply (empty hypothetical memory)")
    return memory[:1000]


# -- re-ranking --------------------------------------------------------------------------------


def rerank_prompt(query: str, texts: Sequence[str]) -> list[Message]:
    listing = "\n".join(f"[{n}] {' '.join(text.split())[:RERANK_TEXT_CHARS]}" for n, text in enumerate(texts, 1))
    return [
        {
            "role": "system",
            "content": (
                "You re-rank memories by how well each answers the query. Reply with a JSON array of the "
                "memories' numbers, most relevant first, and nothing else; leave out the irrelevant ones."
            ),
        },
        {"role": "user", "content": f"Query: {query}\n\nMemories:\n{listing}"},
    ]


# A JSON array of numbers; a lone `[3]` followed by text is a label of the prompt's listing
# (`[3] text…`), not an answer: a small model that echoes the listing, or makes one up, names
# memories without ranking them.
_NUMBER_ARRAY = re.compile(r"\[\s*\d+\s*(?:,\s*\d+\s*)+\]|\[\s*\d+\s*\](?![ \t]*[^\s.,;:!?\]])")
_BARE_NUMBERS = re.compile(r"[\s\d,]+")


def parse_rerank(text: str, count: int) -> list[int]:
    """0-based positions, best first: those the reply's JSON array names (the first array of
    numbers, or a reply of bare numbers; valid, first occurrences), then the others in their old
    order. LLMFailure when it names none."""
    array = _NUMBER_ARRAY.search(text)
    body = array.group() if array else text if _BARE_NUMBERS.fullmatch(text) else ""
    named = [int(n) - 1 for n in re.findall(r"\d+", body) if 1 <= int(n) <= count]
    order = list(dict.fromkeys(named))
    if not order:
        raise LLMFailure("malformed reply (no memory numbers)")
    return order + [i for i in range(count) if i not in order]
