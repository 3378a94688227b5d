"""The search pipeline: route → recall → fuse → filter → adjust → select, with a full trace.

Which stages run and with what parameters is the profile's business (memsearch/profiles/). The
stages live in their own modules: request.py (what is asked), legs.py (route and recall),
fusion.py, scoring.py and select.py (the pure part), sessions.py (session level), explain.py
(the outcome and its JSON). This module runs them in order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from memsearch.choices import GRANULARITIES, MODES
from memsearch.errors import InvalidInputError, ModelVectorsMissingError
from memsearch.fields import MAX_K
from memsearch.models import EmbeddingModelInfo
from memsearch.profiles import Profile, leg_kind, leg_models, load_profile, with_environment
from memsearch.retrieval import ranking, rerank
from memsearch.retrieval.candidates import Candidate, LegHit, Ranked, rank_hits
from memsearch.retrieval.explain import SCHEMA_VERSION, Expansion, SearchOutcome
from memsearch.retrieval.fusion import fuse
from memsearch.retrieval.legs import (
    ModelQueryVector,
    Recall,
    build_candidates,
    choose_route,
    own_text_legs,
    request_route,
    with_lexical_words,
)
from memsearch.retrieval.query import ParsedQuery, parse_query
from memsearch.retrieval.request import SearchRequest
from memsearch.retrieval.routing import Route
from memsearch.retrieval.scoring import QueryFacts, Scored
from memsearch.retrieval.select import keep_min_score, select
from memsearch.retrieval.sessions import expand_neighbours, session_support
from memsearch.retrieval.stage_runner import StageRunner
from memsearch.store.base import Scope, SearchBackend, Store
from memsearch.text import WORD
from memsearch.timeutil import utc_now

if TYPE_CHECKING:  # the encoders and the model registry: imported by the searches that embed
    import numpy as np

    from memsearch.embedding import Encoder
    from memsearch.llm import LLM

__all__ = ["GRANULARITIES", "MAX_K", "MODES", "SCHEMA_VERSION", "SearchOutcome", "SearchRequest", "run_search"]


def llm_stages(request: SearchRequest, profile: Profile) -> list[str]:
    """The LLM stages this search would run, given an endpoint (profile and request decide)."""
    stages: list[str] = [s for s in ("intent", "synthesis", "hyde") if s in profile.expand.stages]
    if request.mode != "auto":
        stages = [s for s in stages if s != "intent"]
    if request.granularity == "session":
        stages = []
    if (request.rerank or profile.rerank.method) == "llm":
        stages.append("rerank")
    return stages


def run_search(
    store: SearchBackend,
    request: SearchRequest,
    query_vector: Callable[[str], np.ndarray],
    profile: Profile,
    llm: LLM | None = None,
    embed_with: ModelQueryVector | None = None,
) -> SearchOutcome:
    """Run one search. `query_vector` embeds the query; it is called only when a vector is needed;
    `embed_with` embeds it with another model, for the legs that name one (`vector(gemma)`), whose
    vectors the store must hold (else ModelVectorsMissingError). `llm` (optional) runs the
    profile's LLM stages; without it they are skipped, with a note."""
    with store.one_search():  # the store's own state read once
        return _run_search(store, request, query_vector, profile, llm, embed_with)


def _intent_cached(llm: LLM, query: str) -> bool:
    from memsearch.retrieval import llm_prompts

    return llm.is_cached(llm_prompts.intent_prompt(query))


