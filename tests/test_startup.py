"""Start-up (issue 12): each command builds and imports only what it needs, with the output it
had; a search that will embed loads the encoder while it does the rest; the ONNX session loads
from an optimised copy of the export."""

from __future__ import annotations

import dataclasses
import importlib
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from typer import BadParameter
from typer._coercion import build_runtime_param
from typer.core import TyperArgument, TyperOption
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.cli.app import app, command_app
from memsearch.cli.startup import _name, _PlainValues, only_command
from memsearch.embedding import Encoder, resolve_model
from memsearch.embedding.onnx import OPTIMIZED_PREFIX, export_dir, load_session
from memsearch.errors import EmbeddingError
from memsearch.models import NewMemory
from memsearch.retrieval.request import SearchRequest
from tests.cli_probe import modules_imported_by, run_then
from tests.serving import start_server

COMMANDS = [_name(info) for info in app.registered_commands]


def test_only_command_keeps_the_named_command_alone() -> None:
    assert [info.callback for info in only_command(app, ["search", "x"]).registered_commands] == [
        info.callback
        for info in app.registered_commands
        if info.callback is not None and info.callback.__name__ == "search"
    ]
    assert len(only_command(app, ["--debug", "get", "1"]).registered_commands) == 1
    for args in ([], ["--help"], ["--version"], ["serch"], ["--help", "search"]):
        assert only_command(app, args) is app, args
    assert len(app.registered_commands) == len(COMMANDS) > 20  # the app itself is untouched


@pytest.mark.parametrize("name", COMMANDS)
def test_a_commands_help_is_the_same_built_alone(name: str) -> None:
    full = CliRunner().invoke(app, [name, "--help"], terminal_width=100)
    alone = CliRunner().invoke(only_command(app, [name, "--help"]), [name, "--help"], terminal_width=100)
    assert full.exit_code == alone.exit_code == 0, full.output
    assert alone.output == full.output
    entry = CliRunner().invoke(command_app([name, "--help"]), [name, "--help"], terminal_width=100)
    assert entry.exit_code == 0 and entry.output == full.output  # what the console entry point runs


def test_a_command_imports_only_its_own_command_module(tmp_path: Path) -> None:
    modules = modules_imported_by("search", "x", "--mode", "lexical", "--db", str(tmp_path / "none.db"))
    assert "memsearch.cli.searching" in modules
    for other in ("memsearch.cli.admin", "memsearch.cli.memories", "memsearch.cli.evaluation", "memsearch.cli.serving"):
        assert other not in modules, other


def _outcome(runtime: Any, value: Any, param: Any, ctx: Any) -> tuple[str, Any]:
    try:
        return "value", runtime._coerce_value(value, param=param, ctx=ctx)
    except BadParameter as error:
        return "error", error.format_message()


VALUES = ["5", "0", "-1", "-0", "007", "1000", "1001", "99999999999999999999", "abc", "", " 3", "3.5",
          "1e3", "json", "JSON", "hybrid", "lexical", "table", "turn", "note", "bash", "off", "–"]  # fmt: skip


def test_plain_values_are_what_typers_adapters_make() -> None:
    """Every parameter of every command, on values plain and not: the same value, or the same error."""
    group = typer.main.get_command(app)
    checked = 0
    for command in [group, *group.commands.values()]:  # type: ignore[attr-defined]
        ctx = typer.Context(command)
        for param in command.params:
            if not isinstance(param, TyperOption | TyperArgument):
                continue
            descriptor = param.type_descriptor
            plain = _PlainValues(descriptor.parameter_info, descriptor.annotation, descriptor)
            values: list[Any] = [*VALUES, param.default, 5, 2.5]
            if descriptor.is_list:
                values = [tuple(VALUES[:3]), ("json", "note"), ("note", "turn"), ("x",), (), [str(v) for v in VALUES]]
            for value in values:
                if value is None or isinstance(value, bool):
                    continue
                full = build_runtime_param(descriptor)
                assert _outcome(plain, value, param, ctx) == _outcome(full, value, param, ctx), (
                    command.name,
                    param.name,
                    value,
                )
                checked += 1
    assert checked > 1000


