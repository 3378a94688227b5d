"""Ranking on columns: fuse → filter → adjust → order → select over the candidates' scores as
arrays, reading of each candidate only the fields the profile ranks by; a candidate's record
(its whole Memory, legs, fusion terms and factors with their explain detail) is built only when
it is read: the results together when they are first read, the dropped ones when asked for
(`--raw`).

It answers exactly what fusion.fuse then select.select answer over whole candidates (the
reference: tests hold them equal): the same scalar functions make each factor's value, the same
floating-point operations in the same order make each final score, and the records are made by
those stages' own functions (factor_for, boost_factors). Profiles that select by MMR or diverse
assembly, re-rank, or fuse by weighted signals take the reference path (`fits`).
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol, cast, overload

from memsearch.models import derived_memory_score
from memsearch.profiles import Adjustment, Profile
from memsearch.retrieval.candidates import Candidate, LegHit, Ranked
from memsearch.retrieval.fusion import min_max, rrf
from memsearch.retrieval.legs import _beside
from memsearch.retrieval.request import Boost
from memsearch.retrieval.scoring import QueryFacts, boost_factors, factor_for, factor_value
from memsearch.retrieval.select import estimate_tokens
from memsearch.store.base import SearchBackend

# The fields each adjustment reads (decay: its clock's).
_ADJUSTMENT_FIELDS: Mapping[str, tuple[str, ...]] = {
    "memory_score": ("memory_score", "importance", "access_count"),
    "priority": ("priority",),
    "pinned": ("pinned",),
    "project": ("project",),
    "speaker": ("role",),
    "about": ("role", "conversation", "text"),
    "when": ("text",),
    "names": ("text",),
}


class Fields(Protocol):
    """The fields of one memory a search ranks by (see `needed_fields`), read as a Memory's, and
    its `quality`; a field the search did not read is not there (AttributeError)."""

    text: str
    role: str | None
    conversation: str | None
    project: str | None
    pinned: bool
    priority: float
    importance: float
    access_count: int
    memory_score: float | None
    created_at: datetime
    last_accessed_at: datetime
    superseded_by: int | None
    content_hash: str
    tags: tuple[str, ...]

    @property
    def quality(self) -> float: ...


def _quality(fields: Any) -> float:
    """As Memory.quality."""
    if fields.memory_score is not None:
        return float(fields.memory_score)
    return derived_memory_score(fields.importance, fields.access_count)


@functools.cache
def fields_type(names: tuple[str, ...]) -> Callable[[Iterable[Any]], Fields]:
    """What makes Fields of those names from their values: a named tuple (read by name), with `quality`."""
    row = collections.namedtuple("FieldsRow", names)  # type: ignore[misc]  # the names are the profile's
    made: Any = type("Fields", (row,), {"__slots__": (), "quality": property(_quality)})
    return cast(Callable[[Iterable[Any]], Fields], made._make)


def fits(profile: Profile, rerank: str) -> bool:
    """Whether a search with this profile (and re-rank method) ranks on columns."""
    choice = profile.select
    return profile.fusion.method == "rrf" and choice.mmr_lambda is None and rerank == "off"


def needed_fields(profile: Profile, boosts: Sequence[Boost], max_tokens: int | None) -> tuple[str, ...]:
    """The Memory fields ranking reads: the query facts' (speakers, conversations), the filters',
    the adjustments', the boosts' and the token budget's."""
    names = ["role", "conversation"]
    if profile.drop_superseded:
        names += ["superseded_by", "pinned"]
    if profile.select.drop_identical:
        names.append("content_hash")
    for adjustment in profile.adjust:
        names += [adjustment.clock] if adjustment.kind == "decay" else _ADJUSTMENT_FIELDS.get(adjustment.kind, ())
    if boosts:
        names += ["tags", "project"]
    if (max_tokens if max_tokens is not None else profile.select.max_tokens) is not None:
        names.append("text")
    return tuple(dict.fromkeys(names))


def read_fields(store: SearchBackend, ids: Sequence[int], names: Sequence[str]) -> dict[int, Fields]:
    make = fields_type(tuple(names))
    return {memory_id: make(values) for memory_id, values in store.fields_of(ids, names).items()}


