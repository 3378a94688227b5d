"""The bundled model, on both routes: the fast ONNX route must give the reference vectors; the
opt-in int8 route gives close ones, under a model name of its own."""

from __future__ import annotations

import itertools
import re
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from memsearch.api import Memsearch
from memsearch.embedding import BUNDLED_MODEL_NAME, Encoder, bundled_model_path, load_encoder, resolve_model
from memsearch.embedding.batching import usable_cpus
from memsearch.embedding.onnx import OnnxEncoder
from memsearch.errors import InvalidInputError, ModelMismatchError
from memsearch.models import NewMemory
from memsearch.retrieval.request import SearchRequest
from memsearch.store.base import EVERYTHING

TEXTS = [
    "hello",
    "Fixed null-deref when JWT was malformed in the auth middleware",
    "parseConfig() throws on an empty YAML file: TypeError: cannot read 'keys' of undefined",
    "Émilie prefers oat milk ☕ and visits 東京 every spring 🌸",
    "deploy " * 400,  # far past the model's 256-token window: truncated the same way
    "a",
    "The quick brown fox jumps over the lazy dog. " * 20,
]


@pytest.fixture(scope="module")
def reference() -> Encoder:
    return load_encoder(resolve_model(), "sentence-transformers")


def test_fast_route_matches_sentence_transformers(encoder: Encoder, reference: Encoder) -> None:
    fast = encoder.encode(TEXTS)
    slow = reference.encode(TEXTS)
    assert fast.shape == slow.shape == (len(TEXTS), 384)
    cosines = (fast * slow).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines


def test_vectors_do_not_depend_on_batching(encoder: Encoder) -> None:
    together = encoder.encode(TEXTS)
    alone = np.stack([encoder.encode([text])[0] for text in TEXTS])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_similar_texts_are_closer_than_unrelated(encoder: Encoder) -> None:
    query, near, far = encoder.encode(["malformed auth tokens", TEXTS[1], "my cat likes tuna"])
    assert float(query @ near) > float(query @ far) + 0.1


def test_empty_input_gives_an_empty_matrix(encoder: Encoder) -> None:
    assert encoder.encode([]).shape == (0, 384)


def test_bundled_model_is_found_by_its_names(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_model().name == BUNDLED_MODEL_NAME
    assert resolve_model("all-MiniLM-L6-v2").path == bundled_model_path()
    monkeypatch.setenv("MEMSEARCH_MODEL", "bundled")
    assert resolve_model().name == BUNDLED_MODEL_NAME


def test_model_must_be_a_local_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="local directory"):
        resolve_model("sentence-transformers/some-hub-model")
    with pytest.raises(InvalidInputError):
        resolve_model(str(tmp_path))


def test_another_model_directory_is_accepted(tmp_path: Path) -> None:
    copy = tmp_path / "my-model"
    shutil.copytree(bundled_model_path(), copy)
    spec = resolve_model(str(copy))
    # recorded by its folder's name and content, not by its path: a copy of the bundled model is that model
    assert spec.name == "my-model" and spec.version == resolve_model().version
    encoder = load_encoder(spec, "sentence-transformers")
    assert encoder.info.name == spec.name and encoder.info.dim == 384
    assert encoder.info.location == str(copy.resolve())  # where to find it again, a hint only


@pytest.fixture(scope="module")
def int8_encoder(model_cache: Path) -> Encoder:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEMSEARCH_CACHE_DIR", str(model_cache))
        return load_encoder(resolve_model(), "onnx-int8")


def test_int8_route_stays_close_to_the_model(encoder: Encoder, int8_encoder: Encoder, model_cache: Path) -> None:
    texts = [*TEXTS[1:4], "Caroline went to the LGBTQ support group yesterday and felt inspired"]
    cosines = (encoder.encode(texts) * int8_encoder.encode(texts)).sum(axis=1)
    assert cosines.min() > 0.98, cosines
    assert int8_encoder.info.name != encoder.info.name
    assert any((model_cache / "onnx").glob("*/model-int8.onnx"))  # quantised once, beside the export


@pytest.mark.parametrize("store_route", ["onnx", "onnx-int8"])
def test_a_store_refuses_the_other_route(
    tmp_path: Path, encoder: Encoder, int8_encoder: Encoder, store_route: str
) -> None:
    maker, other = (encoder, int8_encoder) if store_route == "onnx" else (int8_encoder, encoder)
    db = tmp_path / "store.db"
    with Memsearch(db, encoder=maker) as ms:
        ms.add_many([NewMemory(text="the deploy key lives in the vault")])
    with Memsearch(db, encoder=other) as ms:
        with pytest.raises(ModelMismatchError, match=f"vectors come from {re.escape(maker.info.name)}"):
            ms.search(SearchRequest("deploy key", mode="hybrid"))
        with pytest.raises(ModelMismatchError):
            ms.add_many([NewMemory(text="another note")])


# -- what an import stores: batching must not change a vector -------------------------------------


def alone(encoder: Encoder, text: str) -> np.ndarray:
    vector: np.ndarray = encoder.encode([text])[0]
    return vector