def test_help_imports_no_config_parser_no_pydantic_and_no_library() -> None:
    modules = modules_imported_by("--help", check=True)
    for heavy in ("numpy", "pydantic", "tomllib", "memsearch.config", "memsearch.profiles", "memsearch.api"):
        assert heavy not in modules, heavy


def test_a_lexical_search_for_a_script_imports_no_rich_pydantic_or_encoder(tmp_path: Path, encoder: Encoder) -> None:
    db = tmp_path / "m.db"
    with Memsearch(db, encoder=encoder) as ms:
        ms.add(NewMemory("the deploy key is in the vault"))
    modules = modules_imported_by("search", "deploy key", "--mode", "lexical", "-f", "json", "--db", str(db))
    for heavy in ("rich", "pydantic", "onnxruntime", "tokenizers", "http.client"):  # tomllib: the profile is TOML
        assert heavy not in modules, heavy
    assert "memsearch.store.sqlite" in modules  # it did search, in this process


LEXICAL_NEEDS_NONE_OF = ("numpy", "usearch", "onnxruntime", "tokenizers", "torch", "sentence_transformers", "rich")


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_a_lexical_search_imports_no_numpy_ann_library_or_model_runtime(
    tmp_path: Path, encoder: Encoder, fmt: str
) -> None:
    """Issue 32: a lexical search (the store, FTS5, ranking and rendering) runs on the standard
    library; numpy, usearch and the model's runtime are imported only by what embeds or scores vectors,
    and Rich only by a table on a terminal (in a pipe a table is tab-separated lines)."""
    db = tmp_path / "m.db"
    with Memsearch(db, encoder=encoder) as ms:
        ms.add(NewMemory("the deploy key is in the vault"))
    args = ("search", "deploy key", "--mode", "lexical", "-f", fmt, "--no-server", "--db", str(db))
    modules = modules_imported_by(*args, check=True)
    assert "memsearch.store.sqlite" in modules  # it did search, in this process
    for heavy in LEXICAL_NEEDS_NONE_OF:
        assert heavy not in modules, heavy


# What a lexical search in this process never runs (issue 32, the fresh-shell goals): the writes'
# ingestion and outcomes, the LLM client and its prompts (no LLM stage without an endpoint), the
# legs' thread pool (one leg), CSV (a table or JSON), a temporary file (no index saved), and
# OpenSSL's hashes (hashlib, hmac, secrets: a store's first open, a model's files, a cache file's
# check). Their modules are imported where they are used.
LEXICAL_SEARCH_IMPORTS_NONE_OF = (
    "memsearch.ingest.importing", "memsearch.ingest.embed", "memsearch.outcomes", "memsearch.llm",
    "memsearch.retrieval.llm_prompts", "concurrent.futures", "csv", "tempfile", "hashlib", "hmac", "secrets",
    # the encoders' package: its base, the model registry (a table of dataclasses), its loaders
    "memsearch.embedding", "memsearch.embedding.base", "memsearch.embedding.registry",
)  # fmt: skip


def test_a_lexical_search_imports_nothing_it_does_not_run(tmp_path: Path, encoder: Encoder) -> None:
    db = tmp_path / "m.db"
    with Memsearch(db, encoder=encoder) as ms:
        ms.add(NewMemory("the deploy key is in the vault"))
    home = tmp_path / "home"  # (without MEMSEARCH_HOME, platformdirs names the config's folder)
    args = ("search", "deploy key", "--mode", "lexical", "--no-server", "--db", str(db))
    modules = modules_imported_by(*args, check=True, env={"MEMSEARCH_HOME": str(home)})
    assert "memsearch.store.sqlite" in modules and "memsearch.retrieval.pipeline" in modules  # it did search
    assert [name for name in LEXICAL_SEARCH_IMPORTS_NONE_OF if name in modules] == []


