"""A ranking profile's schema: the dataclasses a profile's TOML is read into (legs, fusion,
adjustments, selection, re-ranking, expansion) and the closed lists of what each may name."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memsearch.errors import InvalidInputError
from memsearch.models import LEXICAL_VIEWS, VECTOR_VIEWS

SHIPPED_DIR = Path(__file__).parent
SIGNALS = ("vector", "lexical", "importance", "access_recency")
ADJUSTMENTS = ("decay", "memory_score", "priority", "pinned", "project", "speaker", "when", "names", "about")

LEG_KINDS = ("lexical", "vector", "time")
LEG_SPEC_FORM = "lexical[@context|@prev], vector[(model)][@view][:role], time"
_MODEL_NAMED = re.compile(r"vector\(([^()\s:@]+)\)")  # vector(gemma): the vectors of another model


@dataclass(frozen=True)
class LegSpec:
    """A leg (recall route): `lexical` (text and tags) or `lexical@<lexical view>`; `vector` (the
    memory's own vector) or `vector@<vector view>`, optionally `:<role>` to search that role's
    memories only; `vector(<model>)`, the memory's own vector of another model the store holds
    (`Memsearch.add_model`: a registered name such as `gemma`, or a model folder's name; no view,
    as only the memories' own texts are embedded with it); `time`, the memories created within the
    dates a query names."""

    kind: str
    view: str | None = None
    role: str | None = None
    model: str | None = None

    @classmethod
    def parse(cls, spec: str) -> LegSpec:
        """The spec read (once per spec text: a search asks a leg's kind many times)."""
        return _parsed(spec)


@functools.lru_cache(maxsize=256)
def _parsed(spec: str) -> LegSpec:
    return _parse(spec)  # a ValueError is not cached: a bad spec is checked each time


def _parse(spec: str) -> LegSpec:
    head, _, role = spec.partition(":")
    kind, _, view = head.partition("@")
    model = None
    if (named := _MODEL_NAMED.fullmatch(kind)) is not None:
        kind, model = "vector", named[1]
    views = {"lexical": LEXICAL_VIEWS, "vector": VECTOR_VIEWS, "time": ()}.get(kind)
    if (
        views is None
        or (view and view not in views)
        or ("@" in head and not view)
        or (":" in spec and (kind != "vector" or not re.fullmatch(r"[^:@\s]+", role)))
    ):
        raise ValueError(f"{spec!r} is not a leg spec ({LEG_SPEC_FORM})")
    if model is not None and view:
        raise ValueError(
            f"{spec!r}: views of another model's vectors are not stored (only the memories' own texts "
            f"are embedded with {model}): use vector({model})"
        )
    return LegSpec(kind, view or None, role or None, model)


def leg_kind(spec: str) -> str:
    """`lexical`, `vector` or `time`: which modes a leg belongs to."""
    return LegSpec.parse(spec).kind


def leg_models(legs: Mapping[str, str]) -> list[str]:
    """The other models the legs name (`vector(gemma)`), in leg order, each once."""
    return list(dict.fromkeys(m for spec in legs.values() if (m := LegSpec.parse(spec).model) is not None))


DECAY_SHAPES = ("exponential", "floor", "hyperbolic")
DECAY_CLOCKS = ("created_at", "last_accessed_at")


@dataclass(frozen=True)
class PoolSize:
    """size(k) = max(max(per_k · k, floor) · multiplier, minimum)."""

    per_k: int = 4
    floor: int = 50
    multiplier: int = 1
    minimum: int = 0

    def size(self, k: int) -> int:
        return max(max(self.per_k * k, self.floor) * self.multiplier, self.minimum)


@dataclass(frozen=True)
class Fusion:
    """`rrf`: Σ weight / (rrf_k + rank) (+ rank bonuses); optionally min–max normalised and blended
    with the cosine. `weighted`: Σ weight · signal over SIGNALS."""

    method: str = "rrf"
    rrf_k: float = 60.0
    weights: Mapping[str, float] = field(default_factory=lambda: {"lexical": 1.0, "vector": 1.0})
    rank_bonus: Mapping[int, float] = field(default_factory=dict)
    blend_vector: float | None = None
    access_rate: float = 0.05


@dataclass(frozen=True)
class Adjustment:
    """One factor applied to the fused score, in profile order."""

    kind: str
    shape: str = "exponential"  # decay: exponential | floor | hyperbolic
    clock: str = "created_at"  # decay: which timestamp ages the memory
    tau_days: float = 7.0  # decay: exp(-age / tau); hyperbolic: 1 / (1 + days / tau)
    floor: float = 0.0  # decay shape floor: floor + (1 - floor) · exp(-age / tau)
    weight: float = 0.1  # memory_score: added weight · score
    factor: float = 1.1  # pinned, speaker, when, names, about: multiplier
    same: float = 1.3  # project: same project
    other: float = 0.8  # project: another project
    none: float = 0.9  # project: memory without a project

    def __post_init__(self) -> None:
        # NaN passes every comparison the pipeline makes and turns each score into NaN (not JSON).
        if isinstance(self.tau_days, float) and not math.isfinite(self.tau_days):
            raise InvalidInputError(
                f"must be 0 (no decay) or a positive number of days, not {self.tau_days}", field="tau_days"
            )


@dataclass(frozen=True)
class Selection:
    drop_identical: bool = True
    candidate_limit: PoolSize | None = None
    mmr_lambda: float | None = None
    mmr_tag_weight: float = 0.35
    duplicate_threshold: float | None = None
    max_tokens: int | None = None


EXPANSION_STAGES = ("intent", "synthesis", "hyde")


@dataclass(frozen=True)
class Rerank:
    """siftcoder's re-rank hook: re-order the top `limit` fused candidates, by the deterministic
    re-ranker (query-word coverage) or by the LLM (CEMS: the top CEMS_RERANK_INPUT_LIMIT = 40)."""

    method: str = "off"  # off | deterministic | llm
    limit: int = 40


@dataclass(frozen=True)
class Expansion:
    """CEMS's LLM stages before recall (each needs an LLM endpoint; without one they are skipped):
    `intent` routes auto mode, `synthesis` and `hyde` add expansion legs, weighted `weight` each in
    RRF; `diverse_lambda` turns on the diverse assembly of aggregation queries."""

    stages: tuple[str, ...] = ()
    weight: float = 1.0  # each expansion's lists (the original's weigh what fusion.weights say)
    diverse_lambda: float | None = None


@dataclass(frozen=True)
class Profile:
    name: str = "default"
    summary: str = ""
    seed: str = ""
    k: int = 10
    legs: Mapping[str, str] = field(default_factory=lambda: {"lexical": "lexical", "vector": "vector"})
    pool: PoolSize = field(default_factory=PoolSize)
    exhaustive: bool = False  # rank every memory (exact top-k of a weighted score), not pools
    fusion: Fusion = field(default_factory=Fusion)
    drop_superseded: bool = True
    # Relevance floor on the fusion score (before adjustments); a request's `min_score` is the
    # floor on the final score. Files written before the rename say `min_score` (profiles.loading).
    fusion_floor: float | None = None
    adjust: tuple[Adjustment, ...] = ()
    select: Selection = field(default_factory=Selection)
    ingest_dedup: float | None = None  # cosine at which `add` reports a near-duplicate instead of storing
    # The dense query drops the words found in more than this share of the memories in scope
    # (such as speaker names in a conversation): they say nothing about which memory is meant.
    dense_common_share: float | None = None
    # Session granularity (Memsense): turn support = min(cap, share · best turn's fused score).
    session_support_cap: float = 0.12
    session_support_share: float = 0.6
    neighbours: int = 1  # turns either side that join a hit when there are no session chunks
    rerank: Rerank = field(default_factory=Rerank)
    expand: Expansion = field(default_factory=Expansion)
    environment: str | None = None  # "CEMS": the seed's CEMS_* environment variables apply

    @property
    def project_boost(self) -> bool:
        """Profiles that score by project take --project as a boost, the others as a filter."""
        return any(a.kind == "project" for a in self.adjust)

    def decay(self) -> Adjustment | None:
        return next((a for a in self.adjust if a.kind == "decay"), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- loading -------------------------------------------------------------------------------
