"""What a search answers: the outcome and its JSON document (schema_version 1), with the explain trace."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memsearch.models import RESULT_FIELDS
from memsearch.profiles import Profile
from memsearch.retrieval.candidates import Candidate, Ranked
from memsearch.retrieval.request import SearchRequest
from memsearch.retrieval.routing import Route
from memsearch.store.matches import match_offsets
from memsearch.text import LexicalQuery
from memsearch.timeutil import to_iso

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Expansion:
    """A text the LLM produced (a synthesized query or HyDE's hypothetical memory) and the legs it ran."""

    name: str  # synth1, synth2, …, hyde
    stage: str  # synthesis | hyde
    text: str
    legs: Mapping[str, str]  # leg name (`synth1.lexical`) → leg spec

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "stage": self.stage, "text": self.text, "legs": dict(self.legs)}


@dataclass(frozen=True)
class SearchOutcome:
    request: SearchRequest
    route: Route
    profile: Profile
    now: datetime
    # Every candidate, results first in order, each dropped or not. Ranked candidates (see
    # memsearch.retrieval.ranking) read the rows of the dropped ones when first asked for: ask
    # (`to_dict(raw=True)`) before the store is closed.
    candidates: Sequence[Candidate]
    lexical: LexicalQuery  # the query's words, phrases and grams as the lexical legs read them
    embedded_query: str | None = None  # the text embedded for the vector legs (None: not embedded)
    stages: list[dict[str, Any]] = field(default_factory=list)  # the LLM stages' trace (stage_runner.StageTrace)
    expansions: list[Expansion] = field(default_factory=list)
    # How each vector leg was searched: "exact" (every vector in scope) or "index" (approximate).
    vector_engines: Mapping[str, str] = field(default_factory=dict)
    # How each lexical leg was searched: "exact" (BM25's top k) or "bounded" (a large PostgreSQL
    # store read long posting lists up to a budget: scores exact, the top k not proven).
    lexical_engines: Mapping[str, str] = field(default_factory=dict)
    # Memories that wait for their vectors (stored by `index`, embedded after): the vector legs
    # could not find them yet; the lexical legs can.
    vectors_pending: int = 0

    @property
    def results(self) -> list[Candidate]:
        if isinstance(self.candidates, Ranked):  # the others' records are not built for this
            return list(self.candidates[: self.candidates.live])
        return [candidate for candidate in self.candidates if candidate.dropped is None]

    def matches(self, candidates: Sequence[Candidate]) -> dict[int, list[tuple[int, int]]]:
        """Where the query's words occur in each candidate's text, by memory id: [start, end)
        offsets in code points, the words as the lexical leg matches them (see
        memsearch.store.matches); what the front ends highlight."""
        offsets = match_offsets(self.lexical, [candidate.memory.text for candidate in candidates])
        return {candidate.id: spans for candidate, spans in zip(candidates, offsets, strict=True)}

    def to_dict(self, *, raw: bool = False, explain: bool = True) -> dict[str, Any]:
        """The JSON document of the contract (schema_version 1); scores are never rounded. `raw`
        adds every candidate; without `explain` rows carry no score breakdown (it is long). Each
        row's `matches` says where the query's words are in its text (see `matches`)."""
        matches = self.matches(self.candidates if raw else self.results)
        document: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "query": self.request.query,
            "mode": self.request.mode,
            "strategy": self.route.strategy,
            "strategy_reason": self.route.reason,
            "intents": list(self.route.intents),
            "profile": self.profile.name,
            # The profile's legs (name → spec), so a reader of the document (the CLI's --explain
            # through a server) need not have the profile to say what each leg measured.
            "legs": dict(self.profile.legs),
            "as_of": to_iso(self.now),
            "embedded_query": self.embedded_query,
            "stages": list(self.stages),
            "expansions": [expansion.to_dict() for expansion in self.expansions],
            "vector_search": dict(self.vector_engines),
            "lexical_search": dict(self.lexical_engines),
            "vectors_pending": self.vectors_pending,
            "results": [
                {"rank": rank, **candidate_dict(candidate, self.profile, matches[candidate.id], explain=explain)}
                for rank, candidate in enumerate(self.results, start=1)
            ],
        }
        if raw:
            document["candidates"] = [
                {
                    **candidate_dict(candidate, self.profile, matches[candidate.id], explain=explain),
                    "dropped": candidate.dropped,
                }
                for candidate in self.candidates
            ]
        return document


def explain_dict(candidate: Candidate, profile: Profile) -> dict[str, Any]:
    fusion = profile.fusion
    fusion_doc: dict[str, Any] = {"method": fusion.method}
    if fusion.method == "rrf":
        fusion_doc["k"] = fusion.rrf_k
    if fusion.method == "rrf":  # the weight of each leg that found it (1 unless the profile says otherwise)
        fusion_doc["weights"] = {leg: fusion.weights.get(leg, 1.0) for leg in sorted(candidate.legs)}
    else:
        fusion_doc["weights"] = dict(fusion.weights)
    fusion_doc["terms"] = dict(sorted(candidate.fusion_terms.items()))
    if candidate.fusion_detail:
        fusion_doc["detail"] = dict(candidate.fusion_detail)
    fusion_doc["score"] = candidate.fusion
    explain: dict[str, Any] = {
        "legs": {leg: {"rank": hit.rank, "score": hit.score} for leg, hit in sorted(candidate.legs.items())},
        "cosine": candidate.cosine,
        "fusion": fusion_doc,
        "factors": [
            {"name": f.name, "op": f.op, "value": f.value, **({"detail": dict(f.detail)} if f.detail else {})}
            for f in candidate.factors
        ],
        "final": candidate.final,
    }
    if candidate.selection:
        explain["selection"] = dict(candidate.selection)
    return explain


# A search result's score stands after its memory's id, key and text (see FieldSpec.result).
SCORE_PLACE = 4


def candidate_dict(
    candidate: Candidate, profile: Profile, matches: Sequence[tuple[int, int]] = (), *, explain: bool = True
) -> dict[str, Any]:
    memory = candidate.memory
    placed = [(f.spec.result or 0, f.name, f.to_json(getattr(memory, f.name))) for f in RESULT_FIELDS]
    placed.append((SCORE_PLACE, "score", candidate.final))
    row = {name: value for _, name, value in sorted(placed, key=lambda item: item[0])}
    row["context_of"] = candidate.selection.get("context_of")
    row["matches"] = [[start, end] for start, end in matches]
    if explain:
        row["explain"] = explain_dict(candidate, profile)
    return row