# The records of a search or a request that nothing compares, hashes or is handed outside
# memsearch (the library's outcomes, requests, profiles and models keep every method): a
# dataclass's generated methods are compiled (exec) when its module is imported, which made the
# classes of a lexical search the largest part of its start that memsearch controls.
INTERNAL_RECORDS = (
    "memsearch.cli.running.Remote", "memsearch.cli.options.Filters", "memsearch.cli.grid.Marked",
    "memsearch.cli.grid.Column", "memsearch.config.Key", "memsearch.config.Setting", "memsearch.config.Config",
    "memsearch.operations.HttpRoute", "memsearch.operations.Search", "memsearch.operations.AddRequest",
    "memsearch.discovery.Advertised", "memsearch.http_exchange.Reply", "memsearch.retrieval.stage_runner.StageTrace",
    "memsearch.retrieval.stage_runner.StageRunner", "memsearch.retrieval.pipeline.SearchRun",
    "memsearch.retrieval.legs.Recall", "memsearch.store.sql_search_state._SearchState",
    "memsearch.retrieval.ranking.Columns", "memsearch.retrieval.ranking.Records",
    "memsearch.retrieval.scoring.QueryFacts", "memsearch.retrieval.dates.NamedDates",
    "memsearch.retrieval.routing.RouteFeatures", "memsearch.retrieval.query.WordSpan",
    "memsearch.retrieval.query.ParsedQuery", "memsearch.store.fts.Tokenized",
)  # fmt: skip


@pytest.mark.parametrize("name", INTERNAL_RECORDS)
def test_an_internal_record_makes_no_comparison_or_freezing_methods(name: str) -> None:
    module, _, qualname = name.rpartition(".")
    record = getattr(importlib.import_module(module), qualname)
    assert dataclasses.is_dataclass(record)
    assert {"__eq__", "__hash__", "__setattr__", "__delattr__"} & set(vars(record)) == set()


# Patterns compiled on first use: what a search for plain English words never needs.
LAZY_PATTERNS = """
import json
from memsearch import text
from memsearch.retrieval import dates
lazy = {"cjk": text._cjk_run, "chunk units": text.unit_pattern, "says when": dates._says_when,
        "bare month": dates._bare_month}
print(json.dumps(sorted(name for name, made in lazy.items() if made.cache_info().currsize)))
"""


def test_a_lexical_search_for_english_words_compiles_no_cjk_chunk_or_date_pattern(
    tmp_path: Path, encoder: Encoder
) -> None:
    """Issue 32: the CJK, chunking and date patterns (a few ms to compile) wait for a text that needs
    them; a lexical search for plain words made none of them."""
    db = tmp_path / "m.db"
    with Memsearch(db, encoder=encoder) as ms:
        ms.add(NewMemory("the deploy key is in the vault"))
    args = ("search", "deploy key", "--mode", "lexical", "-f", "json", "--no-server", "--db", str(db))
    assert run_then(LAZY_PATTERNS, *args) == "[]"
    # A query in CJK text does compile the CJK pattern (and still finds nothing here).
    cjk = ("search", "密钥", "--mode", "lexical", "-f", "json", "--no-server", "--db", str(db))
    assert run_then(LAZY_PATTERNS, *cjk) == '["cjk"]'


def test_a_search_through_the_server_imports_no_numpy_encoder_or_store(tmp_path: Path, encoder: Encoder) -> None:
    db = tmp_path / "m.db"
    with Memsearch(db, encoder=encoder) as ms:
        ms.add(NewMemory("the deploy key is in the vault"))
    server = start_server(db)
    try:
        modules = modules_imported_by("--debug", "search", "deploy key", "-f", "json", "--db", str(db), check=True)
    finally:
        assert server.stop() == 0
    assert "memsearch.http_exchange" in modules  # it did go through the server
    assert "h11" in modules  # h11 does the protocol: no hand-written HTTP parser
    # http.client (email's parser, ssl) is not needed for one request on one loopback connection.
    for heavy in ("numpy", "onnxruntime", "tokenizers", "sqlite3", "sqlean", "memsearch.api", "memsearch.store.sqlite",
                  "rich", "pydantic", "tomllib", "http.client", "email", "ssl"):  # fmt: skip
        assert heavy not in modules, heavy


