"""Recall: the route a query takes, the legs it runs (each one ranked list from the store), and the
candidates they make."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, TypeVar

from memsearch.errors import InvalidInputError, StoreNotFoundError
from memsearch.models import OWN_TEXT_VIEWS, Memory
from memsearch.profiles import LegSpec, Profile, leg_kind
from memsearch.retrieval.candidates import Candidate, LegHit, rank_hits
from memsearch.retrieval.dates import MENTION_REACH, as_datetimes, mentioned_ranges
from memsearch.retrieval.query import ParsedQuery, distinctive_words
from memsearch.retrieval.request import SearchRequest
from memsearch.retrieval.routing import Route, route_query
from memsearch.store.base import Scope, SearchBackend
from memsearch.text import WORD

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np


def with_lexical_words(store: SearchBackend, query: ParsedQuery) -> ParsedQuery:
    """The query with the words its lexical legs search: its own, or for a query with more words
    than they take (a document given as the query) its most distinctive ones in this store."""
    if not query.has_more_words:
        return query
    memories, documents = store.word_documents([word for word, _ in query.word_counts])
    words = distinctive_words(query.word_counts, documents, memories)
    return replace(query, lexical=replace(query.lexical, words=words))


def request_route(request: SearchRequest, query: ParsedQuery) -> Route:
    """The route the request's mode asks for; in auto mode, the one the query's features choose."""
    return route_query(query.route) if request.mode == "auto" else Route(request.mode, f"--mode {request.mode}")


def choose_route(route: Route, profile: Profile) -> tuple[Route, dict[str, str]]:
    """The legs to run for the route (the mode's, or the one the query or the LLM's intent
    chose): the profile's legs that belong to it."""
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


def own_text_legs(legs: Mapping[str, str]) -> dict[str, str]:
    """The legs that differ for memories searched by their own text only (session chunks and
    notes: they have no view texts of their own, see OWN_TEXT_VIEWS): a leg over such a view
    repeats the plain leg's list, so only the first leg of each kind and view is kept."""
    kept: dict[str, str] = {}
    seen: set[tuple[str, str | None, str | None, str | None]] = set()
    for name, spec in legs.items():
        leg = LegSpec.parse(spec)
        key = (leg.kind, None if leg.view in OWN_TEXT_VIEWS else leg.view, leg.role, leg.model)
        if key not in seen:
            seen.add(key)
            kept[name] = spec
    return kept


MIN_MEMORIES_TO_CLEAN = 20  # below this, a word's share of the memories says nothing


def dense_query_text(store: SearchBackend, query: ParsedQuery, scope: Scope, share: float | None) -> str:
    """The query without the speaker names found in more than `share` of the memories that have a
    speaker in scope: in a conversation a name labels memories rather than tells them apart, and
    pulls the query vector towards every memory of that speaker alike. Only where that is sound:
    words that name a speaker in scope, with at least MIN_MEMORIES_TO_CLEAN such memories (notes
    without a speaker neither count nor dilute the share); the query is kept whole when nothing
    would remain."""
    if share is None:
        return query.text
    roles = store.roles(scope)
    speakers = query.name_words & {part.lower() for role in roles for part in WORD.findall(role)}
    if not speakers:
        return query.text
    spoken = replace(scope, roles=tuple(roles))  # the memories that have a speaker
    total = store.count(spoken)
    if total < MIN_MEMORIES_TO_CLEAN:
        return query.text
    limit = int(share * total) + 1
    common = frozenset(word for word in speakers if store.document_frequency(word, spoken, limit) >= limit)
    if not common:
        return query.text
    return query.without(common)