def factor_values(
    rows: Sequence[Fields], adjustment: Adjustment, now: datetime, project: str | None, facts: QueryFacts
) -> list[float] | None:
    """The adjustment's factor for each row (factor_value's), or None where it applies to none."""
    # Whether it applies is the search's, not a memory's: the first row tells.
    if not rows or factor_value(rows[0], adjustment, now, project, facts) is None:
        return None
    return [cast(float, factor_value(row, adjustment, now, project, facts)) for row in rows]


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class Columns:
    """One search's candidates as columns, in id order: what their records are built from."""

    ids: list[int]
    legs: Mapping[str, Mapping[int, LegHit]]
    cosines: Mapping[int, float] | None
    fused: Mapping[int, tuple[float, dict[str, float]]]  # RRF: score and terms, by id
    blend: list[float] | None  # CEMS: each one's min–max normalised RRF score (blend_vector set)
    dropped: list[str | None]
    tokens: dict[int, int]  # position → its tokens, for those the budget kept


def rank_columns(
    store: SearchBackend,
    legs: Mapping[str, Mapping[int, LegHit]],
    cosines_of: Callable[[list[int]], Mapping[int, float]] | None,
    profile: Profile,
    k: int,
    now: datetime,
    project: str | None,
    max_tokens: int | None,
    facts_of: Callable[[Sequence[Fields]], QueryFacts],
    boosts: Sequence[Boost] = (),
) -> LazyRanked:
    """build_candidates, fuse_rrf then select (without MMR or diverse assembly) on columns;
    `cosines_of` gives the candidates' cosines with the query (None: none), `facts_of` the query
    facts from the candidates' fields (SearchRun.query_facts)."""
    wanted = sorted({memory_id for hits in legs.values() for memory_id in hits})
    names = needed_fields(profile, boosts, max_tokens)
    cosines: Mapping[int, float] | None = None
    if cosines_of is not None and store.parallel_reads:  # as build_candidates: the cosines beside the rows
        cosines, rows_by_id = _beside(lambda: cosines_of(wanted), lambda: read_fields(store, wanted, names))
    else:
        cosines = cosines_of(wanted) if cosines_of is not None else None
        rows_by_id = read_fields(store, wanted, names)
    ids = [memory_id for memory_id in wanted if memory_id in rows_by_id]
    rows = [rows_by_id[memory_id] for memory_id in ids]
    facts = facts_of(rows)
    fusion_profile = profile.fusion
    fused = rrf(legs, fusion_profile.rrf_k, fusion_profile.weights, fusion_profile.rank_bonus)
    fusion = [fused[memory_id][0] for memory_id in ids]
    normalised: list[float] | None = None
    if fusion_profile.blend_vector is not None:  # CEMS: as fusion.fuse_rrf
        blend = fusion_profile.blend_vector
        normalised = min_max(fusion)
        cosine = [(cosines or {}).get(memory_id) or 0.0 for memory_id in ids]
        fusion = [(1 - blend) * norm + blend * c for norm, c in zip(normalised, cosine, strict=True)]
    count = len(ids)
    dropped: list[str | None] = [None] * count
    if profile.drop_superseded:  # as select.drop_superseded
        for at, row in enumerate(rows):
            if row.superseded_by is not None and not row.pinned:
                dropped[at] = f"superseded by {row.superseded_by}"
    if profile.fusion_floor is not None:  # as select.drop_below
        threshold = profile.fusion_floor
        for at, score in enumerate(fusion):
            if dropped[at] is None and score < threshold:
                dropped[at] = f"below threshold ({score:.4g} < {threshold:g})"
    # Candidate.final: each factor applied in order. Plain floats, not numpy: the same IEEE doubles
    # for a hundred-odd candidates, and a lexical search from a fresh shell never imports numpy.
    final = list(fusion)
    for adjustment in profile.adjust:
        values = factor_values(rows, adjustment, now, project, facts)
        if values is not None:
            adds = adjustment.kind == "memory_score"
            final = [f + v if adds else f * v for f, v in zip(final, values, strict=True)]
    for boost in boosts:
        final = [
            f * boost.factor if boost.matches(row.tags, row.project) else f for f, row in zip(final, rows, strict=True)
        ]
    order = sorted(range(count), key=lambda at: (-final[at], -fusion[at], ids[at]))
    choice = profile.select
    if choice.drop_identical:  # as select.drop_exact_duplicates
        kept: dict[str, int] = {}
        for at in order:
            if dropped[at] is None:
                first = kept.setdefault(rows[at].content_hash, ids[at])
                if first != ids[at]:
                    dropped[at] = f"duplicate of id {first}"
    if choice.candidate_limit is not None:
        _take_top(order, dropped, choice.candidate_limit.size(k), "candidate limit")
    _take_top(order, dropped, k, "limit")
    budget = max_tokens if max_tokens is not None else choice.max_tokens
    tokens: dict[int, int] = {}
    if budget is not None:  # as select.fit_budget
        used = 0
        for at in order:
            if dropped[at] is None:
                size = estimate_tokens(rows[at].text)
                if used + size > budget:
                    dropped[at] = f"budget ({size} tokens, {budget - used} left)"
                else:
                    used += size
                    tokens[at] = size
    live = [at for at in order if dropped[at] is None]
    columns = Columns(ids, legs, cosines, fused, normalised, dropped, tokens)
    records = Records(store, columns, profile, now, project, facts, boosts)
    return LazyRanked(records, live + [at for at in order if dropped[at] is not None], len(live))