# What a search through a server never needs (issue 32): it checks its request, sends it and
# renders the JSON that comes back. No store (memsearch.scope holds the request's Scope), no
# memory model (memsearch.checks holds the text check), no ranking, profiles or config parser,
# and, with the server's file beside its store, neither OpenSSL's hashes nor, under MEMSEARCH_HOME,
# platformdirs (the runtime dir's place is worked out only when that file is passed over; without
# MEMSEARCH_HOME the config's folder is platformdirs').
CLIENT_SEARCH_IMPORTS_NONE_OF = (
    "memsearch.store", "memsearch.store.base", "memsearch.models", "memsearch.text", "memsearch.retrieval.pipeline",
    "memsearch.retrieval.ranking", "memsearch.profiles", "memsearch.embedding", "memsearch.outcomes", "csv",
    "hashlib", "platformdirs", "tempfile", "encodings.idna",  # (an ASCII host goes to getaddrinfo as bytes)
)  # fmt: skip


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_search_through_the_server_imports_only_what_a_request_needs(
    tmp_path: Path, encoder: Encoder, fmt: str
) -> None:
    db = tmp_path / "m.db"
    with Memsearch(db, encoder=encoder) as ms:
        ms.add(NewMemory("the deploy key is in the vault"))
    home = tmp_path / "home"
    server = start_server(db)
    try:
        args = ("--debug", "search", "deploy key", "-f", fmt, "--db", str(db))
        modules = modules_imported_by(*args, check=True, env={"MEMSEARCH_HOME": str(home)})
    finally:
        assert server.stop() == 0
    assert "memsearch.http_exchange" in modules  # it did go through the server
    assert [name for name in CLIENT_SEARCH_IMPORTS_NONE_OF if name in modules] == []


class _Recording:
    """An encoder factory that notes the thread it ran in, and can fail."""

    def __init__(self, encoder: Encoder, error: Exception | None = None) -> None:
        self.encoder, self.error = encoder, error
        self.threads: list[str] = []

    def __call__(self) -> Encoder:
        self.threads.append(threading.current_thread().name)
        if self.error is not None:
            raise self.error
        return self.encoder


def test_a_search_that_embeds_loads_the_encoder_in_a_thread_meanwhile(db_path: Path, encoder: Encoder) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.add(NewMemory("the deploy key is in the vault"))
    factory = _Recording(encoder)
    with Memsearch(db_path, encoder_factory=factory) as ms:
        ms.search(SearchRequest("vault", mode="lexical"))
        assert factory.threads == []  # a lexical search loads no model
        hits = ms.search(SearchRequest("where is the deploy key", mode="hybrid")).results
        ms.search(SearchRequest("the vault", mode="vector"))
    assert [hit.id for hit in hits] == [1]
    assert len(factory.threads) == 1 and factory.threads[0] != threading.main_thread().name


def test_an_encoder_that_fails_to_load_in_the_thread_fails_the_search(db_path: Path, encoder: Encoder) -> None:
    with Memsearch(db_path, encoder=encoder) as ms:
        ms.add(NewMemory("the deploy key is in the vault"))
    factory = _Recording(encoder, EmbeddingError("no model here"))
    with Memsearch(db_path, encoder_factory=factory) as ms:
        with pytest.raises(EmbeddingError, match="no model here"):
            ms.search(SearchRequest("where is the deploy key", mode="hybrid"))
        factory.error = None  # the next search loads afresh
        assert ms.search(SearchRequest("where is the deploy key", mode="hybrid")).results
    assert len(factory.threads) == 2


def test_the_session_loads_from_an_optimised_copy_with_the_same_vectors(tmp_path: Path, encoder: Encoder) -> None:
    import onnxruntime

    model = tmp_path / "model.onnx"
    model.write_bytes((export_dir(resolve_model()) / "model.onnx").read_bytes())
    plain = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    first = load_session(model)
    copies = list(tmp_path.glob(f"{OPTIMIZED_PREFIX}*/model.onnx"))
    assert len(copies) == 1 and (copies[0].parent / "model.onnx.data").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left
    second = load_session(model)  # from the copy
    ids = np.array([[101, 1996, 8021, 3145, 2003, 1999, 1996, 11632, 102]], dtype=np.int64)
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    expected = plain.run(None, feeds)[0][0]
    for session in (first, second):
        got = session.run(None, feeds)[0][0]
        assert float(got @ expected / np.linalg.norm(got) / np.linalg.norm(expected)) > 0.99999
    # The copy's session computes what the saving one did, to the bit (same kernels, same packed weights).
    assert np.array_equal(first.run(None, feeds)[0], second.run(None, feeds)[0])


