"""The profiles' stages, checked with the numbers their seed documents print."""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsearch.errors import InvalidInputError
from memsearch.models import Memory, content_hash
from memsearch.profiles import Adjustment, Fusion, available, load_profile
from memsearch.retrieval.candidates import Candidate, LegHit
from memsearch.retrieval.fusion import fuse_rrf, min_max, rrf, signal_values
from memsearch.retrieval.pipeline import with_tau
from memsearch.retrieval.scoring import apply_adjustments, hyperbolic_decay
from memsearch.retrieval.select import fit_budget, mmr_select, rank_by_final, tag_jaccard
from tests.conftest import T0

SHIPPED = ("cems", "default", "memsense", "mnemosyne", "pgvector", "siftcoder")


def memory(memory_id: int, *, days_old: float = 0.0, accessed_days_ago: float | None = None, **fields) -> Memory:  # type: ignore[no-untyped-def]
    created = T0 - timedelta(days=days_old)
    accessed = T0 - timedelta(days=accessed_days_ago) if accessed_days_ago is not None else created
    values = {
        "key": None, "text": f"memory {memory_id}", "access_count": 0, "importance": 0.5, "priority": 1.0,
        "pinned": False, "project": None, "namespace": None, "session": None, "role": None, "tags": (),
        "metadata": {},
    } | fields  # fmt: skip
    return Memory(
        id=memory_id, created_at=created, last_accessed_at=accessed, content_hash=content_hash(values["text"]), **values
    )


def test_every_shipped_profile_loads() -> None:
    assert set(SHIPPED) <= set(available())
    for name in SHIPPED:
        profile = load_profile(name)
        assert profile.name == name and profile.summary and profile.seed


def test_memsense_pool_sizes() -> None:
    memsense = load_profile("memsense")
    # per route: max(max(k*4, 32)*2, 40); before MMR: max(k*4, 32)
    assert [memsense.pool.size(k) for k in (5, 10, 20)] == [64, 80, 160]
    assert memsense.select.candidate_limit is not None
    assert [memsense.select.candidate_limit.size(k) for k in (5, 10, 20)] == [32, 40, 80]


def test_siftcoder_pool_is_fifty_whatever_k() -> None:
    assert {load_profile("siftcoder").pool.size(k) for k in (1, 5, 20)} == {50}
    assert load_profile("siftcoder").k == 5


@pytest.mark.parametrize(("days", "table"), [(0, 1.000), (1, 0.951), (7, 0.705), (14, 0.497), (30, 0.223), (60, 0.050)])
def test_pgvector_recency_table(days: int, table: float) -> None:
    candidate = Candidate(memory(1, days_old=90, accessed_days_ago=days), {})
    assert round(signal_values(candidate, 0.0, T0, 0.05)["access_recency"], 3) == table


@pytest.mark.parametrize(("days", "percent"), [(0, 100), (30, 67), (60, 50), (120, 33)])
def test_cems_decay_table(days: int, percent: int) -> None:
    assert round(100 * hyperbolic_decay(days, 60)) == percent


def test_cems_counts_whole_days_since_access() -> None:
    cems_decay = Adjustment("decay", shape="hyperbolic", clock="last_accessed_at", tau_days=60)
    (candidate,) = apply_adjustments([Candidate(memory(1, accessed_days_ago=59.9), {}, fusion=1.0)], [cems_decay], T0)
    assert candidate.final == pytest.approx(1 / (1 + 59 / 60))


def test_cems_rank_bonus_arithmetic() -> None:
    legs = {"lexical": {1: LegHit(1, 5.0), 2: LegHit(3, 1.0)}, "vector": {1: LegHit(2, 0.8), 2: LegHit(4, 0.5)}}
    fused = rrf(legs, 60, {"lexical": 2.0, "vector": 2.0}, {1: 0.05, 2: 0.02, 3: 0.02})
    assert fused[1][0] == pytest.approx(2 / 61 + 0.05 + 2 / 62 + 0.02)
    assert fused[2][0] == pytest.approx(2 / 63 + 0.02 + 2 / 64)
    assert fused[1][1] == {"lexical": 2 / 61, "bonus:lexical": 0.05, "vector": 2 / 62, "bonus:vector": 0.02}