def _run_search(
    store: SearchBackend,
    request: SearchRequest,
    query_vector: Callable[[str], np.ndarray],
    profile: Profile,
    llm: LLM | None,
    embed_with: ModelQueryVector | None,
) -> SearchOutcome:
    check_models_held(store, profile)
    stages = StageRunner(llm, llm_stages(request, profile), request.max_ms)
    stages.plan(lambda stage: stage == "intent" and llm is not None and _intent_cached(llm, request.query))
    query = with_lexical_words(store, parse_query(request.query))  # the one reading of the query's text
    route, legs_to_run = choose_route(request_route(request, query), profile)
    if stages.wants("intent"):
        from memsearch.retrieval import llm_prompts  # a search with an LLM stage imports the prompts

        intent = stages.ask("intent", llm_prompts.intent_prompt(request.query), llm_prompts.parse_intent)
        if intent is not None:
            reason = f"LLM intent: complexity {intent.complexity}, {len(intent.domains)} domain(s)" + (
                ", needs reasoning" if intent.requires_reasoning else ""
            )
            llm_route = Route(llm_prompts.route_to_strategy(intent), reason, route.intents, route.exact_tokens)
            route, legs_to_run = choose_route(llm_route, profile)
    if profile.fusion.blend_vector is not None and {leg_kind(s) for s in legs_to_run.values()} == {"vector"}:
        # CEMS's vector mode is a plain vector search: its score is the cosine, with no RRF blend.
        profile = replace(profile, fusion=replace(profile.fusion, method="weighted", weights={"vector": 1.0}))
    scope = replace(request.scope, project=None) if profile.project_boost else request.scope
    search = SearchRun(
        store,
        request,
        query,
        query_vector,
        profile,
        legs_to_run,
        k=request.k or profile.k,
        now=request.as_of or utc_now(),
        project=request.scope.project if profile.project_boost else None,
        stages=stages,
        route=route,
        embed_with=embed_with,
    )
    sessions_in_scope = not scope.kinds or "session" in scope.kinds
    if request.granularity == "session" and sessions_in_scope and store.count(replace(scope, kinds=("session",))):
        sessions = search.sessions(scope)
        return search.outcome(sessions)
    # Session chunks are kept out of turn results; a store without any needs no such filter.
    turn_scope = replace(scope, kinds=("note", "turn")) if not scope.kinds and store.has_kind("session") else scope
    ranked = search.ranked(turn_scope)
    if request.granularity == "session":  # no session chunks: chunk-level ranking with neighbours
        ranked = expand_neighbours(ranked, store, profile.neighbours)
    return search.outcome(ranked)


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class SearchRun:
    """One search's fixed inputs; `ranked` and `sessions` run it at turn or session level."""

    store: SearchBackend
    request: SearchRequest
    query: ParsedQuery
    query_vector: Callable[[str], np.ndarray]
    profile: Profile
    legs_to_run: Mapping[str, str]
    k: int
    now: datetime
    project: str | None
    stages: StageRunner
    route: Route
    embed_with: ModelQueryVector | None = None
    recalls: list[Recall] = field(default_factory=list)  # in the order they ran
    expansions: list[Expansion] = field(default_factory=list)
    fused_profile: list[Profile] = field(default_factory=list)  # with the expansions' weights, once known

    def outcome(self, candidates: Sequence[Candidate]) -> SearchOutcome:
        profile = self.fused_profile[-1] if self.fused_profile else self.profile
        if self.request.min_score is not None:  # on the scores as finally shown
            candidates = keep_min_score(candidates, self.request.min_score)
        return SearchOutcome(
            self.request, self.route, profile, self.now, candidates, self.query.lexical, self.embedded_query(),
            stages=[t.to_dict() for t in self.stages.trace], expansions=list(self.expansions),
            vector_engines=self.engines(lexical=False), lexical_engines=self.engines(lexical=True),
        )  # fmt: skip

    @property
    def pool(self) -> int:
        return self.profile.pool.size(self.k)

    def recall(
        self, scope: Scope, legs: Mapping[str, str] | None = None
    ) -> tuple[Recall, dict[str, dict[int, LegHit]]]:
        recall = Recall(
            self.store, self.query, scope, self.pool, self.profile, self.query_vector, today=self.now.date(),
            embed_with=self.embed_with,
        )  # fmt: skip
        self.recalls.append(recall)
        return recall, recall.legs(legs or self.legs_to_run)

    def engines(self, lexical: bool) -> dict[str, str]:
        """How the first recall's vector legs ("exact" or "index") or lexical legs ("exact" or
        "bounded") were answered, by leg name."""
        if not self.recalls:
            return {}
        engines = self.recalls[0].engines
        return {
            name: engines[spec]
            for name, spec in self.legs_to_run.items()
            if spec in engines and (leg_kind(spec) == "lexical") == lexical
        }

    def embedded_query(self) -> str | None:
        """The text the first recall (the one whose memories are returned) embedded, if it did."""
        return next((r.embedded_text for r in self.recalls if r.embedded_text is not None), None)

    def uses_vectors(self, recall: Recall) -> bool:
        """Whether candidates get cosines (and MMR vectors): when the query was embedded or the
        profile scores by cosine."""
        fusion = self.profile.fusion
        scores_cosine = fusion.blend_vector is not None or (fusion.method == "weighted" and "vector" in fusion.weights)
        return scores_cosine or recall.embedded

    def candidates(
        self, recall: Recall, with_cosines: bool, legs: Mapping[str, Mapping[int, LegHit]]
    ) -> list[Candidate]:
        if not with_cosines:
            return build_candidates(self.store, legs, None)
        vector = recall.vector()
        return build_candidates(self.store, legs, lambda ids: self.store.cosines(vector, ids))

    def ranked(self, scope: Scope) -> Sequence[Candidate]:
        recall, legs = self.recall(scope)
        with_vectors = self.uses_vectors(recall)
        profile = self.profile
        stages = self.stages
        intents = self.query.intents
        diverse = None
        if profile.expand.diverse_lambda is not None and "aggregation" in intents and stages.llm is not None:
            diverse = profile.expand.diverse_lambda

        def attempt(extra: dict[str, dict[int, LegHit]], final: bool = True) -> Sequence[Candidate]:
            rerank_method = (self.request.rerank or profile.rerank.method) if final else "off"
            if ranking.fits(profile, rerank_method) and not (final and diverse is not None):
                cosines_of = None
                if with_vectors:
                    vector = recall.vector()
                    cosines_of = lambda ids: self.store.cosines(vector, ids)  # noqa: E731
                return ranking.rank_columns(
                    self.store, {**legs, **extra}, cosines_of, profile, self.k, self.now, self.project,
                    self.request.max_tokens, self.query_facts, boosts=self.request.boosts,
                )  # fmt: skip
            candidates = self.candidates(recall, with_vectors, {**legs, **extra})
            ids = [c.id for c in candidates]
            # MMR compares the memories' own vectors, which a lexical search has too.
            mmr = profile.select.mmr_lambda is not None or (final and diverse is not None)
            vectors = self.store.vectors(ids) if mmr else {}
            fused = fuse(candidates, profile.fusion, self.now)
            if final:
                fused = self.rerank(fused)
            return select(
                fused, profile, self.k, self.now, self.project, vectors, self.request.max_tokens,
                self.query_facts([c.memory for c in candidates]), boosts=self.request.boosts,
                diverse_lambda=diverse if final else None,
            )  # fmt: skip

        wants_expansion = stages.wants("synthesis") or stages.wants("hyde")
        expansion_legs: dict[str, dict[int, LegHit]] = {}
        if wants_expansion and self.route.strategy != "hybrid":
            for stage in ("synthesis", "hyde"):
                if stages.wants(stage):
                    stages.skip(stage, f"the {self.route.strategy} strategy runs no expansion")
        elif wants_expansion:
            from memsearch.retrieval import llm_prompts

            kind = llm_prompts.query_type(intents)
            context: list[str] = []
            if kind == "preference":  # the user's own memories: the offline search's best
                context = [c.memory.text for c in _results(attempt({}, final=False))]
                context = context[: llm_prompts.PROFILE_CONTEXT_MEMORIES]
            expansion_legs = self.expand(scope, kind, context)
            if expansion_legs:
                weights = {**profile.fusion.weights, **{name: profile.expand.weight for name in expansion_legs}}
                profile = replace(profile, fusion=replace(profile.fusion, weights=weights))
                self.fused_profile.append(profile)
        if diverse is not None:
            stages.note("diverse", f"aggregation query: MMR λ {diverse:g}, the best of each session first")
        ranked = attempt(expansion_legs)
        if recall.exhaustive_ranking:
            name = next(n for n, spec in self.legs_to_run.items() if spec == "vector")
            ranked = _exact_top_k(
                ranked,
                recall.exhaustive_ranking,
                self.pool,
                self.k,
                profile,
                lambda hits: attempt({**expansion_legs, name: hits}),
            )
        return ranked

    def expand(self, scope: Scope, kind: str, context: list[str]) -> dict[str, dict[int, LegHit]]:
        """CEMS's query synthesis and HyDE: each expansion's text runs the legs (HyDE, a
        hypothetical memory, the vector legs only), as named legs `synth1.lexical`, `hyde.vector`…"""
        from memsearch.retrieval import llm_prompts

        query, stages = self.request.query, self.stages
        texts: list[tuple[str, str, str]] = []  # (name, stage, text)
        if stages.wants("synthesis"):
            prompt = llm_prompts.synthesis_prompt(query, kind, context)
            terms = stages.ask("synthesis", prompt, lambda text: llm_prompts.parse_terms(text, kind, query))
            texts += [(f"synth{n}", "synthesis", term) for n, term in enumerate(terms or [], start=1)]
        if stages.wants("hyde"):
            hyde = stages.ask("hyde", llm_prompts.hyde_prompt(query, kind, context), llm_prompts.parse_hyde)
            if hyde is not None:
                texts.append(("hyde", "hyde", hyde))
        legs: dict[str, dict[int, LegHit]] = {}
        for name, stage, text in texts:
            specs = {
                f"{name}.{leg}": spec
                for leg, spec in self.legs_to_run.items()
                if leg_kind(spec) != "time" and (stage != "hyde" or leg_kind(spec) == "vector")
            }
            recall = Recall(
                self.store, parse_query(text), scope, self.pool, self.profile, self.query_vector,
                embed_with=self.embed_with,
            )  # fmt: skip
            legs.update(recall.legs(specs))
            self.expansions.append(Expansion(name, stage, text, specs))
        return legs

    def rerank(self, fused: list[Candidate]) -> list[Candidate]:
        """siftcoder's re-rank hook / CEMS's LLM re-ranking of the top `limit` fused candidates."""
        method = self.request.rerank or self.profile.rerank.method
        if method == "off" or not fused:
            return fused
        limit = self.profile.rerank.limit
        ordered = sorted(fused, key=lambda c: (-c.fusion, c.id))
        head = ordered[:limit]
        texts = [c.memory.text for c in head]
        if method == "deterministic":
            order = rerank.coverage_order(self.query.content_words, texts)
            self.stages.note("rerank", f"deterministic (query-word coverage), top {len(head)}")
        else:
            from memsearch.retrieval import llm_prompts

            answer = self.stages.ask(
                "rerank",
                llm_prompts.rerank_prompt(self.request.query, texts),
                lambda t: llm_prompts.parse_rerank(t, len(texts)),
            )
            if answer is None:
                return fused
            order = answer
            self.stages.trace[-1].output = [head[i].id for i in order]  # as memory ids
        return rerank.apply_order(ordered, order, method)

    def sessions(self, scope: Scope) -> list[Candidate]:
        """Session chunks are what is returned; their turns add bounded support (Memsense)."""
        kinds = tuple(kind for kind in ("session", "note") if not scope.kinds or kind in scope.kinds)
        recall, session_legs = self.recall(replace(scope, kinds=kinds), own_text_legs(self.legs_to_run))
        turn_recall, turn_legs = self.recall(replace(scope, kinds=("turn",)))
        with_vectors = self.uses_vectors(recall) or self.uses_vectors(turn_recall)
        fusion, now = self.profile.fusion, self.now
        turns = fuse(self.candidates(turn_recall, with_vectors, turn_legs), fusion, now)
        sessions = fuse(self.candidates(recall, with_vectors, session_legs), fusion, now)
        found = {c.id for c in sessions}
        missing = sorted({t.memory.parent_id for t in turns if t.memory.parent_id is not None} - found)
        memories = self.store.get_many(missing)  # sessions only their turns found: no legs of their own
        sessions += [Candidate(memories[i], {}) for i in missing if i in memories]
        supported = session_support(
            sessions, turns, self.profile.session_support_cap, self.profile.session_support_share
        )
        mmr = self.profile.select.mmr_lambda is not None
        vectors = self.store.vectors([c.id for c in supported]) if mmr else {}
        return select(
            supported, self.profile, self.k, now, self.project, vectors, self.request.max_tokens,
            self.query_facts([c.memory for c in supported]), boosts=self.request.boosts,
        )  # fmt: skip

    def query_facts(self, memories: Sequence[Scored]) -> QueryFacts:
        """The speakers the query names (a name the lexical legs matched is among the candidates'
        speakers), the conversations they take part in, whether it asks when or for a name, and
        the words of the candidates' speakers' names; from the candidates' memories (or the
        fields of them a search ranks by)."""
        query, kinds = self.query, {a.kind for a in self.profile.adjust}
        named: tuple[str, ...] = ()
        if kinds & {"speaker", "about"}:
            named = query.names(sorted({m.role for m in memories if m.role}))
        participants: dict[str, frozenset[str]] = {}
        if "about" in kinds and named:
            conversations = sorted({m.conversation for m in memories if m.conversation})
            participants = {c: frozenset(self.store.roles(Scope(conversation=c))) for c in conversations}
        speaker_words: frozenset[str] = frozenset()
        if "names" in kinds:
            speaker_words = frozenset(w for m in memories if m.role for w in WORD.findall(m.role))
        return QueryFacts(
            named, query.asks_when, participants=participants, asks_name=query.asks_name, speaker_words=speaker_words
        )


