"""`memsearch doctor`: what a store and its model are, and what would make search wrong or slow.

The checks are pure functions of what the store reports (`StoreHealth`) and of the model's files,
so each is tested without a broken store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsearch.embedding.base import INT8_VERSION_SUFFIX, QUANTIZED_SUFFIX
from memsearch.errors import MemsearchError
from memsearch.models import EmbeddingModelInfo
from memsearch.paths import shown_location
from memsearch.store.base import Store, StoreHealth

OK, WARNING, PROBLEM = "ok", "warning", "problem"
# Exact vector search reads every vector of the store per query: past this many (about 40 ms a
# query on two cores with 384 dimensions) an approximate index pays off.
EXACT_SEARCH_LIMIT = 200_000
# A write-ahead log this large is read alongside the store by every query until it is checkpointed.
LARGE_WAL_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Finding:
    """One check: `ok`, a `warning` (search is slower or less complete than it could be) or a
    `problem` (search fails or is wrong); `detail` says what was seen and what to do."""

    name: str
    level: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "level": self.level, "detail": self.detail}


@dataclass(frozen=True)
class ModelState:
    """The model searches would load, and whether its fast (ONNX) export is cached yet."""

    name: str
    dim: int | None  # known once exported
    export_path: str
    exported: bool
    version: str | None = None
    location: str | None = None  # a folder given by path

    def makes_vectors_of(self, stored: EmbeddingModelInfo) -> bool:
        return EmbeddingModelInfo(self.name, self.dim or stored.dim, self.version, self.location).is_same_model(stored)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "dim": self.dim, "export_path": self.export_path, "exported": self.exported}


@dataclass(frozen=True)
class DoctorReport:
    location: str
    exists: bool
    health: StoreHealth | None  # None: no store yet, or it could not be read
    model: ModelState | None  # None: the model could not be resolved (see the findings)
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No problem found (warnings allowed)."""
        return all(finding.level != PROBLEM for finding in self.findings)

    def to_dict(self) -> dict[str, Any]:
        health = self.health
        return {
            "location": self.location,
            "exists": self.exists,
            "ok": self.ok,
            "store": None
            if health is None
            else {
                "backend": health.backend,
                "schema_version": health.schema_version,
                "latest_schema_version": health.latest_schema_version,
                "embedding_model": health.model.name if health.model else None,
                "embedding_dim": health.model.dim if health.model else None,
                "extra_models": [model.name for model in health.extra_models],
                "memories": dict(health.memories_by_kind),
                "vectors": health.vectors,
                "without_vector": health.without_vector,
                "fts_rows": health.fts_rows,
                "view_vectors": health.view_vectors,
                "integrity": health.integrity,
                "ann_index": health.ann_index,
                "wal_bytes": health.wal_bytes,
                "size_bytes": health.size_bytes,
            },
            "model": self.model.to_dict() if self.model else None,
            "findings": [finding.to_dict() for finding in self.findings],
        }


def store_findings(health: StoreHealth, model: ModelState | None) -> list[Finding]:
    """What the store's counts and checks say, worst first within each subject."""
    findings: list[Finding] = []
    total = sum(health.memories_by_kind.values())
    if health.integrity == "ok":
        what = "SQLite's quick_check passed" if health.backend == "sqlite" else "the server answers"
        findings.append(Finding("integrity", OK, what))
    else:
        findings.append(
            Finding("integrity", PROBLEM, f"{health.integrity}; restore the store from a copy or an export")
        )
    if health.schema_version < health.latest_schema_version:
        findings.append(
            Finding(
                "schema",
                WARNING,
                f"version {health.schema_version}; the next write migrates it to {health.latest_schema_version}",
            )
        )
    else:
        findings.append(Finding("schema", OK, f"version {health.schema_version}"))
    if model is not None and health.model is not None:
        if not model.makes_vectors_of(health.model):
            findings.append(
                Finding(
                    "model",
                    PROBLEM,
                    f"the store's vectors are of {health.model.name} ({health.model.dim} dimensions) but searches "
                    f"would use {model.name}: reindex the store, or pass its model",
                )
            )
        else:
            findings.append(Finding("model", OK, "the store's vectors are of the model searches use"))
    if health.without_vector:
        findings.append(
            Finding(
                "vectors",
                WARNING,
                f"{health.without_vector} of {total} memories wait for their vectors: vector search cannot find "
                "them yet, search by words can (`memsearch index` makes them)",
            )
        )
    else:
        findings.append(Finding("vectors", OK, f"every memory has a vector ({health.vectors})"))
    # SQLite indexes each memory's text in the write that stores it; a PostgreSQL store counts only
    # memories that have words (a text of punctuation has no postings), so only SQLite's must match.
    if health.backend == "sqlite" and health.fts_rows != total:
        findings.append(
            Finding(
                "full-text index",
                PROBLEM,
                f"{health.fts_rows} rows for {total} memories: keyword search misses some; restore the store",
            )
        )
    if not health.ann_index and health.vectors > EXACT_SEARCH_LIMIT:
        findings.append(
            Finding(
                "vector search",
                WARNING,
                f"exact search over {health.vectors} vectors on every query; with usearch installed (pip install "
                "usearch) the store searches them through an approximate index beside it, as a PostgreSQL store "
                "(memsearch copy) does through HNSW",
            )
        )
    if health.wal_bytes is not None and health.wal_bytes > LARGE_WAL_BYTES:
        findings.append(
            Finding(
                "write-ahead log",
                WARNING,
                f"{health.wal_bytes // (1024 * 1024)} MiB not yet checkpointed into the store: close long-lived "
                "readers (a server) so that SQLite can fold it in",
            )
        )
    return findings