# Embeds a query with one of the store's other models (its name, the text): see run_searches.
ModelQueryVector = Callable[[str, str], "np.ndarray"]


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class Recall:
    """What the legs of one search share: the store, the scope, the pool, and the query vector
    (embedded once, on first use), and the query's vector of each other model a leg names."""

    store: SearchBackend
    query: ParsedQuery
    scope: Scope
    pool: int
    profile: Profile
    embed: Callable[[str], np.ndarray]
    exhaustive_ranking: list[tuple[int, float]] = field(default_factory=list)
    today: date | None = None  # resolves months named without a year
    embedded_text: str | None = None  # the text the query vector was made from, once made
    engines: dict[str, str] = field(default_factory=dict)  # leg spec → "exact", "index" or "bounded"
    embed_with: ModelQueryVector | None = None  # for legs of another model (`vector(gemma)`)
    _vector: np.ndarray | None = None
    _model_vectors: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def embedded(self) -> bool:
        return self._vector is not None

    def dense_text(self) -> str:
        """The text the query's vectors are made from (see dense_query_text), worked out once."""
        if self.embedded_text is None:
            self.embedded_text = dense_query_text(self.store, self.query, self.scope, self.profile.dense_common_share)
        return self.embedded_text

    def vector(self) -> np.ndarray:
        if self._vector is None:
            self._vector = self.embed(self.dense_text())
        return self._vector

    def model_vector(self, model: str) -> np.ndarray:
        """The query's vector of another model (with its query prefix), made once."""
        if model not in self._model_vectors:
            if self.embed_with is None:
                raise InvalidInputError(f"leg vector({model}) needs that model's encoder; none was given")
            self._model_vectors[model] = self.embed_with(model, self.dense_text())
        return self._model_vectors[model]

    def legs(self, specs: Mapping[str, str]) -> dict[str, dict[int, LegHit]]:
        """Every leg by name. On a store with `parallel_reads` the lexical legs run in a second
        thread (one after another, as they may share an answer) while this one embeds the query
        and runs the others."""
        lexical = [name for name, spec in specs.items() if leg_kind(spec) == "lexical"]
        if self.store.parallel_reads and 0 < len(lexical) < len(specs):
            found, others = _beside(
                lambda: {name: self.leg(specs[name]) for name in lexical},
                lambda: {name: self.leg(spec) for name, spec in specs.items() if name not in lexical},
            )
            found |= others
        else:
            found = {name: self.leg(spec) for name, spec in specs.items()}
        return {name: found[name] for name in specs}

    def leg(self, spec: str) -> dict[int, LegHit]:
        leg = LegSpec.parse(spec)
        if leg.kind == "lexical":
            hits = self.store.lexical_search(self.query.lexical, self.scope, self.pool, leg.view)
            self.engines[spec] = hits.engine
            return rank_hits(hits)
        if leg.kind == "time":
            return self.time_leg()
        if leg.role and self.scope.roles and leg.role not in self.scope.roles:
            return {}  # a speaker's leg finds nothing in a scope of other speakers
        scope = replace(self.scope, roles=(leg.role,)) if leg.role else self.scope
        if leg.model is not None:
            of_model = self.store.vector_search(self.model_vector(leg.model), scope, self.pool, model=leg.model)
            self.engines[spec] = of_model.engine
            return rank_hits(of_model)
        exhaustive = self.profile.exhaustive and leg.view is None and leg.role is None
        ranking = self.store.vector_search(self.vector(), scope, None if exhaustive else self.pool, leg.view)
        self.engines[spec] = ranking.engine
        if exhaustive:
            self.exhaustive_ranking = ranking
        return rank_hits(ranking[: self.pool])

    def time_leg(self) -> dict[int, LegHit]:
        """The memories dated within a date the query names: those created then, then those created
        within MENTION_REACH after it whose words date something into it ("yesterday", "last
        weekend"), each group by cosine with the query (a date holding many memories still ranks
        them). A date that holds every memory in scope tells nothing and is not searched for the
        former."""
        best: dict[int, float] = {}
        in_scope: int | None = None
        created: set[int] = set()  # created within a named date: ranked before those that speak of one
        for day_range in self.query.date_ranges(self.today):
            start, end = as_datetimes(day_range)
            if (within := self._within(start, end)) is not None:
                if in_scope is None:
                    in_scope = self.store.count(self.scope)
                if self.store.count(within) < in_scope:
                    found = self._dated_search(within)
                    created.update(memory_id for memory_id, _ in found)
                    best_of(best, found)
            if (later := self._within(end + timedelta(microseconds=1), end + MENTION_REACH)) is not None:
                hits = self._dated_search(later)
                said = self.store.get_many([memory_id for memory_id, _ in hits])
                best_of(best, [hit for hit in hits if hit[0] in said and speaks_of(said[hit[0]], day_range)])
        return rank_hits(sorted(best.items(), key=lambda hit: (hit[0] not in created, -hit[1])))

    def _within(self, since: datetime, until: datetime) -> Scope | None:
        """The search's scope narrowed to memories created from `since` to `until`; None when
        nothing of the scope can be left."""
        since = max(since, self.scope.since) if self.scope.since else since
        until = min(until, self.scope.until) if self.scope.until else until
        return replace(self.scope, since=since, until=until) if since <= until else None

    def _dated_search(self, within: Scope) -> list[tuple[int, float]]:
        hits = self.store.vector_search(self.vector(), within, self.pool, None)
        if self.engines.get("time") != "index":  # any search through the index: the leg was
            self.engines["time"] = getattr(hits, "engine", "exact")
        return list(hits)


def best_of(best: dict[int, float], hits: Iterable[tuple[int, float]]) -> None:
    """Keep each memory's best cosine over several searches."""
    for memory_id, cosine in hits:
        best[memory_id] = max(cosine, best.get(memory_id, -1.0))


def speaks_of(memory: Memory, day_range: tuple[date, date]) -> bool:
    """Whether the memory's words, read on the day it was created, date something within the range."""
    first, last = day_range
    said = memory.created_at.astimezone(UTC).date()
    return any(start <= last and first <= end for start, end in mentioned_ranges(memory.text, said))


T = TypeVar("T")
U = TypeVar("U")


def _beside(work: Callable[[], T], meanwhile: Callable[[], U]) -> tuple[T, U]:
    """`work` in a leg thread while this thread does `meanwhile`; `work` again in this thread when
    the leg thread cannot reach the store (a server at its connection limit refuses it one)."""
    future = _leg_threads().submit(work)
    done = meanwhile()
    try:
        return future.result(), done
    except StoreNotFoundError:
        return work(), done


@cache
def _leg_threads() -> ThreadPoolExecutor:
    """The threads that run searches' lexical legs beside their other legs (a threaded server's
    searches share them; each thread keeps its own store connections)."""
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(8, thread_name_prefix="memsearch-legs")


def build_candidates(
    store: SearchBackend,
    legs: Mapping[str, Mapping[int, LegHit]],
    cosines_of: Callable[[list[int]], Mapping[int, float]] | None,
) -> list[Candidate]:
    """The memories the legs found, with their hits and (given `cosines_of`) their cosines with
    the query; on a store with `parallel_reads` the cosines are read beside the memories."""
    ids = sorted({memory_id for hits in legs.values() for memory_id in hits})
    cosines: Mapping[int, float] | None
    if cosines_of is not None and store.parallel_reads:
        cosines, memories = _beside(lambda: cosines_of(ids), lambda: store.get_many(ids))
    else:
        cosines = cosines_of(ids) if cosines_of is not None else None
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