def test_an_import_stores_the_vectors_of_each_text_embedded_alone(ms: Memsearch, encoder: Encoder) -> None:
    """Length-sorted batches padded to their longest text, run side by side, each distinct text once:
    every stored vector (own, context/next views, chunks of a long note) is its text's vector
    embedded on its own, near-duplicates dropped by the profile's dedup taking no vector with them."""
    ms.import_text((Path(__file__).parent / "data" / "locomo_tiny.json").read_text(), source="tiny", fmt="locomo")
    minutes = " ".join(
        f"Item {i} of the weekly meeting: the team reviewed the budget for project {i}." for i in range(60)
    )
    notes = [*TEXTS, minutes, TEXTS[1], "the cat sleeps on the warm windowsill", TEXTS[3]]
    outcomes = ms.add_many([NewMemory(text=text) for text in notes], profile="pgvector")
    assert [o.stored for o in outcomes[-3:]] == [False, True, False]  # two duplicates among the kept
    store = ms.store()
    ids, matrix = store.all_vectors()
    texts = {memory.id: memory.text for memory in store.get_many(ids.tolist()).values()}
    expected = encoder.encode([texts[int(i)] for i in ids])  # one big batch, as a check of the check
    for row, memory_id in enumerate(ids):
        np.testing.assert_allclose(matrix[row], alone(encoder, texts[int(memory_id)]), atol=1e-5)
    np.testing.assert_allclose(matrix, expected, atol=1e-5)
    checked = {"context": 0, "next": 0, "chunk": 0}
    for memory_id, view, text in store.views_with_vectors():
        if text == texts[memory_id]:
            continue  # the memory's own vector stands for a view with its text
        if view.startswith("chunk_"):
            assert store.cosines(alone(encoder, text), [memory_id])[memory_id] >= 1 - 1e-5, (memory_id, view)
            checked["chunk"] += 1
        elif view in ("context", "next"):
            scores = dict(store.vector_search(alone(encoder, text), EVERYTHING, None, view=view))
            assert scores[memory_id] >= 1 - 1e-5, (memory_id, view)
            checked[view] += 1
    assert min(checked.values()) >= 2, checked


def test_concurrent_callers_get_the_same_vectors(encoder: Encoder) -> None:
    """One encoder serves several threads at once (an HTTP server's requests): each gets its own vectors."""
    texts = [*TEXTS, *(f"note number {i} about the deploy pipeline" for i in range(40))]
    expected = encoder.encode(texts)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: encoder.encode(texts), range(4)))
    for result in results:
        np.testing.assert_allclose(result, expected, atol=1e-6)


def test_batches_run_side_by_side_on_the_usable_cpus(encoder: Encoder, monkeypatch: pytest.MonkeyPatch) -> None:
    """With 2 CPUs or more, a long input's batches run on several threads, each run one-threaded
    in onnxruntime (its own threads spend a third more CPU time on small matrices, and much more
    when other processes share the cores)."""
    if usable_cpus() < 2:
        pytest.skip("one usable CPU")
    threads: set[int] = set()
    run = OnnxEncoder._run

    def recording_run(self: OnnxEncoder, encodings: list[object]) -> np.ndarray:
        threads.add(threading.get_ident())
        return run(self, encodings)

    monkeypatch.setattr(OnnxEncoder, "_run", recording_run)
    assert isinstance(encoder, OnnxEncoder)
    done: list[int] = []
    vectors = encoder.encode(
        [f"note {i}: " + "word " * (i % 50) for i in range(200)], progress=lambda n, _: done.append(n)
    )
    assert vectors.shape == (200, 384)
    assert len(threads) >= 2
    assert done == sorted(done) and done[-1] == 200


@pytest.mark.slow  # loads the reference model (torch): out of the quick tier
def test_the_reference_route_batches_by_length_one_torch_thread_a_run(
    reference: Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33: a store's other model (EmbeddingGemma runs on this route) embedded each memory's
    text in batches taken in store order, so a session chunk of 1,000 tokens padded the turns
    beside it to its length. Batches are now length-sorted and small, and each runs one-threaded
    (torch's own threads on small matrices cost about 2.5 times the CPU with another process on
    the cores), side by side on the usable CPUs; the vectors and their order do not change."""
    import torch

    from memsearch.embedding.reference import SentenceTransformerEncoder

    assert isinstance(reference, SentenceTransformerEncoder)
    model = reference._model
    batches: list[list[int]] = []
    threads: set[int] = set()
    encode = model.encode

    def recording(texts: list[str], **options: object) -> np.ndarray:
        batches.append([len(text) for text in texts])
        threads.add(threading.get_ident())
        vectors: np.ndarray = encode(texts, **options)
        return vectors

    monkeypatch.setattr(model, "encode", recording)
    texts = [("session transcript line. " * (40 + i)) if i % 10 == 0 else f"turn {i}: " + "word " * (i % 7)
             for i in range(60)]  # fmt: skip
    done: list[int] = []
    vectors = reference.encode(texts, progress=lambda n, _: done.append(n))
    assert torch.get_num_threads() == 1
    assert max(len(batch) for batch in batches) <= 8
    ordered = sorted(batches, key=min)  # no short text waits in a batch of long ones
    assert all(batch == sorted(batch) for batch in ordered), ordered
    assert all(max(one) <= min(two) for one, two in itertools.pairwise(ordered)), ordered
    if usable_cpus() >= 2:
        assert len(threads) >= 2
    assert done == sorted(done) and done[-1] == len(texts)
    monkeypatch.undo()
    alone = np.stack([model.encode([text], normalize_embeddings=True)[0] for text in texts[:12]])
    np.testing.assert_allclose(vectors[:12], alone, atol=1e-5)