def _exact_top_k(
    ranked: Sequence[Candidate],
    ranking: list[tuple[int, float]],
    pool: int,
    k: int,
    profile: Profile,
    attempt: Callable[[dict[int, LegHit]], Sequence[Candidate]],
) -> Sequence[Candidate]:
    """Grow the vector pool until no memory outside it could beat the k-th result.

    A weighted score is at most w_vector · cosine + Σ(other weights) (every other signal ≤ 1), so
    once the k-th score reaches that bound for the best cosine left out, the top k are exact.
    """
    weights = profile.fusion.weights
    others = sum(w for name, w in weights.items() if name != "vector")
    size = pool
    while size < len(ranking):
        live = _results(ranked)
        bound = weights.get("vector", 0.0) * ranking[size][1] + others
        if len(live) >= k and live[k - 1].final >= bound:
            break
        size *= 4
        ranked = attempt(rank_hits(ranking[:size]))
    return ranked


def _results(ranked: Sequence[Candidate]) -> list[Candidate]:
    """The live candidates, in order (of ranked ones, without building the others' records)."""
    if isinstance(ranked, Ranked):
        return list(ranked[: ranked.live])
    return [c for c in ranked if c.dropped is None]


def settle(candidates: Sequence[Candidate]) -> None:
    """Build every record of ranked candidates now (they read their rows when first asked for)."""
    if isinstance(candidates, Ranked):
        candidates.settle()