def test_cems_blend_of_normalised_rrf_and_cosine() -> None:
    candidates = [
        Candidate(memory(1), {"lexical": LegHit(1, 1.0)}, cosine=0.9),
        Candidate(memory(2), {"lexical": LegHit(2, 1.0)}, cosine=0.4),
        Candidate(memory(3), {"lexical": LegHit(3, 1.0)}, cosine=0.2),
    ]
    fusion = Fusion(weights={"lexical": 2.0}, rank_bonus={1: 0.05, 2: 0.02, 3: 0.02}, blend_vector=0.5)
    raw = [2 / 61 + 0.05, 2 / 62 + 0.02, 2 / 63 + 0.02]
    normalised = [(r - raw[2]) / (raw[0] - raw[2]) for r in raw]
    blended = [c.fusion for c in fuse_rrf(candidates, fusion)]
    assert blended == pytest.approx([0.5 * n + 0.5 * c for n, c in zip(normalised, (0.9, 0.4, 0.2), strict=True)])
    assert min_max([3.0, 3.0]) == [1.0, 1.0]


def test_mnemosyne_recency_bounds() -> None:
    (decay,) = load_profile("mnemosyne").adjust
    fresh, week, ancient = apply_adjustments(
        [Candidate(memory(i, days_old=d), {}, fusion=1.0) for i, d in ((1, 0), (2, 7), (3, 3650))], [decay], T0
    )
    assert fresh.final == 1.0  # at most +30 % for the newest
    assert week.final == pytest.approx(0.7 + 0.3 * math.exp(-168 / 168))
    assert ancient.final == pytest.approx(0.7, abs=1e-9)  # never below 70 %


def test_priority_pinned_and_project_factors_of_cems() -> None:
    cems = load_profile("cems")
    boosts = [a for a in cems.adjust if a.kind != "decay"]
    candidates = [
        Candidate(memory(1, priority=2.0, pinned=True, project="web"), {}, fusion=0.5),
        Candidate(memory(2, project="api"), {}, fusion=0.5),
        Candidate(memory(3), {}, fusion=0.5),
    ]
    same, other, untagged = apply_adjustments(candidates, boosts, T0, project="web")
    assert same.final == pytest.approx(0.5 * 2.0 * 1.1 * 1.3)
    assert other.final == pytest.approx(0.5 * 0.8)
    assert untagged.final == pytest.approx(0.5 * 0.9)
    assert [f.name for f in same.factors] == ["priority", "pinned", "project"]
    no_project = apply_adjustments(candidates, boosts, T0, project=None)
    assert all("project" not in {f.name for f in c.factors} for c in no_project)


def test_memsense_adds_the_memory_score() -> None:
    (adjustment,) = load_profile("memsense").adjust
    stored = Candidate(memory(1, memory_score=0.8), {}, fusion=0.1)
    derived = Candidate(memory(2, importance=1.0, access_count=5), {}, fusion=0.1)
    a, b = apply_adjustments([stored, derived], [adjustment], T0)
    assert a.final == pytest.approx(0.1 + 0.1 * 0.8)
    assert b.final == pytest.approx(0.1 + 0.1 * (0.6 * 1.0 + 0.4 * (1 - math.exp(-1))))


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


@given(st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=1, max_size=12, unique=True), st.integers(1, 12))
def test_mmr_with_lambda_one_is_plain_ranking(scores: list[float], k: int) -> None:
    candidates = rank_by_final([Candidate(memory(i + 1, tags=("t",)), {}, fusion=s) for i, s in enumerate(scores)])
    rng = np.random.default_rng(len(scores))
    vectors = {c.id: unit(*rng.normal(size=4)) for c in candidates}
    selected = mmr_select(candidates, k, vectors, 1.0, 0.35, None)
    assert [c.id for c in selected if c.dropped is None] == [c.id for c in candidates[:k]]


def test_mmr_prefers_the_different_one_and_drops_duplicates() -> None:
    candidates = rank_by_final(
        [
            Candidate(memory(1, tags=("a",)), {}, fusion=0.30),
            Candidate(memory(2, tags=("a",)), {}, fusion=0.29),  # the same as 1 (cosine 1)
            Candidate(memory(3, tags=("a",)), {}, fusion=0.28),  # close to 1 (cosine 0.8)
            Candidate(memory(4, tags=("b",)), {}, fusion=0.20),  # orthogonal to 1
        ]
    )
    vectors = {1: unit(1, 0), 2: unit(1, 0), 3: unit(0.8, 0.6), 4: unit(0, 1)}
    selected = mmr_select(candidates, 2, vectors, 0.78, 0.35, 0.94)
    assert [(c.id, c.dropped) for c in selected] == [(1, None), (4, None), (2, "duplicate of id 1"), (3, "MMR")]
    chosen = selected[1].selection
    assert chosen["max_redundancy"] == pytest.approx(0.0, abs=1e-6)
    assert chosen["mmr_score"] == pytest.approx(0.78 * 0.20)
    assert tag_jaccard(("a", "b"), ("b", "c")) == pytest.approx(1 / 3)