def _copy_of(model: Path) -> Path:
    copies = list(model.parent.glob(f"{OPTIMIZED_PREFIX}*/model.onnx"))
    assert len(copies) == 1, copies
    return copies[0].parent


def _feeds() -> dict[str, Any]:
    ids = np.array([[101, 1996, 8021, 3145, 2003, 1999, 1996, 11632, 102]], dtype=np.int64)
    return {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}


def test_the_optimised_copy_keeps_the_packed_weights_and_a_record_of_its_files(
    tmp_path: Path, encoder: Encoder
) -> None:
    """Issue 32: the copy saves the matrix products' packed weights (a session then skips packing
    them: most of its start), and records its files as saved, so that a damaged copy is never loaded."""
    model = tmp_path / "model.onnx"
    model.write_bytes((export_dir(resolve_model()) / "model.onnx").read_bytes())
    load_session(model)
    copy = _copy_of(model)
    assert (copy / "copy.json").is_file()
    graph = (copy / "model.onnx").read_bytes()
    assert b"prepacked" in graph  # the packed weights' entries, beside the weights themselves


@pytest.mark.parametrize("damage", ["truncated", "rewritten", "unrecorded"])
def test_a_damaged_optimised_copy_is_not_loaded_but_made_again(tmp_path: Path, encoder: Encoder, damage: str) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes((export_dir(resolve_model()) / "model.onnx").read_bytes())
    expected = load_session(model).run(None, _feeds())[0]
    copy = _copy_of(model)
    data = copy / "model.onnx.data"
    if damage == "truncated":
        with data.open("r+b") as handle:
            handle.truncate(data.stat().st_size // 2)
    elif damage == "rewritten":  # same size, other bytes: onnxruntime would load it and compute other vectors
        with data.open("r+b") as handle:
            handle.seek(4096)
            handle.write(b"\x7f" * 4096)
    else:
        (copy / "copy.json").unlink()
    again = load_session(model)
    assert np.array_equal(again.run(None, _feeds())[0], expected)
    assert (_copy_of(model) / "copy.json").is_file()  # made again, and recorded
    assert np.array_equal(load_session(model).run(None, _feeds())[0], expected)


def test_an_older_optimised_copy_is_removed_when_the_new_one_is_saved(tmp_path: Path, encoder: Encoder) -> None:
    import onnxruntime

    model = tmp_path / "model.onnx"
    model.write_bytes((export_dir(resolve_model()) / "model.onnx").read_bytes())
    older = tmp_path / f"{OPTIMIZED_PREFIX}model-{onnxruntime.__version__}"  # what memsearch saved before
    older.mkdir(mode=0o700)
    (older / "model.onnx").write_bytes(b"an older copy")
    load_session(model)
    assert not older.exists()
    assert _copy_of(model).name.endswith("-prepacked")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to a read-only folder")
def test_an_unwritable_export_folder_still_gives_a_session(tmp_path: Path, encoder: Encoder) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes((export_dir(resolve_model()) / "model.onnx").read_bytes())
    tmp_path.chmod(0o500)
    try:
        assert load_session(model).get_inputs()
    finally:
        tmp_path.chmod(0o700)
    assert not list(tmp_path.glob(f"{OPTIMIZED_PREFIX}*"))


def test_warm_creates_the_store_loads_the_model_and_records_no_access(db_path: Path, encoder: Encoder) -> None:
    """`Memsearch.warm` (what a server calls before it listens): a new store is created; a store
    with vectors is searched once, with no access recorded on what it found."""
    with Memsearch(db_path) as ms:
        ms.warm()
        assert db_path.exists() and ms.count() == 0
        ms.add(NewMemory("the deploy key is in the vault"))
    with Memsearch(db_path) as ms:
        ms.warm()
        assert ms.get(1).access_count == 0