def with_tau(profile: Profile, tau_days: float | None) -> Profile:
    """The profile with its decay time constant replaced (a request's, which its constructor
    checked: a finite number, 0 or more); 0 switches decay off."""
    if tau_days is None:
        return profile
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
        from memsearch.embedding import encode_queries

        if "encoder" not in cache:
            encoder = encoder_factory()
            store.check_model(encoder.info)
            cache["encoder"] = encoder
        vector: np.ndarray = encode_queries(cache["encoder"], [query])[0]  # with the model's query prefix
        return vector

    return embed


def check_models_held(store: SearchBackend, profile: Profile) -> None:
    """Refuse a profile whose legs name a model whose vectors the store does not hold."""
    if needed := leg_models(profile.legs):
        from memsearch.embedding.registry import held_model

        held = store.extra_models()
        for model in needed:
            if held_model(held, model) is None:
                raise ModelVectorsMissingError(profile.name, model)


def model_query_vector(
    model_encoder: Callable[[EmbeddingModelInfo], Encoder], store: SearchBackend
) -> ModelQueryVector:
    """Embed queries with another model the store holds (by name), through the encoder
    `model_encoder` gives for it (loaded once by its owner), with that model's query prefix."""
    held: dict[str, EmbeddingModelInfo] = {}

    def embed(model: str, query: str) -> np.ndarray:
        from memsearch.embedding import encode_queries
        from memsearch.embedding.registry import held_model

        if model not in held:
            found = held_model(store.extra_models(), model)
            if found is None:  # dropped since the profile was checked
                raise ModelVectorsMissingError("in use", model)
            held[model] = found
        vector: np.ndarray = encode_queries(model_encoder(held[model]), [query])[0]
        return vector

    return embed


