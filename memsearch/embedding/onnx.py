"""The fast route: an ONNX export of a sentence-transformers model, run with onnxruntime.

The export (model graph with pooling and normalisation inside, plus its fast tokenizer and a
manifest) is made once per model with sentence-transformers and cached under the user cache
dir (one for all of the user's MEMSEARCH_HOMEs; see paths.model_cache_dir), keyed by a
fingerprint of the model's files. Later processes load it in a fraction of a second and never
import torch. A cache another user could have written is not used.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import unicodedata
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memsearch.checks import check_text
from memsearch.embedding.base import INT8_VERSION_SUFFIX, QUANTIZED_SUFFIX, ModelSpec, Progress
from memsearch.embedding.batching import encode_in_batches, usable_cpus
from memsearch.errors import EmbeddingError
from memsearch.paths import (
    folder_problem,
    home_model_cache_dir,
    is_private,
    make_private_dirs,
    make_private_tree,
    model_cache_dir,
    tree_problem,
    write_private,
)

log = logging.getLogger(__name__)

EXPORT_FORMAT = 2  # 2: BERT graphs fused by onnxruntime's transformer optimizer
# Length-sorted batches padded to their longest text (fewer texts a batch when a call is too small
# to keep every CPU busy: batching.batch_size). Measured with bench/encoder_floor.py on 2 shared
# cores, sentences per CPU-second of this session: on note chunks cut to 64 tokens (no padding)
# batch 1 65, 4 84, 8 88, 16 82, 32 74, 128 67; on the synthetic notes' chunks, length-sorted,
# 4 to 16 within 11 % of 8, 32 -21 %, 128 -47 %, and unsorted batches of 8 -49 % (LoCoMo turns:
# -5, -16, -43 and -39 %). One thread a run, runs side by side: see load_session.
BATCH_SIZE = 8
_OPSET = 17
STAGING_PREFIX = ".export-"
_STAGING_LOCK = ".lock"
# The tokenizer reads a text whole before truncating it to the model's window, which for a pasted
# megabyte takes seconds. It is given a head of this many characters per token of the window, cut
# after a space or punctuation (where tokens end); the head's tokens are those of the whole text
# whenever they overflow the window by a margin, and the whole text is used when they do not.
_HEAD_CHARS_PER_TOKEN = 64
_HEAD_MARGIN_TOKENS = 16
# A staging folder without a lock file (memsearch before 0.1.1 made those) is taken as abandoned
# once it has not changed for this long; an export takes well under a minute.
_UNLOCKED_STAGING_AGE_S = 3600
# The int8 route (MEMSEARCH_ENCODER=onnx-int8): the export's weights quantised per channel by
# onnxruntime, made once beside the fp32 file. Its vectors differ from the model's (cosine about
# 0.99), so its stores carry their own model name and refuse the fp32 route, and vice versa.
QUANTIZED_FILE = "model-int8.onnx"
OPTIMIZED_PREFIX = "optimized-"  # + model + onnxruntime version: the folder of a model's optimised copy


def model_fingerprint(spec: ModelSpec) -> str:
    """Changes when any file of the model changes, or when the export format does."""
    digest = hashlib.sha256(f"{EXPORT_FORMAT}\0{spec.path}".encode())
    for file in sorted(p for p in spec.path.rglob("*") if p.is_file()):
        stat = file.stat()
        digest.update(f"\0{file.relative_to(spec.path)}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:24]


def export_dir(spec: ModelSpec) -> Path:
    return model_cache_dir() / model_fingerprint(spec)


def export_model(spec: ModelSpec, target: Path) -> None:
    """Write model.onnx, tokenizer.json and manifest.json for `spec` into `target` (atomically)."""
    import torch

    from memsearch.embedding.reference import load_sentence_transformer

    make_private_dirs(target.parent)
    remove_stale_staging(target.parent)
    model = load_sentence_transformer(spec).eval()
    tokenizer = model.tokenizer
    if not getattr(tokenizer, "is_fast", False):
        raise EmbeddingError(f"{spec.name} has no fast tokenizer; use MEMSEARCH_ENCODER=sentence-transformers")
    probe = tokenizer(
        ["memsearch export probe", "a second and longer probe sentence"], padding=True, return_tensors="pt"
    )
    input_names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in probe]

    class SentenceEmbedding(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: Any) -> Any:
            return self.model(dict(zip(input_names, tensors, strict=True)))["sentence_embedding"]

    staging, lock = new_staging(target.parent)
    try:
        _export_into(staging, model, probe, input_names, SentenceEmbedding(), tokenizer, spec)
        try:
            os.replace(staging, target)
        except OSError:
            # Another process finished the same export first; theirs is as good as ours.
            shutil.rmtree(staging, ignore_errors=True)
        else:
            (target / _STAGING_LOCK).unlink(missing_ok=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        os.close(lock)


def new_staging(parent: Path) -> tuple[Path, int]:
    """A fresh staging folder in `parent`, and the descriptor of the lock that marks it as being
    written: the lock goes with the process, so a killed export leaves a folder anyone can see
    is abandoned."""
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=parent))
    lock = os.open(staging / _STAGING_LOCK, os.O_CREAT | os.O_WRONLY, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    return staging, lock


def remove_stale_staging(parent: Path) -> list[Path]:
    """Delete the staging folders of exports that were killed (their lock is free); leave those
    another process is writing. Returns what was removed."""
    removed = []
    for folder in parent.glob(STAGING_PREFIX + "*"):
        if folder.is_dir() and _abandoned(folder):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _abandoned(folder: Path) -> bool:
    try:
        lock = os.open(folder / _STAGING_LOCK, os.O_WRONLY)
    except FileNotFoundError:
        with contextlib.suppress(OSError):
            return time.time() - folder.stat().st_mtime > _UNLOCKED_STAGING_AGE_S
        return False
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # a live export holds it
    finally:
        os.close(lock)
    return True


def _export_into(
    staging: Path, model: Any, probe: Any, input_names: list[str], module: Any, tokenizer: Any, spec: ModelSpec
) -> None:
    import torch

    from memsearch.embedding.reference import embedding_dimension

    dynamic = {name: {0: "batch", 1: "sequence"} for name in input_names}
    # The legacy TorchScript exporter is used on purpose (no onnxscript needed); its tracer
    # warnings concern branches that are constant for this graph.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            tuple(probe[name] for name in input_names),
            str(staging / "model.onnx"),
            input_names=input_names,
            output_names=["sentence_embedding"],
            dynamic_axes={**dynamic, "sentence_embedding": {0: "batch"}},
            opset_version=_OPSET,
            dynamo=False,
        )
    fuse_bert(staging / "model.onnx", model)
    write_private(staging / "tokenizer.json", tokenizer.backend_tokenizer.to_str())
    manifest = {
        "model": spec.name,
        "dim": embedding_dimension(model),
        "max_seq_length": int(model.max_seq_length),
        "do_lower_case": bool(getattr(model[0], "do_lower_case", False)),
        "pad_token_id": int(tokenizer.pad_token_id or 0),
        "inputs": input_names,
    }
    make_private_tree(staging)  # torch and onnxruntime wrote theirs with the umask's modes
    # The manifest is written last: its presence marks a complete export.
    write_private(staging / "manifest.json", json.dumps(manifest, indent=2))


def fuse_bert(path: Path, model: Any) -> None:
    """Fuse attention, layer norm and GELU of a BERT graph in place: the same vectors (cosine
    ≥ 0.99999 in the tests), and a session that loads about 50 ms faster. Other architectures
    are left as exported."""
    config = getattr(model[0], "auto_model", None)
    config = getattr(config, "config", None)
    if config is None or getattr(config, "model_type", None) != "bert":
        return
    from onnxruntime.transformers.optimizer import optimize_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fused = optimize_model(
            str(path), model_type="bert", num_heads=config.num_attention_heads, hidden_size=config.hidden_size
        )
    fused.save_model_to_file(str(path))


def ensure_export(spec: ModelSpec) -> Path:
    """The folder of `spec`'s export: the cached one, one a MEMSEARCH_HOME of memsearch 0.1.0 kept
    (moved into the cache), or a new one made now."""
    target = export_dir(spec)
    if target.parent.exists():
        _check_trusted(folder_problem(target.parent), target.parent)
    if not (target / "manifest.json").is_file():
        target = adopted_home_export(target)
    manifest = target / "manifest.json"
    if manifest.is_file():
        _check_trusted(tree_problem(target), target)
        if not is_private(manifest):  # an export made before files were private
            with contextlib.suppress(OSError):
                make_private_tree(target)
    else:
        log.info("preparing the fast encoder for %s (once, about 10 s) in %s", spec.name, target)
        try:
            export_model(spec, target)
        except EmbeddingError:
            raise
        except OSError as error:  # the cache folder cannot be written: say which setting moves it
            raise EmbeddingError(
                f"could not export {spec.name} to ONNX in {target.parent}: {error.strerror or error}; "
                "set MEMSEARCH_CACHE_DIR to a folder you can write to"
            ) from error
        except Exception as error:
            raise EmbeddingError(f"could not export {spec.name} to ONNX in {target.parent}: {error}") from error
    return target


def cache_problem(target: Path) -> str | None:
    """Why the model cache is not to be used for the export folder `target`: another user could
    have written the cache's folder, or the export when there is one; None when no one could."""
    if target.parent.exists() and (problem := folder_problem(target.parent)) is not None:
        return problem
    return tree_problem(target) if (target / "manifest.json").is_file() else None


