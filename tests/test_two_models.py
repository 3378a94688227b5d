"""A store may hold a second model's vectors beside its own (`add_model`), kept up to date by every
write, dropped with `drop_model`, and searched by the legs of a profile that name that model.

The models are real: the bundled all-MiniLM-L6-v2 (the store's model) and, as the second, its
files with two of its six layers (tests/test_model_registry.py's `small_model`)."""

from __future__ import annotations

import json
import shutil
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from memsearch.api import Memsearch
from memsearch.cli.app import app
from memsearch.embedding import Encoder, bundled_model_path, encode_queries, load_encoder, resolve_model
from memsearch.errors import EmbeddingError, InvalidInputError, ModelVectorsMissingError
from memsearch.eval.runner import run_eval
from memsearch.models import NewMemory
from memsearch.profiles import LegSpec
from memsearch.retrieval.request import SearchRequest
from memsearch.store import EVERYTHING, open_store
from tests.serving import Served

NOTES = ["the deploy key lives in the vault", "water the roses on Sunday", "the train leaves at nine"]
SECOND = "minilm-two-layers"


@pytest.fixture(scope="module")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second real model: the bundled one's files with its first two layers only."""
    folder = tmp_path_factory.mktemp("models") / SECOND
    shutil.copytree(bundled_model_path(), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 2}))
    return folder


def filled(location: Path | str) -> None:
    with Memsearch(location) as ms:
        ms.add_many([NewMemory(text=text) for text in NOTES])


def write_profile(home: Path, name: str, legs: dict[str, str]) -> None:
    folder = home / "profiles"
    folder.mkdir(parents=True, exist_ok=True)
    table = "\n".join(f'{leg} = "{spec}"' for leg, spec in legs.items())
    (folder / f"{name}.toml").write_text(f'[legs]\n{table}\n\n[fusion]\nmethod = "rrf"\nweights = {{}}\n')


# -- leg specs ------------------------------------------------------------------------------------


def test_a_leg_spec_names_its_model_in_parentheses() -> None:
    assert LegSpec.parse("vector(gemma)") == LegSpec("vector", model="gemma")
    assert LegSpec.parse("vector(minilm-two-layers):Ann") == LegSpec("vector", None, "Ann", "minilm-two-layers")
    assert LegSpec.parse("vector") == LegSpec("vector")
    with pytest.raises(ValueError, match="views of another model's vectors are not stored"):
        LegSpec.parse("vector(gemma)@context")
    for bad in ("lexical(gemma)", "time(gemma)", "vector()", "vector(gemma", "vector(a b)"):
        with pytest.raises(ValueError, match="is not a leg spec"):
            LegSpec.parse(bad)


# -- the store holds a second model's vectors (both stores) ------------------------------------------


@pytest.mark.slow  # loads a second model: out of the quick tier
def test_a_second_model_embeds_every_memory_and_is_recorded(store_location: Path | str, small_model: Path) -> None:
    filled(store_location)
    with Memsearch(store_location) as ms:
        info = ms.add_model(str(small_model))
    assert info.name == SECOND and info.dim == 384 and info.version == resolve_model(str(small_model)).version
    with closing(open_store(store_location)) as store:
        assert store.extra_models() == [info]
        assert store.embedding_model() is not None and store.embedding_model().name != SECOND  # type: ignore[union-attr]
        second = load_encoder(resolve_model(str(small_model)))
        query = encode_queries(second, ["where is the deploy key?"])[0]
        hits = store.vector_search(query, EVERYTHING, 3, model=SECOND)
        texts = store.get_many([memory_id for memory_id, _ in hits])
        assert texts[hits[0][0]].text == NOTES[0]
        expected = second.encode([NOTES[0]])[0]
        assert hits[0][1] == pytest.approx(float(expected @ query), abs=1e-5)  # its own vector, not MiniLM's


def test_writes_keep_the_second_models_vectors(store_location: Path | str, small_model: Path) -> None:
    filled(store_location)
    with Memsearch(store_location) as ms:
        ms.add_model(str(small_model))
        added = ms.add(NewMemory(text="the cat sleeps on the sofa")).id
        ms.update(1, text="the deploy key moved to the safe")
        ms.delete([2])
    second = load_encoder(resolve_model(str(small_model)))
    with closing(open_store(store_location)) as store:
        query = encode_queries(second, ["where does the cat sleep?"])[0]
        ranked = store.vector_search(query, EVERYTHING, None, model=SECOND)
        assert sorted(memory_id for memory_id, _ in ranked) == [1, 3, added]  # the deleted one's is gone
        assert ranked[0][0] == added
        edited = dict(store.vector_search(second.encode(["the deploy key moved to the safe"])[0], EVERYTHING, None,
                                          model=SECOND))  # fmt: skip
        assert edited[1] == pytest.approx(1.0, abs=1e-5)  # the edit's new text, embedded by the second model