def run_searches(
    store: Store,
    requests: Sequence[SearchRequest],
    encoder: Callable[[], Encoder],
    llm: Callable[[], LLM | None],
    model_encoder: Callable[[EmbeddingModelInfo], Encoder] | None = None,
) -> list[SearchOutcome]:
    """Run the (checked) requests in order, each with its request's profile and time-decay constant
    (resolved once for the requests of a batch that share them), embedding queries with the encoder
    `encoder` gives on first use (and with the store's other models' encoders `model_encoder` gives,
    for the legs that name them) and asking `llm` for one only when a request has LLM stages to run.
    A search records the access on the memories it returns unless its request says not to."""
    embed = encoder_query_vector(encoder, store)
    embed_with = model_query_vector(model_encoder, store) if model_encoder is not None else None
    profiles: dict[tuple[int, float | None], Profile] = {}
    outcomes: list[SearchOutcome] = []
    for request in requests:
        chosen_key = (id(request.profile), request.tau_days)  # requests of a batch share their profile
        chosen = profiles.get(chosen_key)
        if chosen is None:
            chosen = with_environment(with_tau(resolve_profile(request.profile), request.tau_days))
            profiles[chosen_key] = chosen
        asked = llm() if llm_stages(request, chosen) else None
        with store.one_search():  # one reading of the store's state for both
            pending = store.pending_count()  # memories the vector legs cannot find yet
            outcome = _run_search(store, request, embed, chosen, asked, embed_with)
        if pending:
            outcome = replace(outcome, vectors_pending=pending)
        if request.records_access:
            for earlier in outcomes:  # their dropped candidates' records as they were ranked, before this write
                settle(earlier.candidates)
            store.touch([c.id for c in outcome.results], utc_now())
        outcomes.append(outcome)
    return outcomes
