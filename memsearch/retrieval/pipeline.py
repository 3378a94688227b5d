"""The search pipeline: route → recall → fuse → filter → adjust → select, with a full trace.

Which stages run and with what parameters is the profile's business (memsearch/profiles/).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np

from memsearch.embedding import Encoder
from memsearch.errors import InvalidInputError
from memsearch.profiles import Profile, load_profile
from memsearch.retrieval.candidates import Candidate, LegHit
from memsearch.retrieval.fusion import fuse
from memsearch.retrieval.recall import rank_hits, vector_top
from memsearch.retrieval.routing import Route, route_query
from memsearch.retrieval.scoring import apply_adjustments
from memsearch.retrieval.select import (
    drop_below,
    drop_exact_duplicates,
    drop_superseded,
    fit_budget,
    mmr_select,
    rank_by_final,
    take_top,
)
from memsearch.store import EVERYTHING, Scope, SQLiteStore, VectorIndex
from memsearch.store.fts import match_expression
from memsearch.timeutil import to_iso, utc_now

MODES = ("auto", "vector", "hybrid", "lexical")
LEXICAL, VECTOR = "lexical", "vector"
SCHEMA_VERSION = 1
MAX_K = 1000


@dataclass(frozen=True)
class SearchRequest:
    query: str
    k: int | None = None  # None: the profile's k
    mode: str = "auto"
    scope: Scope = EVERYTHING
    as_of: datetime | None = None  # "now" for decay; a search with it changes nothing
    max_tokens: int | None = None  # overrides the profile's token budget
    touch: bool = True  # record the access on the returned memories

    def __post_init__(self) -> None:
        if not self.query.strip():
            raise InvalidInputError("the query is empty; say what to search for")
        if self.mode not in MODES:
            raise InvalidInputError(f"unknown mode {self.mode!r} (choose from {', '.join(MODES)})")
        if self.k is not None and not 1 <= self.k <= MAX_K:
            raise InvalidInputError(f"k must be from 1 to {MAX_K}, not {self.k}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise InvalidInputError(f"--max-tokens must be at least 1, not {self.max_tokens}")

    @property
    def records_access(self) -> bool:
        return self.touch and self.as_of is None


@dataclass(frozen=True)
class SearchOutcome:
    request: SearchRequest
    route: Route
    profile: Profile
    now: datetime
    candidates: list[Candidate]  # every candidate, results first in order, each dropped or not

    @property
    def results(self) -> list[Candidate]:
        return [candidate for candidate in self.candidates if candidate.dropped is None]

    def to_dict(self, *, raw: bool = False) -> dict[str, Any]:
        """The JSON document of the contract (schema_version 1); scores are never rounded."""
        document: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "query": self.request.query,
            "mode": self.request.mode,
            "strategy": self.route.strategy,
            "strategy_reason": self.route.reason,
            "intents": list(self.route.intents),
            "profile": self.profile.name,
            "as_of": to_iso(self.now),
            "results": [
                {"rank": rank, **candidate_dict(candidate, self.profile)}
                for rank, candidate in enumerate(self.results, start=1)
            ],
        }
        if raw:
            document["candidates"] = [
                {**candidate_dict(candidate, self.profile), "dropped": candidate.dropped}
                for candidate in self.candidates
            ]
        return document


def explain_dict(candidate: Candidate, profile: Profile) -> dict[str, Any]:
    fusion = profile.fusion
    fusion_doc: dict[str, Any] = {"method": fusion.method}
    if fusion.method == "rrf":
        fusion_doc["k"] = fusion.rrf_k
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


def candidate_dict(candidate: Candidate, profile: Profile) -> dict[str, Any]:
    memory = candidate.memory
    return {
        "id": memory.id,
        "key": memory.key,
        "text": memory.text,
        "score": candidate.final,
        "created_at": to_iso(memory.created_at),
        "tags": list(memory.tags),
        "metadata": dict(memory.metadata),
        "project": memory.project,
        "namespace": memory.namespace,
        "session": memory.session,
        "role": memory.role,
        "pinned": memory.pinned,
        "superseded_by": memory.superseded_by,
        "explain": explain_dict(candidate, profile),
    }


# -- stages that read the store ------------------------------------------------------------


def choose_route(request: SearchRequest, profile: Profile) -> tuple[Route, tuple[str, ...]]:
    """The strategy and the legs to run: the mode's legs that the profile has."""
    route = route_query(request.query) if request.mode == "auto" else Route(request.mode, f"--mode {request.mode}")
    wanted = {"vector": (VECTOR,), "lexical": (LEXICAL,), "hybrid": (LEXICAL, VECTOR)}[route.strategy]
    legs = tuple(leg for leg in profile.legs if leg in wanted)
    if not legs:
        raise InvalidInputError(
            f"profile {profile.name} has no {route.strategy} leg (its legs: {', '.join(profile.legs)}); "
            "choose another --mode"
        )
    if len(legs) < len(wanted):
        route = replace(route, reason=f"{route.reason}; profile {profile.name} recalls by {' and '.join(legs)} only")
    return route, legs