def _check_trusted(problem: str | None, folder: Path) -> None:
    """Another user who can write the model cache can change the vectors every search makes."""
    if problem is not None:
        raise EmbeddingError(
            f"the model cache {folder} is not safe to use: {problem}; "
            "remove it, or set MEMSEARCH_CACHE_DIR to a folder of your own"
        )


def adopted_home_export(target: Path) -> Path:
    """The export a MEMSEARCH_HOME of memsearch 0.1.0 kept for this model (`$MEMSEARCH_HOME/cache/onnx`),
    moved to `target` in the user's cache (in place when it cannot be moved); else `target`."""
    old_cache = home_model_cache_dir()
    old = old_cache / target.name if old_cache is not None else None
    if old is None or old == target or not (old / "manifest.json").is_file():
        return target
    if folder_problem(old.parent) is not None or tree_problem(old) is not None:
        return target  # not to be trusted: ignored, and a fresh export made in the cache
    try:
        make_private_dirs(target.parent)
        os.replace(old, target)
    except OSError:  # another file system (or another process moved it first)
        return target if (target / "manifest.json").is_file() else old
    log.info("moved the ONNX export of %s to the model cache %s", old, target)
    return target


def ensure_quantized(folder: Path) -> Path:
    """The int8 model beside the export in `folder`, quantised once (about a second)."""
    target = folder / QUANTIZED_FILE
    if target.is_file():
        return target
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    staging = folder / f".{os.getpid()}-{QUANTIZED_FILE}"
    try:
        # onnxruntime logs a pre-processing hint on the root logger; nothing for a user to do.
        logging.disable(logging.WARNING)
        # Per-channel weights keep the vectors close (per-tensor ones: cosine 0.95 on average);
        # the fused graph's contrib ops need the default tensor type spelled out.
        quantize_dynamic(
            folder / "model.onnx",
            staging,
            weight_type=QuantType.QInt8,
            per_channel=True,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        staging.chmod(0o600)
        os.replace(staging, target)
    except Exception as error:
        staging.unlink(missing_ok=True)
        raise EmbeddingError(f"could not quantise the ONNX export in {folder}: {error}") from error
    finally:
        logging.disable(logging.NOTSET)
    return target


class OnnxEncoder:
    def __init__(self, spec: ModelSpec, *, quantized: bool = False) -> None:
        from tokenizers import Tokenizer

        folder = ensure_export(spec)
        model_file = ensure_quantized(folder) if quantized else folder / "model.onnx"
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        suffixes = {"name_suffix": QUANTIZED_SUFFIX, "version_suffix": INT8_VERSION_SUFFIX} if quantized else {}
        self.info = spec.info(int(manifest["dim"]), **suffixes)
        self._lower = bool(manifest["do_lower_case"])
        self._pad_id = int(manifest["pad_token_id"])
        self._inputs: list[str] = list(manifest["inputs"])
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # The saved tokenizer pads and truncates to its own length; the model's is what counts.
        self._tokenizer.no_padding()
        self._max_tokens = int(manifest["max_seq_length"])
        self._tokenizer.enable_truncation(max_length=self._max_tokens)
        self._workers = usable_cpus()
        self._session = load_session(model_file)

    def encode(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.info.dim), dtype=np.float32)
        for text in texts:  # the tokenizer takes only valid Unicode (a query is not checked before)
            check_text("the text to embed", text)
        prepared = [t.lower() if self._lower else t for t in texts]
        heads = [_head(text, self._max_tokens * _HEAD_CHARS_PER_TOKEN) for text in prepared]
        encodings = self._tokenizer.encode_batch(heads)
        for i, (text, head) in enumerate(zip(prepared, heads, strict=True)):
            if len(head) < len(text) and sum(len(o.ids) for o in encodings[i].overflowing) < _HEAD_MARGIN_TOKENS:
                encodings[i] = self._tokenizer.encode(text)
        # Length-sorted batches side by side, one thread each (see embedding.batching); one session
        # takes concurrent runs.
        return encode_in_batches(
            [len(e.ids) for e in encodings],
            BATCH_SIZE,
            lambda rows: self._run([encodings[i] for i in rows]),
            self.info.dim,
            self._workers,
            progress,
        )

    def _run(self, encodings: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        arrays = {
            "input_ids": np.full((len(encodings), width), self._pad_id, dtype=np.int64),
            "attention_mask": np.zeros((len(encodings), width), dtype=np.int64),
            "token_type_ids": np.zeros((len(encodings), width), dtype=np.int64),
        }
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            arrays["input_ids"][row, :n] = encoding.ids
            arrays["attention_mask"][row, :n] = encoding.attention_mask
            arrays["token_type_ids"][row, :n] = encoding.type_ids
        feeds = {name: arrays[name] for name in self._inputs}
        vectors: np.ndarray = self._session.run(None, feeds)[0]  # onnxruntime has no type information
        return vectors


def load_session(model_file: Path) -> Any:
    """An onnxruntime session of `model_file`, from its optimised copy when there is one.

    Building a session optimises the graph, copies 90 MB of weights and packs the weights of every
    matrix product into the layout its kernel reads (most of the session's start), each time. The
    first load saves the optimised graph (hardware-independent "extended" level) with its weights,
    and their packed forms, in a file of their own beside the export, keyed by the onnxruntime
    version; later loads memory-map those weights and find little left to optimise or pack: a
    session in a fifth of the CPU time, computing the same vectors to the bit (the same kernels
    read the same packed weights). The copy is used only when no other user could have written it
    and its files are those it was saved with (see `_copy_problem`); else it is made again.
    """
    import onnxruntime

    def session(path: Path, options: Any) -> Any:
        options.log_severity_level = 3
        # One thread per run, and batches run side by side on the usable CPUs (see encode): the
        # model's small matrix products split over threads spend more CPU time (threads spinning
        # and waiting for each other), far more when other processes share the cores. Measured
        # (bench/encoder_floor.py, 2 shared cores at load 8-11, sentences per CPU-second against
        # one thread): intra_op 2 0.52-0.58x, intra_op 2 without spinning 0.88-0.90x, two
        # one-thread runs side by side 0.97x (and twice the wall rate of one).
        options.intra_op_num_threads = 1
        return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    folder = model_file.parent / f"{OPTIMIZED_PREFIX}{model_file.stem}-{onnxruntime.__version__}{_COPY_SUFFIX}"
    optimized = folder / model_file.name
    if optimized.is_file():
        problem = _copy_problem(folder)
        if problem is None:
            # The copy was optimised at the "extended" level: loading it at that level (not the default
            # "all", whose layout passes find nothing in this graph) starts the session sooner, same vectors.
            loading = onnxruntime.SessionOptions()
            loading.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
            try:
                return session(optimized, loading)
            except Exception as error:  # a copy onnxruntime cannot read: made again below
                problem = f"onnxruntime cannot load it ({error})"
        log.info("not using the optimised copy %s: %s; making it again", folder, problem)
        _remove_if_ours(folder)
    try:
        remove_stale_staging(model_file.parent)  # a copy a killed process left half-written
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=model_file.parent))
    except OSError:  # a cache dir that cannot be written: no copy
        return session(model_file, onnxruntime.SessionOptions())
    try:
        saving = onnxruntime.SessionOptions()
        saving.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        saving.optimized_model_filepath = str(staging / model_file.name)
        saving.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name", f"{model_file.name}.data"
        )
        saving.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        # The packed weights too (onnxruntime 1.21 and later; earlier ones ignore the entry).
        saving.add_session_config_entry("session.save_external_prepacked_constant_initializers", "1")
        try:
            loaded = session(model_file, saving)
        except Exception:  # the copy could not be written (a full disk): load without one
            return session(model_file, onnxruntime.SessionOptions())
        with contextlib.suppress(OSError):  # both files at once; another process may have been first
            make_private_tree(staging)
            _write_copy_record(staging)
            os.replace(staging, folder)
            _remove_older_copies(folder)
        return loaded
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# The optimised copy's folder name ends with its format: "-prepacked" holds the weights' packed
# forms (memsearch 0.1.x before it saved copies without them, in folders without the suffix).
_COPY_SUFFIX = "-prepacked"
_COPY_RECORD = "copy.json"  # the copy's files as they were saved (names, sizes, change times): written last