def test_an_import_embeds_with_the_second_model_too(store_location: Path | str, small_model: Path) -> None:
    with Memsearch(store_location) as ms:
        ms.add_model(str(small_model))  # an empty (new) store may name its second model first
        ms.import_text("\n".join(json.dumps({"text": t}) for t in NOTES), source="notes.jsonl")
    with closing(open_store(store_location)) as store:
        assert len(store.vector_search(np.ones(384, np.float32), EVERYTHING, None, model=SECOND)) == len(NOTES)


def test_drop_model_removes_its_vectors_and_its_record(store_location: Path | str, small_model: Path) -> None:
    filled(store_location)
    with Memsearch(store_location) as ms:
        ms.add_model(str(small_model))
        ms.drop_model(SECOND)
        ms.add(NewMemory(text="the cat sleeps on the sofa"))  # no second model is loaded or written now
    with closing(open_store(store_location)) as store:
        assert store.extra_models() == []
        assert store.vector_search(np.ones(384, np.float32), EVERYTHING, None, model=SECOND) == []


def test_add_model_refuses_the_stores_own_an_unknown_one_and_a_missing_one(
    store_location: Path | str, small_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    filled(store_location)
    with Memsearch(store_location) as ms:
        with pytest.raises(InvalidInputError, match="is this store's own model"):
            ms.add_model("minilm")
        with pytest.raises(InvalidInputError, match="neither a known name"):
            ms.add_model("minilm-xl")
        with pytest.raises(InvalidInputError, match=f"this store holds no vectors of {SECOND}"):
            ms.drop_model(SECOND)
        monkeypatch.setenv("MEMSEARCH_MODELS_DIR", str(tmp_path / "no-models"))
        with pytest.raises(EmbeddingError, match="model mpnet is not in"):
            ms.add_model("mpnet")
    with closing(open_store(store_location)) as store:
        assert store.extra_models() == []


@pytest.mark.slow  # loads a second model: out of the quick tier
def test_a_write_refuses_a_second_model_whose_files_changed(
    db_path: Path, small_model: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = isolated_home / "models"
    shutil.copytree(small_model, models / "mpnet")  # a registered name, found in the models folder
    monkeypatch.setenv("MEMSEARCH_MODELS_DIR", str(models))
    filled(db_path)
    with Memsearch(db_path) as ms:
        assert ms.add_model("mpnet").version == resolve_model(str(small_model)).version
    shutil.rmtree(models / "mpnet")
    shutil.copytree(bundled_model_path(), models / "mpnet")  # other weights under the same name
    with Memsearch(db_path) as ms, pytest.raises(EmbeddingError, match="this store's mpnet vectors come from"):
        ms.add(NewMemory(text="the cat sleeps on the sofa"))
    with Memsearch(db_path) as ms:
        assert ms.count() == len(NOTES)  # nothing was stored


# -- profile legs of the second model ---------------------------------------------------------------


def test_a_profile_leg_searches_the_second_models_vectors(
    store_location: Path | str, small_model: Path, isolated_home: Path
) -> None:
    write_profile(isolated_home, "two", {"vector": "vector", "second": f"vector({SECOND})"})
    filled(store_location)
    with Memsearch(store_location) as ms:
        ms.add_model(str(small_model))
        outcome = ms.search(SearchRequest("where is the deploy key?", k=3, mode="vector", profile="two"))
    assert outcome.results[0].memory.text == NOTES[0]
    assert set(outcome.results[0].legs) == {"vector", "second"}  # the leg under its profile name
    assert outcome.vector_engines == {"vector": "exact", "second": "exact"}


def test_a_profile_naming_a_model_the_store_lacks_is_a_typed_error(
    store_location: Path | str, isolated_home: Path
) -> None:
    write_profile(isolated_home, "two", {"vector": "vector", "second": "vector(gemma)"})
    filled(store_location)
    with Memsearch(store_location) as ms, pytest.raises(ModelVectorsMissingError) as error:
        ms.search(SearchRequest("deploy key", profile="two"))
    assert (error.value.profile, error.value.model) == ("two", "gemma")
    assert str(error.value) == "profile two needs gemma's vectors in this store"
    runner = CliRunner()
    db = ["--db", str(store_location)]
    found = runner.invoke(app, ["search", "deploy key", "--profile", "two", *db])
    assert found.exit_code != 0 and "Traceback" not in found.stderr
    assert found.stderr.strip() == (
        "memsearch: profile two needs gemma's vectors in this store: run `memsearch reindex --add-model gemma`"
    )


# -- the command line ------------------------------------------------------------------------------


def test_reindex_add_and_drop_model_on_the_command_line(db_path: Path, small_model: Path) -> None:
    runner = CliRunner()
    filled(db_path)
    db = ["--db", str(db_path)]
    added = runner.invoke(app, ["reindex", "--add-model", str(small_model), *db])
    assert added.exit_code == 0, added.stderr
    assert f"embedded 3 memories with {SECOND}" in added.stderr
    shown = json.loads(runner.invoke(app, ["stats", "--format", "json", *db]).stdout)
    assert shown["embedding_model"] == resolve_model().name and shown["embedding_version"] == resolve_model().version
    assert shown["extra_models"] == [
        {"name": SECOND, "dim": 384, "version": resolve_model(str(small_model)).version, "vectors": 3}
    ]
    table = runner.invoke(app, ["stats", *db])
    assert table.exit_code == 0 and SECOND in table.stdout
    for args, said in (
        (["--add-model", "minilm"], "is this store's own model"),
        (["--add-model", "minilm-xl"], "neither a known name"),
        (["--drop-model", "gemma"], "this store holds no vectors of gemma"),
        (["--add-model", str(small_model), "--drop-model", SECOND], "one of"),
    ):
        refused = runner.invoke(app, ["reindex", *args, *db])
        assert refused.exit_code != 0 and "Traceback" not in refused.stderr, refused.stderr
        assert said in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    dropped = runner.invoke(app, ["reindex", "--drop-model", SECOND, *db])
    assert dropped.exit_code == 0 and f"dropped {SECOND}'s vectors" in dropped.stderr, dropped.stderr
    assert json.loads(runner.invoke(app, ["stats", "--format", "json", *db]).stdout)["extra_models"] == []


@pytest.mark.slow  # loads a second model: out of the quick tier
def test_doctor_checks_the_second_model_is_there(db_path: Path, small_model: Path, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere" / SECOND
    shutil.copytree(small_model, moved)
    filled(db_path)
    with Memsearch(db_path) as ms:
        ms.add_model(str(moved))
    with Memsearch(db_path) as ms:
        found = {f.name: f for f in ms.doctor().findings}
    assert found[f"model {SECOND}"].level == "ok"
    shutil.rmtree(moved)
    with Memsearch(db_path) as ms:
        found = {f.name: f for f in ms.doctor().findings}
    second = found[f"model {SECOND}"]
    assert second.level != "ok" and "not where the store last saw it" in second.detail


# -- eval ------------------------------------------------------------------------------------------


def test_eval_adds_the_models_its_profiles_name(
    small_model: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch, encoder: Encoder
) -> None:
    models = isolated_home / "models"
    models.mkdir(parents=True)
    (models / SECOND).symlink_to(small_model)  # a model folder in the models folder, named by its name
    monkeypatch.setenv("MEMSEARCH_MODELS_DIR", str(models))
    write_profile(isolated_home, "two", {"vector": "vector", "second": f"vector({SECOND})"})
    data = Path(__file__).parent / "data" / "locomo_tiny.json"
    report = run_eval(
        data, fmt="locomo", profiles=["two"], modes=["vector"], granularities=["turn"], baselines=False,
        encoder=encoder,
    )  # fmt: skip
    (row,) = report.rows
    assert row.questions and row.mean("recall@10") is not None


def test_a_copy_keeps_the_second_models_vectors(db_path: Path, pg_url: str, small_model: Path) -> None:
    filled(db_path)
    with Memsearch(db_path) as ms:
        ms.add_model(str(small_model))
        assert ms.copy_to(pg_url) == len(NOTES)
    second = load_encoder(resolve_model(str(small_model)))
    query = encode_queries(second, ["when does the train leave?"])[0]
    with closing(open_store(db_path)) as source, closing(open_store(pg_url)) as copied:
        assert copied.extra_models() == source.extra_models()
        mine, theirs = (s.vector_search(query, EVERYTHING, None, model=SECOND) for s in (source, copied))
        assert [i for i, _ in theirs] == [i for i, _ in mine] and np.allclose(
            [s for _, s in theirs], [s for _, s in mine]
        )


def test_the_http_api_says_409_for_a_profile_the_store_lacks_the_vectors_of(served: Served) -> None:
    assert served.request("POST", "/add", {"text": NOTES[0]}).status == 200
    refused = served.request("POST", "/search", {"query": "deploy key", "profile": "quality"})
    assert refused.status == 409, refused.body
    assert "profile quality needs gemma's vectors in this store" in refused.body.decode()


def test_eval_of_a_profile_whose_model_is_missing_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encoder: Encoder
) -> None:
    monkeypatch.setenv("MEMSEARCH_MODELS_DIR", str(tmp_path / "no-models"))
    data = Path(__file__).parent / "data" / "locomo_tiny.json"
    with pytest.raises(EmbeddingError, match="model gemma is not in") as error:
        run_eval(data, fmt="locomo", profiles=["quality"], modes=["auto"], granularities=["turn"], encoder=encoder)
    assert "\n" not in str(error.value)
