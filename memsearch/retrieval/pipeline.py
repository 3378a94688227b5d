"""The search pipeline: route → recall → fuse → filter → adjust → select, with a full trace.

Which stages run and with what parameters is the profile's business (memsearch/profiles/).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np

from memsearch.embedding import Encoder
from memsearch.errors import InvalidInputError
from memsearch.profiles import Profile, leg_kind, load_profile
from memsearch.retrieval.candidates import Candidate, LegHit
from memsearch.retrieval.dates import as_datetimes, date_ranges
from memsearch.retrieval.fusion import fuse
from memsearch.retrieval.recall import rank_hits
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
from memsearch.store.base import EVERYTHING, Scope, SearchBackend
from memsearch.text import STOPWORDS
from memsearch.timeutil import to_iso, utc_now

MODES = ("auto", "vector", "hybrid", "lexical")
GRANULARITIES = ("turn", "session")
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
    granularity: str = "turn"  # turn: turns and notes; session: session chunks (and notes)

    def __post_init__(self) -> None:
        if not self.query.strip():
            raise InvalidInputError("the query is empty; say what to search for")
        if self.mode not in MODES:
            raise InvalidInputError(f"unknown mode {self.mode!r} (choose from {', '.join(MODES)})")
        if self.k is not None and not 1 <= self.k <= MAX_K:
            raise InvalidInputError(f"k must be from 1 to {MAX_K}, not {self.k}")
        if self.granularity not in GRANULARITIES:
            raise InvalidInputError(f"granularity must be turn or session, not {self.granularity!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise InvalidInputError(f"must be at least 1, not {self.max_tokens}", field="max_tokens")

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
        "kind": memory.kind,
        "conversation": memory.conversation,
        "position": memory.position,
        "context_of": candidate.selection.get("context_of"),
        "explain": explain_dict(candidate, profile),
    }


# -- stages that read the store ------------------------------------------------------------


def choose_route(request: SearchRequest, profile: Profile) -> tuple[Route, dict[str, str]]:
    """The strategy and the legs to run: the profile's legs that belong to the mode."""
    route = route_query(request.query) if request.mode == "auto" else Route(request.mode, f"--mode {request.mode}")
    wanted = {"vector": ("vector",), "lexical": ("lexical",), "hybrid": ("lexical", "vector", "time")}[route.strategy]
    legs = {name: spec for name, spec in profile.legs.items() if leg_kind(spec) in wanted}
    if not legs:
        raise InvalidInputError(
            f"profile {profile.name} has no {route.strategy} leg (its legs: {', '.join(profile.legs)}); "
            "choose another mode"
        )
    kinds = {leg_kind(spec) for spec in legs.values()} - {"time"}
    if route.strategy == "hybrid" and len(kinds) < 2:
        route = replace(route, reason=f"{route.reason}; profile {profile.name} recalls by {' and '.join(kinds)} only")
    return route, legs


_WORD_WITH_POSSESSIVE = re.compile(r"\b(\w+)(?:'s)?\b")


def dense_query_text(store: SearchBackend, query: str, scope: Scope, share: float | None) -> str:
    """The query without the words found in more than `share` of the memories in scope (speaker
    names in a conversation, say): they pull the query vector towards every memory alike. The
    query is kept whole when nothing would remain."""
    if share is None:
        return query
    total = store.count(scope)
    limit = int(share * total) + 1
    common = {
        word
        for word in {w.lower() for w in _WORD_WITH_POSSESSIVE.findall(query)} - STOPWORDS
        if total and store.document_frequency(word, scope, limit) >= limit
    }
    if not common:
        return query
    kept = _WORD_WITH_POSSESSIVE.sub(lambda m: "" if m.group(1).lower() in common else m.group(0), query)
    kept = " ".join(kept.split())
    return kept if re.search(r"\w", kept) else query