def model_findings(model: ModelState) -> list[Finding]:
    if model.exported:
        where = f"cached in {model.export_path}" if model.export_path else "none needed (a route of its own)"
        return [Finding("model export", OK, where)]
    return [
        Finding(
            "model export",
            WARNING,
            f"not cached yet: the first search that embeds exports the model (about 10 s) to {model.export_path}",
        )
    ]


def diagnose(location: Path | str, model: str | None, store: Callable[[], Store]) -> DoctorReport:
    """The report on the store at `location` (opened with `store`) and on `model` (resolved, not
    loaded). Reads only: a missing store is reported, not created; one that cannot be read is a
    problem found, not an error raised."""
    findings: list[Finding] = []
    state = model_state(model, _recorded_model(location, store), findings)
    if state is not None:
        findings += model_findings(state)
    shown = shown_location(location)
    if isinstance(location, Path) and not location.exists():
        findings.insert(0, Finding("store", "ok", f"no store yet at {shown}; the first add creates it"))
        return DoctorReport(shown, False, None, state, findings)
    try:
        health = store().health()
    except MemsearchError as error:
        findings.insert(0, Finding("store", PROBLEM, str(error)))
        return DoctorReport(shown, True, None, state, findings)
    except Exception as error:  # a store's own error: a damaged file, a lost connection
        from memsearch.store import describe_store_error

        known = describe_store_error(error)
        detail = str(known or f"{type(error).__name__}: {error}").strip().splitlines() or [""]
        findings.insert(0, Finding("store", PROBLEM, detail[0]))
        return DoctorReport(shown, True, None, state, findings)
    findings = store_findings(health, state) + findings + extra_model_findings(health.extra_models)
    return DoctorReport(store().location, True, health, state, findings)


def extra_model_findings(models: Sequence[EmbeddingModelInfo]) -> list[Finding]:
    """Whether each of the store's other models (Memsearch.add_model) is there, as the version
    that made its vectors: without it, searches of the profiles that name it and every write fail."""
    from memsearch.embedding.registry import model_key, recorded_spec

    findings = []
    for model in models:
        name = f"model {model_key(model.name)}"
        try:
            spec = recorded_spec(model)
        except MemsearchError as error:
            detail = f"{error}; until then writes fail, and so do the searches of profiles that name it"
            findings.append(Finding(name, PROBLEM, detail))
            continue
        if model.version and spec.version and spec.version != model.version.removesuffix(INT8_VERSION_SUFFIX):
            detail = f"the {model.name} found is another version than the one that made its vectors: add it again"
            findings.append(Finding(name, PROBLEM, detail))
        else:
            findings.append(Finding(name, OK, f"{model.name} is there, as the version that made its vectors"))
    return findings


def _recorded_model(location: Path | str, store: Callable[[], Store]) -> EmbeddingModelInfo | None:
    """The model the store recorded, if there is a store that can be read (else diagnose says why)."""
    if isinstance(location, Path) and not location.exists():
        return None
    try:
        return store().embedding_model()
    except Exception:  # reported by diagnose when it reads the store's health
        return None


def model_state(model: str | None, recorded: EmbeddingModelInfo | None, findings: list[Finding]) -> ModelState | None:
    """The model searches would use (`model`, else the store's), resolved without loading it; a bad one is a finding."""
    import json

    from memsearch.embedding import encoder_route, store_model
    from memsearch.embedding.onnx import cache_problem, export_dir

    try:
        spec = store_model(model, recorded)
    except MemsearchError as error:
        findings.append(Finding("model", PROBLEM, str(error)))
        return None
    location = str(spec.path) if spec.by_path else None
    route = encoder_route(spec)
    if spec.backend is not None and route != "onnx-int8":  # a route of its own: no ONNX export to make
        return ModelState(spec.name, None, "", True, spec.version, location)
    name, version = spec.name, spec.version
    if route == "onnx-int8":  # the int8 route names its vectors apart (OnnxEncoder.info)
        name, version = name + QUANTIZED_SUFFIX, version and version + INT8_VERSION_SUFFIX
    folder = export_dir(spec)
    if (problem := cache_problem(folder)) is not None:
        detail = f"{problem}: searches refuse it; remove it, or set MEMSEARCH_CACHE_DIR to a folder of your own"
        findings.append(Finding("model cache", PROBLEM, detail))
    manifest = folder / "manifest.json"
    dim = json.loads(manifest.read_text(encoding="utf-8"))["dim"] if manifest.is_file() else None
    return ModelState(name, dim, str(folder), manifest.is_file(), version, location)