def recall_lexical(store: SQLiteStore, query: str, scope: Scope, pool: int) -> dict[int, LegHit]:
    match = match_expression(query)
    return rank_hits(store.lexical_search(match, scope, pool)) if match else {}


def scope_mask(store: SQLiteStore, index: VectorIndex, scope: Scope) -> np.ndarray | None:
    if scope.is_everything:
        return None
    return np.isin(index.ids, np.asarray(store.scoped_ids(scope), np.int64))


def build_candidates(
    store: SQLiteStore, legs: Mapping[str, Mapping[int, LegHit]], cosines: Mapping[int, float] | None
) -> list[Candidate]:
    ids = sorted({memory_id for hits in legs.values() for memory_id in hits})
    memories = store.get_many(ids)
    return [
        Candidate(
            memory=memories[memory_id],
            legs={leg: hits[memory_id] for leg, hits in legs.items() if memory_id in hits},
            cosine=cosines.get(memory_id) if cosines is not None else None,
        )
        for memory_id in ids
        if memory_id in memories
    ]


def cosines_for(index: VectorIndex, query_vector: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
    """The query's cosine with each of `ids` that has a vector."""
    if index.ids.size == 0 or not ids:
        return {}
    wanted = np.asarray(ids, np.int64)
    rows = np.searchsorted(index.ids, wanted)
    rows = np.minimum(rows, index.ids.size - 1)
    present = index.ids[rows] == wanted
    scores = index.matrix[rows[present]] @ query_vector
    return {int(i): float(s) for i, s in zip(wanted[present], scores, strict=True)}


# -- the pure part -------------------------------------------------------------------------


def score_and_select(
    candidates: Sequence[Candidate],
    profile: Profile,
    k: int,
    now: datetime,
    project: str | None,
    vectors: Mapping[int, np.ndarray],
    max_tokens: int | None,
) -> list[Candidate]:
    """fuse → filter → adjust → select. Pure: everything it needs is in its arguments."""
    fused = fuse(candidates, profile.fusion, now)
    if profile.drop_superseded:
        fused = drop_superseded(fused)
    if profile.min_score is not None:
        fused = drop_below(fused, profile.min_score)
    ranked = rank_by_final(apply_adjustments(fused, profile.adjust, now, project))
    select = profile.select
    if select.drop_identical:
        ranked = drop_exact_duplicates(ranked)
    if select.candidate_limit is not None:
        ranked = take_top(ranked, select.candidate_limit.size(k), reason="candidate limit")
    if select.mmr_lambda is not None:
        ranked = mmr_select(ranked, k, vectors, select.mmr_lambda, select.mmr_tag_weight, select.duplicate_threshold)
    ranked = take_top(ranked, k)
    budget = max_tokens if max_tokens is not None else select.max_tokens
    if budget is not None:
        ranked = fit_budget(ranked, budget)
    return [c for c in ranked if c.dropped is None] + [c for c in ranked if c.dropped is not None]


def run_search(
    store: SQLiteStore,
    request: SearchRequest,
    query_vector: Callable[[str], np.ndarray],
    profile: Profile,
) -> SearchOutcome:
    """Run one search. `query_vector` embeds the query; it is called only when a vector leg runs."""
    route, legs_to_run = choose_route(request, profile)
    k = request.k or profile.k
    pool = profile.pool.size(k)
    project = request.scope.project if profile.project_boost else None
    scope = replace(request.scope, project=None) if profile.project_boost else request.scope
    now = request.as_of or utc_now()
    legs: dict[str, dict[int, LegHit]] = {}
    if LEXICAL in legs_to_run:
        legs[LEXICAL] = recall_lexical(store, request.query, scope, pool)
    index: VectorIndex | None = None
    vector: np.ndarray | None = None
    ranked_by_vector: list[tuple[int, float]] = []
    if VECTOR in legs_to_run or (profile.fusion.method == "weighted" and "vector" in profile.fusion.weights):
        vector = query_vector(request.query)
        index = store.vector_index()
    if VECTOR in legs_to_run and index is not None and vector is not None:
        size = index.ids.size if profile.exhaustive else pool
        ranked_by_vector = vector_top(index, vector, size, scope_mask(store, index, scope))
        legs[VECTOR] = rank_hits(ranked_by_vector[:pool])

    if profile.fusion.blend_vector is not None and legs_to_run == (VECTOR,):
        # CEMS's vector mode is a plain vector search: its score is the cosine, with no RRF blend.
        profile = replace(profile, fusion=replace(profile.fusion, method="weighted", weights={VECTOR: 1.0}))

    def attempt(vector_hits: dict[int, LegHit] | None) -> list[Candidate]:
        current = {**legs, VECTOR: vector_hits} if vector_hits is not None else legs
        ids = sorted({memory_id for hits in current.values() for memory_id in hits})
        cosines = cosines_for(index, vector, ids) if index is not None and vector is not None else None
        candidates = build_candidates(store, current, cosines)
        vectors = _vectors(index, ids) if profile.select.mmr_lambda is not None and index is not None else {}
        return score_and_select(candidates, profile, k, now, project, vectors, request.max_tokens)

    ranked = attempt(None)
    if profile.exhaustive and ranked_by_vector:
        ranked = _exact_top_k(ranked, ranked_by_vector, pool, k, profile, attempt)
    return SearchOutcome(request, route, profile, now, ranked)


def _exact_top_k(
    ranked: list[Candidate],
    ranked_by_vector: list[tuple[int, float]],
    pool: int,
    k: int,
    profile: Profile,
    attempt: Callable[[dict[int, LegHit]], list[Candidate]],
) -> list[Candidate]:
    """Grow the vector pool until no memory outside it could beat the k-th result.

    A weighted score is at most w_vector · cosine + Σ(other weights) (every other signal ≤ 1), so
    once the k-th score reaches that bound for the best cosine left out, the top k are exact.
    """
    weights = profile.fusion.weights
    others = sum(w for name, w in weights.items() if name != "vector")
    size = pool
    while size < len(ranked_by_vector):
        live = [c for c in ranked if c.dropped is None]
        bound = weights.get("vector", 0.0) * ranked_by_vector[size][1] + others
        if len(live) >= k and live[k - 1].final >= bound:
            break
        size *= 4
        ranked = attempt(rank_hits(ranked_by_vector[:size]))
    return ranked


def _vectors(index: VectorIndex, ids: Sequence[int]) -> dict[int, np.ndarray]:
    rows = np.searchsorted(index.ids, np.asarray(ids, np.int64))
    return {
        int(memory_id): index.matrix[row]
        for memory_id, row in zip(ids, rows, strict=True)
        if row < index.ids.size and index.ids[row] == memory_id
    }


def with_tau(profile: Profile, tau_days: float | None) -> Profile:
    """The profile with its decay time constant replaced; 0 switches decay off."""
    if tau_days is None:
        return profile
    if tau_days < 0:
        raise InvalidInputError(f"--tau must be 0 (no decay) or a positive number of days, not {tau_days:g}")
    if profile.decay() is None:
        raise InvalidInputError(f"profile {profile.name} has no time decay for --tau to set")
    adjust = tuple(
        a if a.kind != "decay" else replace(a, tau_days=tau_days)
        for a in profile.adjust
        if a.kind != "decay" or tau_days
    )
    return replace(profile, adjust=adjust)


def resolve_profile(profile: Profile | str | None) -> Profile:
    if isinstance(profile, Profile):
        return profile
    return load_profile(profile or "default")


def encoder_query_vector(encoder_factory: Callable[[], Encoder], store: SQLiteStore) -> Callable[[str], np.ndarray]:
    """Embed queries with the encoder the factory makes on first use, checked against the store."""
    cache: dict[str, Encoder] = {}

    def embed(query: str) -> np.ndarray:
        if "encoder" not in cache:
            encoder = encoder_factory()
            store.check_model(encoder.info)
            cache["encoder"] = encoder
        return cache["encoder"].encode([query])[0]

    return embed