def test_token_budget_keeps_trying_smaller_results() -> None:
    texts = ["x" * 400, "y" * 800, "z" * 200, "w" * 40]  # 100, 200, 50 and 10 tokens
    ranked = [Candidate(memory(i + 1, text=t), {}, fusion=1 - i / 10) for i, t in enumerate(texts)]
    kept = fit_budget(ranked, 160)
    assert [(c.id, c.dropped is None) for c in kept] == [(1, True), (2, False), (3, True), (4, True)]
    assert kept[1].dropped == "budget (200 tokens, 60 left)"


def test_tau_override_changes_only_the_decay() -> None:
    siftcoder = load_profile("siftcoder")
    assert with_tau(siftcoder, 30).decay().tau_days == 30  # type: ignore[union-attr]
    assert with_tau(siftcoder, 0).decay() is None
    with pytest.raises(InvalidInputError, match="no time decay"):
        with_tau(load_profile("pgvector"), 5)


def test_user_profiles_extend_and_are_checked(isolated_home: Path) -> None:
    folder = isolated_home / "profiles"
    folder.mkdir(parents=True)
    (folder / "mine.toml").write_text('extends = "siftcoder"\nsummary = "mine"\nk = 7\n[fusion]\nrrf_k = 30\n')
    mine = load_profile("mine")
    assert (mine.k, mine.fusion.rrf_k, mine.fusion.weights, mine.adjust) == (
        7,
        30,
        load_profile("siftcoder").fusion.weights,
        load_profile("siftcoder").adjust,
    )
    (folder / "typo.toml").write_text("[fusion]\nrrf_kk = 30\n")
    with pytest.raises(InvalidInputError, match="unknown key 'rrf_kk'"):
        load_profile("typo")
    (folder / "loop.toml").write_text('extends = "loop"\n')
    with pytest.raises(InvalidInputError, match="extends itself"):
        load_profile("loop")
    with pytest.raises(InvalidInputError, match="unknown profile"):
        load_profile("nope")


def test_a_profile_names_its_fusion_floor_apart_from_the_requests_min_score(isolated_home: Path) -> None:
    """The profile's floor is on the fusion score (`fusion_floor`); a request's `min_score` is on the
    final score. A profile file written before the rename (`min_score`) still loads, with its old
    meaning; one that says both is refused."""
    assert load_profile("cems").fusion_floor == 0.3
    assert "min_score" not in load_profile("cems").to_dict()
    folder = isolated_home / "profiles"
    folder.mkdir(parents=True)
    (folder / "old.toml").write_text('extends = "default"\nmin_score = 0.25\n')
    assert load_profile("old").fusion_floor == 0.25
    (folder / "both.toml").write_text("min_score = 0.25\nfusion_floor = 0.2\n")
    with pytest.raises(InvalidInputError, match="fusion_floor"):
        load_profile("both")


def test_a_loaded_profile_is_checked_by_stats_not_by_listing_the_folders(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search loads its profile each time: once built, the profile is reused while its folders
    and files are unchanged, without listing the folders again."""
    import memsearch.profiles.loading as loading

    folder = isolated_home / "profiles"
    folder.mkdir(parents=True)
    (folder / "mine.toml").write_text('extends = "default"\nk = 7\n')
    first = load_profile("mine")
    listings: list[int] = []
    real = loading.available

    def counted() -> dict[str, Path]:
        listings.append(1)
        return real()

    monkeypatch.setattr(loading, "available", counted)
    assert load_profile("mine") is first
    assert load_profile("mine") is first
    assert listings == []


def test_a_profile_edited_on_disk_is_seen_even_with_the_same_mtime(isolated_home: Path) -> None:
    import os

    folder = isolated_home / "profiles"
    folder.mkdir(parents=True)
    path = folder / "mine.toml"
    path.write_text('extends = "default"\nk = 7\n')
    assert load_profile("mine").k == 7
    stat = path.stat()
    path.write_text('extends = "default"\nk = 12\n')  # another size, the same mtime (a coarse clock)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert load_profile("mine").k == 12


def test_a_user_profile_added_after_a_load_shadows_the_shipped_one(isolated_home: Path) -> None:
    assert load_profile("default").k != 3
    folder = isolated_home / "profiles"
    folder.mkdir(parents=True)
    (folder / "default.toml").write_text('extends = "siftcoder"\nk = 3\n')
    assert load_profile("default").k == 3
    (folder / "base.toml").write_text("k = 4\n")
    (folder / "default.toml").write_text('extends = "base"\n')
    assert load_profile("default").k == 4
    (folder / "base.toml").write_text("k = 5\n")  # a file the profile extends, edited
    assert load_profile("default").k == 5
    (folder / "default.toml").unlink()
    assert load_profile("default").k != 3