@dataclass
class Recall:
    """What the legs of one search share: the store, the scope, the pool, and the query vector
    (embedded once, on first use)."""

    store: SearchBackend
    query: str
    scope: Scope
    pool: int
    profile: Profile
    embed: Callable[[str], np.ndarray]
    exhaustive_ranking: list[tuple[int, float]] = field(default_factory=list)
    _vector: np.ndarray | None = None

    @property
    def embedded(self) -> bool:
        return self._vector is not None

    def vector(self) -> np.ndarray:
        if self._vector is None:
            text = dense_query_text(self.store, self.query, self.scope, self.profile.dense_common_share)
            self._vector = self.embed(text)
        return self._vector

    def leg(self, spec: str) -> dict[int, LegHit]:
        kind = leg_kind(spec)
        if kind == "lexical":
            view = spec.partition("@")[2] or None
            return rank_hits(self.store.lexical_search(self.query, self.scope, self.pool, view))
        if kind == "time":
            return self.time_leg()
        view_role, _, role = spec.partition(":")
        view = view_role.partition("@")[2] or None
        scope = replace(self.scope, roles=(role,)) if role else self.scope
        exhaustive = self.profile.exhaustive and view is None and not role
        ranking = self.store.vector_search(self.vector(), scope, None if exhaustive else self.pool, view)
        if exhaustive:
            self.exhaustive_ranking = ranking
        return rank_hits(ranking[: self.pool])

    def time_leg(self) -> dict[int, LegHit]:
        """Every memory created within a date the query names, all ranked first; a range holding
        more memories than the pool is too broad to tell anything and is skipped."""
        hits: dict[int, LegHit] = {}
        for day_range in date_ranges(self.query):
            start, end = as_datetimes(day_range)
            ids = self.store.ids_created_between(start, end, self.scope, self.pool)
            if len(ids) <= self.pool:
                hits.update({memory_id: LegHit(1, 1.0) for memory_id in ids})
        return hits