def _copy_facts(folder: Path) -> dict[str, list[int]]:
    facts = {}
    for path in sorted(folder.iterdir()):
        if path.name != _COPY_RECORD and not path.name.startswith("."):
            info = path.stat()
            facts[path.name] = [info.st_size, info.st_mtime_ns]
    return facts


def _write_copy_record(staging: Path) -> None:
    write_private(staging / _COPY_RECORD, json.dumps({"files": _copy_facts(staging)}))


def _copy_problem(folder: Path) -> str | None:
    """Why the optimised copy in `folder` is not to be loaded: another user could have written it,
    it is incomplete (no record: a copy of an older memsearch, or one not finished), or a file is
    not as it was saved (truncated, rewritten, replaced or added); None when it is to be loaded.

    The files' sizes and modification times are compared, not their contents: a digest of the
    130 MB copy would cost more CPU time than the copy saves (the export folder's trust check,
    `tree_problem`, is what keeps other users out)."""
    if (problem := tree_problem(folder)) is not None:
        return problem
    try:
        recorded = json.loads((folder / _COPY_RECORD).read_text(encoding="utf-8"))["files"]
        found = _copy_facts(folder)
    except (OSError, ValueError, KeyError, TypeError):
        return "it has no readable record of its files"
    if found != recorded:
        return "its files are not those it was saved with"
    return None


def _remove_older_copies(folder: Path) -> None:
    """Remove the optimised copy an earlier memsearch saved for this onnxruntime beside the copy in
    `folder` (the same name without the packed weights' suffix): 90 MB, never loaded again."""
    older = folder.with_name(folder.name.removesuffix(_COPY_SUFFIX))
    if older.is_dir():
        _remove_if_ours(older)


def _remove_if_ours(folder: Path) -> None:
    """Remove `folder` if no other user could have written it; a planted folder is left (unused)."""
    with contextlib.suppress(OSError):
        if tree_problem(folder) is None:
            shutil.rmtree(folder, ignore_errors=True)


def _head(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters just after a space or punctuation, or whole."""
    if len(text) <= limit:
        return text
    for end in range(limit, max(limit - 4096, 0), -1):
        char = text[end - 1]
        if char.isspace() or unicodedata.category(char).startswith("P"):
            return text[:end]
    return text