def _take_top(order: Sequence[int], dropped: list[str | None], k: int, reason: str) -> None:
    """As select.take_top: the live ones after the first k are dropped with `reason`."""
    live = 0
    for at in order:
        if dropped[at] is None:
            live += 1
            if live > k:
                dropped[at] = reason


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class Records:
    """Builds candidates' records from the columns as the reference stages do (fuse_rrf's fusion
    detail, factor_for's and boost_factors' factors), reading their whole rows."""

    store: SearchBackend
    columns: Columns
    profile: Profile
    now: datetime
    project: str | None
    facts: QueryFacts
    boosts: Sequence[Boost]

    def build(self, positions: Sequence[int]) -> list[Candidate]:
        columns, profile = self.columns, self.profile
        memories = self.store.get_many([columns.ids[at] for at in positions])
        built = []
        for at in positions:
            memory_id = columns.ids[at]
            score, terms = columns.fused[memory_id]
            cosine = columns.cosines.get(memory_id) if columns.cosines is not None else None
            candidate = Candidate(
                memory=memories[memory_id],
                legs={leg: hits[memory_id] for leg, hits in columns.legs.items() if memory_id in hits},
                cosine=cosine,
                fusion=score,
                fusion_terms=terms,
            )
            detail: dict[str, float] = {}
            if columns.blend is not None:  # as fusion.fuse_rrf
                blend = profile.fusion.blend_vector or 0.0
                norm, vector_score = columns.blend[at], cosine or 0.0
                detail = {"rrf": score, "norm_rrf": norm, "vector_score": vector_score, "blend_vector": blend}
                score = (1 - blend) * norm + blend * vector_score
            factors = [
                factor
                for adjustment in profile.adjust
                if (factor := factor_for(candidate, adjustment, self.now, self.project, self.facts)) is not None
            ]
            factors += boost_factors(candidate.memory, self.boosts)
            selection = {"tokens": columns.tokens[at]} if at in columns.tokens else {}
            built.append(
                replace(
                    candidate,
                    fusion=score,
                    fusion_detail=detail,
                    factors=tuple(factors),
                    selection=selection,
                    dropped=columns.dropped[at],
                )
            )
        return built


class LazyRanked(Ranked):
    """The ranked candidates (results first), each record built when first read: the results
    together, the dropped ones together."""

    def __init__(self, records: Records, order: list[int], live: int) -> None:
        self._records = records
        self._order = order
        self.live = live
        self._built: list[Candidate] = []

    def _upto(self, count: int) -> list[Candidate]:
        if len(self._built) < count:
            end = self.live if count <= self.live else len(self._order)
            self._built += self._records.build(self._order[len(self._built) : end])
        return self._built

    def __len__(self) -> int:
        return len(self._order)

    def settle(self) -> None:
        self._upto(len(self._order))

    @overload
    def __getitem__(self, index: int) -> Candidate: ...
    @overload
    def __getitem__(self, index: slice) -> list[Candidate]: ...
    def __getitem__(self, index: int | slice) -> Candidate | list[Candidate]:
        if isinstance(index, slice):
            positions = range(len(self._order))[index]
            last = max(positions, default=-1)
            return [self._upto(last + 1)[at] for at in positions]
        at = range(len(self._order))[index]  # IndexError as a list's
        return self._upto(at + 1)[at]

    def __iter__(self) -> Iterator[Candidate]:
        for at in range(len(self._order)):
            yield self[at]
