"""The search pipeline: route → recall → fuse → adjust → filter → select, with a full trace."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np

from memsearch.embedding import Encoder
from memsearch.errors import InvalidInputError
from memsearch.retrieval.candidates import Candidate, LegHit
from memsearch.retrieval.fusion import rrf
from memsearch.retrieval.recall import rank_hits, vector_top
from memsearch.retrieval.routing import Route, route_query
from memsearch.retrieval.scoring import apply_time_decay
from memsearch.retrieval.select import drop_exact_duplicates, rank_by_final, take_top
from memsearch.store import EVERYTHING, Scope, SQLiteStore
from memsearch.store.fts import match_expression
from memsearch.timeutil import to_iso, utc_now

MODES = ("auto", "vector", "hybrid", "lexical")
LEXICAL, VECTOR = "lexical", "vector"
SCHEMA_VERSION = 1
MAX_K = 1000


@dataclass(frozen=True)
class Profile:
    """The parameters of the stages; a named, documented set of them."""

    name: str = "default"
    pool: int = 50  # candidates each leg contributes to fusion (at least 4·k)
    rrf_k: float = 60.0
    leg_weights: Mapping[str, float] = field(default_factory=lambda: {LEXICAL: 1.0, VECTOR: 1.0})
    decay_tau_days: float | None = 180.0  # None: no time decay

    def pool_for(self, k: int) -> int:
        return max(self.pool, 4 * k)


DEFAULT_PROFILE = Profile()


@dataclass(frozen=True)
class SearchRequest:
    query: str
    k: int = 10
    mode: str = "auto"
    scope: Scope = EVERYTHING
    as_of: datetime | None = None

    def __post_init__(self) -> None:
        if not self.query.strip():
            raise InvalidInputError("the query is empty; say what to search for")
        if self.mode not in MODES:
            raise InvalidInputError(f"unknown mode {self.mode!r} (choose from {', '.join(MODES)})")
        if not 1 <= self.k <= MAX_K:
            raise InvalidInputError(f"k must be from 1 to {MAX_K}, not {self.k}")


@dataclass(frozen=True)
class SearchOutcome:
    request: SearchRequest
    route: Route
    profile: Profile
    now: datetime
    candidates: list[Candidate]  # every candidate, best first, each dropped or not

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
    return {
        "legs": {leg: {"rank": hit.rank, "score": hit.score} for leg, hit in sorted(candidate.legs.items())},
        "fusion": {
            "method": "rrf",
            "k": profile.rrf_k,
            "weights": {leg: profile.leg_weights.get(leg, 1.0) for leg in sorted(candidate.legs)},
            "terms": dict(sorted(candidate.fusion_terms.items())),
            "score": candidate.fusion,
        },
        "factors": [
            {"name": f.name, "op": f.op, "value": f.value, **({"detail": dict(f.detail)} if f.detail else {})}
            for f in candidate.factors
        ],
        "final": candidate.final,
    }


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
        "explain": explain_dict(candidate, profile),
    }


def choose_route(request: SearchRequest) -> Route:
    if request.mode == "auto":
        return route_query(request.query)
    return Route(request.mode, f"--mode {request.mode}")


def recall_lexical(store: SQLiteStore, query: str, scope: Scope, pool: int) -> dict[int, LegHit]:
    match = match_expression(query)
    return rank_hits(store.lexical_search(match, scope, pool)) if match else {}


def recall_vector(store: SQLiteStore, query_vector: np.ndarray, scope: Scope, pool: int) -> dict[int, LegHit]:
    index = store.vector_index()
    allowed = None if scope.is_everything else np.isin(index.ids, np.asarray(store.scoped_ids(scope), np.int64))
    return rank_hits(vector_top(index, query_vector, pool, allowed))


def build_candidates(store: SQLiteStore, legs: Mapping[str, Mapping[int, LegHit]], profile: Profile) -> list[Candidate]:
    fused = rrf(legs, profile.rrf_k, profile.leg_weights)
    memories = store.get_many(list(fused))
    return [
        Candidate(
            memory=memories[memory_id],
            legs={leg: hits[memory_id] for leg, hits in legs.items() if memory_id in hits},
            fusion=score,
            fusion_terms=terms,
        )
        for memory_id, (score, terms) in fused.items()
        if memory_id in memories
    ]


def run_search(
    store: SQLiteStore,
    request: SearchRequest,
    query_vector: Callable[[str], np.ndarray],
    profile: Profile = DEFAULT_PROFILE,
) -> SearchOutcome:
    """Run one search. `query_vector` embeds the query; it is called only when a vector leg runs."""
    route = choose_route(request)
    pool = profile.pool_for(request.k)
    legs: dict[str, dict[int, LegHit]] = {}
    if route.strategy in (LEXICAL, "hybrid"):
        legs[LEXICAL] = recall_lexical(store, request.query, request.scope, pool)
    if route.strategy in (VECTOR, "hybrid"):
        legs[VECTOR] = recall_vector(store, query_vector(request.query), request.scope, pool)
    now = request.as_of or utc_now()
    candidates = build_candidates(store, legs, profile)
    if profile.decay_tau_days:
        candidates = apply_time_decay(candidates, now, profile.decay_tau_days)
    ranked = take_top(drop_exact_duplicates(rank_by_final(candidates)), request.k)
    return SearchOutcome(request, route, profile, now, ranked)


def with_tau(profile: Profile, tau_days: float | None) -> Profile:
    """The profile with its decay time constant replaced; 0 switches decay off."""
    if tau_days is None:
        return profile
    if tau_days < 0:
        raise InvalidInputError(f"--tau must be 0 (no decay) or a positive number of days, not {tau_days:g}")
    return replace(profile, decay_tau_days=tau_days or None)


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
