"""Who in the window says it: a turn's context legs credited by how much of its window's match is
its own (the `attribution` adjustment).

A turn's `context` view is the turn with two turns either side, its `prev` view the turn before it
and itself; the legs over those views find every turn of a window alike, whichever of them says
what the query asks. Among the candidates of one session, the turn whose own text matches the
query best in a window keeps its context legs' terms whole; a neighbour whose own match is weaker
keeps `share` of them (own / best, or exp((own − best) / temperature)), the `factor` (strength)
taking the rest away: the term becomes term · (1 − strength · (1 − share)). Its own legs (the
vector over its own text, the time leg) are untouched. Pure: everything is in the candidates.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memsearch.profiles import LegSpec, Profile
from memsearch.retrieval.candidates import Candidate, Factor
from memsearch.retrieval.scoring import QueryFacts
from memsearch.text import STOPWORDS, WORD

# How far each view reaches, in turns before and after the turn (memsearch.ingest.conversations).
VIEW_REACH: Mapping[str, tuple[int, int]] = {"context": (2, 2), "prev": (1, 0), "next": (0, 1)}


@dataclass(frozen=True)
class Attribution:
    strength: float = 1.0  # the share of a neighbour's context terms taken away when it says none of it
    temperature: float | None = None  # None: share = own / best; else exp((own − best) / temperature)
    signal: str = "cosine"  # the own match: "cosine" of the turn's own text with the query, or "words"


def window_legs(legs: Mapping[str, str]) -> dict[str, tuple[int, int]]:
    """The profile's legs over a window of turns (name → turns before, after)."""
    found = {}
    for name, spec in legs.items():
        view = LegSpec.parse(spec).view
        if view is not None and view in VIEW_REACH:
            found[name] = VIEW_REACH[view]
    return found


def share(own: float, best: float, temperature: float | None) -> float:
    """How much of a window's match is the turn's own: 1 when it is the best of its window."""
    if own >= best:
        return 1.0
    if temperature is not None:
        return math.exp((own - best) / temperature)
    return max(0.0, own) / best if best > 0 else 1.0


_SUFFIX = re.compile(r"(?:'s|’s|ing|ed|es|s)$")
# The words a question is asked with, not what it asks about.
QUESTION_WORDS = frozenset(["long", "many", "much", "often", "year", "month", "week", "day", "date", "time", "ago"])


def stems(text: str) -> frozenset[str]:
    """The text's words, lower-cased, without stop words, each without one plural, past or -ing
    ending ("finished", "finishing" and "finishes" are "finish")."""
    found = set()
    for word in WORD.findall(text.lower()):
        if word in STOPWORDS:
            continue
        stem = _SUFFIX.sub("", word)
        found.add(stem if len(stem) >= 3 else word)
    return frozenset(found)


def own_matches(candidates: Sequence[Candidate], signal: str, event: frozenset[str]) -> dict[int, float]:
    """Each turn candidate's own match: its cosine, or the share of the event's words it says."""
    if signal == "words":
        if not event:
            return {}
        return {c.id: len(event & stems(c.memory.text)) / len(event) for c in candidates}
    return {c.id: c.cosine for c in candidates if c.cosine is not None}


def attribute(
    candidates: Sequence[Candidate],
    reach: Mapping[str, tuple[int, int]],
    settings: Attribution,
    event: frozenset[str] = frozenset(),
) -> list[Candidate]:
    """Each turn candidate with a window leg's term gets one `attribution` factor (1 when its own
    match is the best of each window it was found by)."""
    matches = own_matches(candidates, settings.signal, event)
    own: dict[tuple[str | None, str | None, int], float] = {}
    for c in candidates:
        if c.memory.position is not None and c.id in matches:
            own[(c.memory.conversation, c.memory.session, c.memory.position)] = matches[c.id]
    out = []
    for c in candidates:
        memory = c.memory
        terms = {leg: c.fusion_terms[leg] for leg in reach if leg in c.fusion_terms}
        if memory.position is None or c.id not in matches or not terms or c.fusion <= 0:
            out.append(c)
            continue
        kept = 0.0
        shares: dict[str, float] = {}
        for leg, term in terms.items():
            before, after = reach[leg]
            window = [
                own[key]
                for p in range(memory.position - before, memory.position + after + 1)
                if (key := (memory.conversation, memory.session, p)) in own
            ]
            shares[leg] = share(matches[c.id], max(window), settings.temperature)
            kept += term * (1 - settings.strength * (1 - shares[leg]))
        value = (c.fusion - sum(terms.values()) + kept) / c.fusion
        out.append(c.with_factor(Factor("attribution", "mul", value, {"shares": shares})))
    return out


EXPERIMENT: dict[str, tuple[Attribution, str]] = {}  # profile name → settings, gate (bench only)


def attribute_windows(candidates: Sequence[Candidate], profile: Profile, facts: QueryFacts | None) -> list[Candidate]:
    """The profile's `attribution` adjustment, when it has one and the query asks when."""
    adjustment = next((a for a in profile.adjust if a.kind == "attribution"), None)
    if adjustment is None:
        return list(candidates)
    settings, gate = EXPERIMENT.get(profile.name, (Attribution(adjustment.factor), "when"))
    if gate == "when" and not (facts is not None and facts.asks_when):
        return list(candidates)
    event = (
        stems(" ".join(facts.content_words)) - stems(" ".join(facts.speaker_words)) - QUESTION_WORDS
        if facts
        else frozenset()
    )
    return attribute(candidates, window_legs(profile.legs), settings, event)


_LAST_SENTENCE = re.compile(r"[^.!?]*[.!?]*\s*$")


def asks(text: str, whole: bool = False) -> bool:
    """Whether the turn ends by asking (its last sentence ends with "?"); `whole`: it only asks
    (every sentence of it is a question)."""
    text = text.strip()
    if not text.endswith("?"):
        return False
    if not whole:
        return True
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if s]
    return all(s.endswith("?") for s in sentences)


QUESTION_EXPERIMENT: dict[str, tuple[str, bool]] = {}  # profile name → gate, whole (bench only)


def question_turns(candidates: Sequence[Candidate], profile: Profile, facts: QueryFacts | None) -> list[Candidate]:
    """The profile's `question` adjustment: × factor for a turn that ends by asking."""
    adjustment = next((a for a in profile.adjust if a.kind == "question"), None)
    if adjustment is None:
        return list(candidates)
    gate, whole = QUESTION_EXPERIMENT.get(profile.name, ("when", False))
    asked_when = facts is not None and facts.asks_when
    if (gate == "when" and not asked_when) or (gate == "notwhen" and asked_when):
        return list(candidates)
    out = []
    for c in candidates:
        if c.memory.kind == "turn":
            asked = asks(c.memory.text, whole)
            c = c.with_factor(Factor("question", "mul", adjustment.factor if asked else 1.0, {"asks": asked}))
        out.append(c)
    return out