def build_candidates(
    store: SearchBackend, legs: Mapping[str, Mapping[int, LegHit]], cosines: Mapping[int, float] | None
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


def named_speaker(query: str, speakers: Sequence[str]) -> str | None:
    """The one speaker the query names (whole words, any case), or None for none or several."""
    named = [s for s in speakers if re.search(rf"\b{re.escape(s)}\b", query, re.IGNORECASE)]
    return named[0] if len(named) == 1 else None


# -- the pure part -------------------------------------------------------------------------


def select(
    fused: Sequence[Candidate],
    profile: Profile,
    k: int,
    now: datetime,
    project: str | None,
    vectors: Mapping[int, np.ndarray],
    max_tokens: int | None,
    speaker: str | None = None,
) -> list[Candidate]:
    """filter → adjust → select over fused candidates. Pure: everything it needs is in its arguments."""
    if profile.drop_superseded:
        fused = drop_superseded(fused)
    if profile.min_score is not None:
        fused = drop_below(fused, profile.min_score)
    ranked = rank_by_final(apply_adjustments(fused, profile.adjust, now, project, speaker))
    choice = profile.select
    if choice.drop_identical:
        ranked = drop_exact_duplicates(ranked)
    if choice.candidate_limit is not None:
        ranked = take_top(ranked, choice.candidate_limit.size(k), reason="candidate limit")
    if choice.mmr_lambda is not None:
        ranked = mmr_select(ranked, k, vectors, choice.mmr_lambda, choice.mmr_tag_weight, choice.duplicate_threshold)
    ranked = take_top(ranked, k)
    budget = max_tokens if max_tokens is not None else choice.max_tokens
    if budget is not None:
        ranked = fit_budget(ranked, budget)
    return [c for c in ranked if c.dropped is None] + [c for c in ranked if c.dropped is not None]


def session_support(
    sessions: Sequence[Candidate], turns: Sequence[Candidate], cap: float, share: float
) -> list[Candidate]:
    """Memsense's session-first scoring: each session's fused score plus
    turn_support = min(cap, share · best turn's fused score) from its own turns.

    `sessions` may lack a session that only its turns found; it is added by the caller as a
    candidate with no legs. Returns the sessions with the support folded into the fusion score.
    """
    best: dict[int, Candidate] = {}
    counts: dict[int, int] = {}
    for turn in turns:
        parent = turn.memory.parent_id
        if parent is None:
            continue
        counts[parent] = counts.get(parent, 0) + 1
        if parent not in best or turn.fusion > best[parent].fusion:
            best[parent] = turn
    out = []
    for session in sessions:
        top = best.get(session.id)
        support = min(cap, share * top.fusion) if top is not None else 0.0
        detail = {
            "session_rrf_score": session.fusion,
            "turn_support": support,
            "supporting_turn_count": counts.get(session.id, 0),
            "best_turn_routes": sorted(top.legs) if top is not None else [],
            "best_turn_id": top.id if top is not None else None,
        }
        out.append(
            replace(
                session,
                fusion=session.fusion + support,
                fusion_terms={**session.fusion_terms, "turn_support": support},
                fusion_detail={**session.fusion_detail, **detail},
            )
        )
    return out


def expand_neighbours(ranked: Sequence[Candidate], store: SearchBackend, distance: int) -> list[Candidate]:
    """Results followed by the turns next to them (marked as context); the dropped after."""
    results = [c for c in ranked if c.dropped is None]
    shown = {c.id for c in results}
    out: list[Candidate] = []
    for hit in results:
        out.append(hit)
        if hit.memory.kind != "turn" or distance < 1:
            continue
        for memory in store.around(hit.memory, distance, distance):
            if memory.id not in shown:
                shown.add(memory.id)
                out.append(Candidate(memory, {}, fusion=0.0, selection={"context_of": hit.id}))
    return out + [c for c in ranked if c.dropped is not None]


def run_search(
    store: SearchBackend,
    request: SearchRequest,
    query_vector: Callable[[str], np.ndarray],
    profile: Profile,
) -> SearchOutcome:
    """Run one search. `query_vector` embeds the query; it is called only when a vector is needed."""
    route, legs_to_run = choose_route(request, profile)
    if profile.fusion.blend_vector is not None and {leg_kind(s) for s in legs_to_run.values()} == {"vector"}:
        # CEMS's vector mode is a plain vector search: its score is the cosine, with no RRF blend.
        profile = replace(profile, fusion=replace(profile.fusion, method="weighted", weights={"vector": 1.0}))
    scope = replace(request.scope, project=None) if profile.project_boost else request.scope
    search = _Search(
        store,
        request,
        query_vector,
        profile,
        legs_to_run,
        k=request.k or profile.k,
        now=request.as_of or utc_now(),
        project=request.scope.project if profile.project_boost else None,
    )
    if request.granularity == "session" and store.count(replace(scope, kinds=("session",))):
        return SearchOutcome(request, route, profile, search.now, search.sessions(scope))
    # Session chunks are kept out of turn results; a store without any needs no such filter.
    turn_scope = replace(scope, kinds=("note", "turn")) if not scope.kinds and store.has_kind("session") else scope
    ranked = search.ranked(turn_scope)
    if request.granularity == "session":  # no session chunks: chunk-level ranking with neighbours
        ranked = expand_neighbours(ranked, store, profile.neighbours)
    return SearchOutcome(request, route, profile, search.now, ranked)


@dataclass(frozen=True)
class _Search:
    """One search's fixed inputs; `ranked` and `sessions` run it at turn or session level."""

    store: SearchBackend
    request: SearchRequest
    query_vector: Callable[[str], np.ndarray]
    profile: Profile
    legs_to_run: Mapping[str, str]
    k: int
    now: datetime
    project: str | None

    @property
    def pool(self) -> int:
        return self.profile.pool.size(self.k)

    def recall(self, scope: Scope) -> tuple[Recall, dict[str, dict[int, LegHit]]]:
        recall = Recall(self.store, self.request.query, scope, self.pool, self.profile, self.query_vector)
        return recall, {name: recall.leg(spec) for name, spec in self.legs_to_run.items()}

    def uses_vectors(self, recall: Recall) -> bool:
        """Whether candidates get cosines (and MMR vectors): when the query was embedded or the
        profile scores by cosine."""
        fusion = self.profile.fusion
        scores_cosine = fusion.blend_vector is not None or (fusion.method == "weighted" and "vector" in fusion.weights)
        return scores_cosine or recall.embedded

    def candidates(
        self, recall: Recall, with_cosines: bool, legs: Mapping[str, Mapping[int, LegHit]]
    ) -> list[Candidate]:
        ids = sorted({memory_id for hits in legs.values() for memory_id in hits})
        cosines = self.store.cosines(recall.vector(), ids) if with_cosines else None
        return build_candidates(self.store, legs, cosines)

    def ranked(self, scope: Scope) -> list[Candidate]:
        recall, legs = self.recall(scope)
        with_vectors = self.uses_vectors(recall)
        profile = self.profile

        def attempt(extra: dict[str, dict[int, LegHit]]) -> list[Candidate]:
            candidates = self.candidates(recall, with_vectors, {**legs, **extra})
            ids = [c.id for c in candidates]
            vectors = self.store.vectors(ids) if profile.select.mmr_lambda is not None and with_vectors else {}
            speaker = None
            if any(a.kind == "speaker" for a in profile.adjust):
                # A speaker the query names is among the candidates: the lexical legs match the name.
                speaker = named_speaker(
                    self.request.query, sorted({c.memory.role for c in candidates if c.memory.role})
                )
            fused = fuse(candidates, profile.fusion, self.now)
            return select(fused, profile, self.k, self.now, self.project, vectors, self.request.max_tokens, speaker)

        ranked = attempt({})
        if recall.exhaustive_ranking:
            name = next(n for n, spec in self.legs_to_run.items() if spec == "vector")
            ranked = _exact_top_k(
                ranked, recall.exhaustive_ranking, self.pool, self.k, profile, lambda hits: attempt({name: hits})
            )
        return ranked

    def sessions(self, scope: Scope) -> list[Candidate]:
        """Session chunks are what is returned; their turns add bounded support (Memsense)."""
        recall, session_legs = self.recall(replace(scope, kinds=("session", "note")))
        turn_recall, turn_legs = self.recall(replace(scope, kinds=("turn",)))
        with_vectors = self.uses_vectors(recall) or self.uses_vectors(turn_recall)
        fusion, now = self.profile.fusion, self.now
        turns = fuse(self.candidates(turn_recall, with_vectors, turn_legs), fusion, now)
        sessions = fuse(self.candidates(recall, with_vectors, session_legs), fusion, now)
        found = {c.id for c in sessions}
        missing = sorted({t.memory.parent_id for t in turns if t.memory.parent_id is not None} - found)
        sessions += [replace(c, legs={}) for c in build_candidates(self.store, {"": dict.fromkeys(missing)}, None)]
        supported = session_support(
            sessions, turns, self.profile.session_support_cap, self.profile.session_support_share
        )
        vectors = self.store.vectors([c.id for c in supported]) if with_vectors else {}
        return select(supported, self.profile, self.k, now, self.project, vectors, self.request.max_tokens)


def _exact_top_k(
    ranked: list[Candidate],
    ranking: list[tuple[int, float]],
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
    while size < len(ranking):
        live = [c for c in ranked if c.dropped is None]
        bound = weights.get("vector", 0.0) * ranking[size][1] + others
        if len(live) >= k and live[k - 1].final >= bound:
            break
        size *= 4
        ranked = attempt(rank_hits(ranking[:size]))
    return ranked


def with_tau(profile: Profile, tau_days: float | None) -> Profile:
    """The profile with its decay time constant replaced; 0 switches decay off."""
    if tau_days is None:
        return profile
    if tau_days < 0:
        raise InvalidInputError(
            f"must be 0 (no decay) or a positive number of days, not {tau_days:g}", field="tau_days"
        )
    if profile.decay() is None:
        raise InvalidInputError(f"profile {profile.name} has no time decay to set", field="tau_days")
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


def encoder_query_vector(encoder_factory: Callable[[], Encoder], store: SearchBackend) -> Callable[[str], np.ndarray]:
    """Embed queries with the encoder the factory makes on first use, checked against the store."""
    cache: dict[str, Encoder] = {}

    def embed(query: str) -> np.ndarray:
        if "encoder" not in cache:
            encoder = encoder_factory()
            store.check_model(encoder.info)
            cache["encoder"] = encoder
        return cache["encoder"].encode([query])[0]

    return embed
