"""The store protocol is enough: the whole pipeline runs on an in-memory backend that knows no
SQL, and retrieval/ imports no concrete store. Also: one store serves searches from many threads."""

from __future__ import annotations

import ast
import contextlib
import math
import threading
import zlib
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memsearch.api import Memsearch
from memsearch.embedding.registry import REGISTRY
from memsearch.models import EmbeddingModelInfo, Memory, NewMemory, content_hash
from memsearch.profiles import available, load_profile
from memsearch.retrieval.pipeline import GRANULARITIES, MODES, SearchRequest, run_search
from memsearch.store.base import EVERYTHING, LexicalHits, Scope, SearchBackend, VectorHits
from memsearch.text import WORD, LexicalQuery, query_terms
from tests.conftest import T0

DIM = 512


def hashed_vector(text: str) -> np.ndarray:
    """A deterministic bag-of-words vector: enough to rank by shared words, with no model."""
    vector = np.zeros(DIM, np.float32)
    for word in WORD.findall(text.lower()):
        vector[zlib.crc32(word.encode()) % DIM] += 1.0
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def other_model(model: str, text: str) -> np.ndarray:
    """A query's vector of another model the fake store holds: made as its own (hashed)."""
    return hashed_vector(text)


class FakeBackend:
    """Memories in a list; BM25 and cosine computed in Python over them, per the protocol's words."""

    parallel_reads = False

    def __init__(self, memories: Sequence[Memory], views: dict[int, dict[str, str]]) -> None:
        self.memories = {m.id: m for m in memories}
        self.views = views

    def one_search(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # no state of its own to read

    def _in(self, scope: Scope) -> list[Memory]:
        return [m for m in self.memories.values() if scope.admits(m)]

    def _text(self, memory: Memory, view: str | None) -> str | None:
        if view is None:
            return f"{memory.text} {' '.join(memory.tags)}"
        return self.views.get(memory.id, {}).get(view, memory.text if view == "context" else None)

    def count(self, scope: Scope) -> int:
        return len(self._in(scope))

    def roles(self, scope: Scope) -> list[str]:
        return sorted({m.role for m in self._in(scope) if m.role})

    def has_kind(self, kind: str) -> bool:
        return any(m.kind == kind for m in self.memories.values())

    def lexical_search(self, query: LexicalQuery, scope: Scope, limit: int, view: str | None = None) -> LexicalHits:
        terms = query.words
        docs = {m.id: [w.lower() for w in WORD.findall(self._text(m, view) or "")] for m in self._in(scope)}
        average = sum(map(len, docs.values())) / max(len(docs), 1)
        hits = []
        for memory_id, words in docs.items():
            score = 0.0
            for term in terms:
                tf = words.count(term)
                if tf:
                    n = sum(term in other for other in docs.values())
                    idf = max(math.log((len(docs) - n + 0.5) / (n + 0.5)), 1e-6)
                    score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(words) / average))
            if score:
                hits.append((memory_id, score))
        return LexicalHits(sorted(hits, key=lambda h: (-h[1], h[0]))[:limit])

    def document_frequency(self, word: str, scope: Scope, at_most: int) -> int:
        found = sum(word.lower() in query_terms(self._text(m, None) or "") for m in self._in(scope))
        return min(found, at_most)

    def word_documents(self, words: Sequence[str]) -> tuple[int, list[int]]:
        held = [set(WORD.findall((self._text(m, None) or "").lower())) for m in self.memories.values()]
        return len(held), [sum(word.lower() in each for each in held) for word in words]

    def vector_search(
        self, vector: np.ndarray, scope: Scope, limit: int | None, view: str | None = None, *, model: str | None = None
    ) -> VectorHits:
        hits = []
        for memory in self._in(scope):  # another model's vectors: made as the store's own (hashed)
            text = self._text(memory, view) if view else memory.text
            if text is not None:
                hits.append((memory.id, float(hashed_vector(text) @ vector)))
        hits.sort(key=lambda h: (-h[1], h[0]))
        return VectorHits(hits if limit is None else hits[:limit], "exact")

    def cosines(self, vector: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
        return {i: float(hashed_vector(self.memories[i].text) @ vector) for i in ids if i in self.memories}

    def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        return {i: hashed_vector(self.memories[i].text) for i in ids if i in self.memories}

    def get_many(self, ids: Sequence[int]) -> dict[int, Memory]:
        return {i: self.memories[i] for i in ids if i in self.memories}

    def fields_of(self, ids: Sequence[int], names: Sequence[str]) -> dict[int, tuple[Any, ...]]:
        return {i: tuple(getattr(self.memories[i], name) for name in names) for i in ids if i in self.memories}

    def around(self, memory: Memory, before: int, after: int) -> list[Memory]:
        if memory.kind == "note":
            return [memory]
        turns = sorted(
            (m for m in self.memories.values() if m.kind == "turn" and m.session == memory.session),
            key=lambda m: (m.position or 0, m.id),
        )
        if memory.kind == "session":
            return [memory, *turns]
        at = next(i for i, t in enumerate(turns) if t.id == memory.id)
        return turns[max(0, at - before) : at + after + 1]

    def check_model(self, model: EmbeddingModelInfo) -> None:
        pass

    def extra_models(self) -> list[EmbeddingModelInfo]:
        """Every registered model's vectors (a shipped profile may name any)."""
        return [EmbeddingModelInfo(entry.name, 64) for entry in REGISTRY]


def memory(memory_id: int, text: str, days_old: float, **fields: Any) -> Memory:
    created = T0 - timedelta(days=days_old)
    defaults: dict[str, Any] = {
        "key": None, "last_accessed_at": created, "access_count": 0, "importance": 0.5, "priority": 1.0,
        "pinned": False, "project": None, "namespace": None, "session": None, "role": None, "tags": (),
        "metadata": {},
    }  # fmt: skip
    return Memory(
        id=memory_id, text=text, created_at=created, content_hash=content_hash(text), **{**defaults, **fields}
    )


@pytest.fixture(scope="module")
def backend() -> FakeBackend:
    turns = ["Ana: I went hiking on Mount Tam last Sunday", "Ben: I painted a lake at sunset", "Ana: I love sushi"]
    memories = [
        memory(1, "The deploy key lives in the team vault", 5, tags=("ops",)),
        memory(2, "parseConfig crashes on an empty YAML file", 5, project="cli"),
        memory(3, "Alice prefers dark roast coffee", 5),
        memory(4, "\n".join(turns), 30, kind="session", session="s1", conversation="c"),
    ]
    for n, text in enumerate(turns, start=1):
        memories.append(
            memory(4 + n, text, 30, kind="turn", session="s1", conversation="c", position=n, parent_id=4,
                   role=text.split(":")[0])
        )  # fmt: skip
    views = {4 + n: {"context": "\n".join(turns), "prev": "\n".join(turns[max(0, n - 2) : n])} for n in range(1, 4)}
    return FakeBackend(memories, views)


def test_the_fake_backend_satisfies_the_protocol(backend: FakeBackend) -> None:
    assert isinstance(backend, SearchBackend)


@pytest.mark.parametrize("profile", sorted(available()))
def test_every_profile_runs_on_a_backend_without_sql(backend: FakeBackend, profile: str) -> None:
    chosen = load_profile(profile)
    ran = 0
    for mode in MODES:
        for granularity in GRANULARITIES:
            request = SearchRequest("where is the deploy key", k=3, mode=mode, as_of=T0, granularity=granularity)
            if mode == "lexical" and not any(spec.startswith("lexical") for spec in chosen.legs.values()):
                continue
            outcome = run_search(backend, request, hashed_vector, chosen, embed_with=other_model)
            document = outcome.to_dict(raw=True)
            assert document["results"], (mode, granularity)
            if granularity == "turn":
                assert document["results"][0]["id"] == 1, (mode, document["results"][0]["text"])
            ran += 1
    assert ran >= 6


@pytest.mark.parametrize("profile", sorted(available()))
def test_legs_run_in_two_threads_answer_as_in_one(backend: FakeBackend, profile: str) -> None:
    threads: set[str] = set()

    class Parallel(FakeBackend):
        parallel_reads = True

        def lexical_search(self, *args: object, **kwargs: object) -> LexicalHits:
            threads.add(threading.current_thread().name)
            return super().lexical_search(*args, **kwargs)  # type: ignore[arg-type]

    parallel = Parallel(list(backend.memories.values()), backend.views)
    for query in ("where is the deploy key", "what did Bob say about coffee on 3 May 2024"):
        for granularity in GRANULARITIES:
            request = SearchRequest(query, k=3, mode="hybrid", as_of=T0, granularity=granularity)
            alone = run_search(backend, request, hashed_vector, load_profile(profile), None, other_model).to_dict(
                raw=True
            )
            together = run_search(parallel, request, hashed_vector, load_profile(profile), None, other_model)
            assert together.to_dict(raw=True) == alone
    lexical = any(spec.startswith("lexical") for spec in load_profile(profile).legs.values())
    assert (threads and threading.current_thread().name not in threads) or not lexical


def test_legs_run_in_turn_when_the_leg_thread_cannot_reach_the_store(backend: FakeBackend) -> None:
    """A server at its connection limit refuses the leg thread its own connection: the search
    runs those reads in its own thread instead, with the same answer."""
    from memsearch.errors import StoreNotFoundError

    class Refusing(FakeBackend):
        parallel_reads = True

        def lexical_search(self, *args: object, **kwargs: object) -> LexicalHits:
            if threading.current_thread() is not threading.main_thread():
                raise StoreNotFoundError("cannot connect to db: too many clients already")
            return super().lexical_search(*args, **kwargs)  # type: ignore[arg-type]

        def cosines(self, *args: object, **kwargs: object) -> dict[int, float]:
            if threading.current_thread() is not threading.main_thread():
                raise StoreNotFoundError("cannot connect to db: too many clients already")
            return super().cosines(*args, **kwargs)  # type: ignore[arg-type]

    refusing = Refusing(list(backend.memories.values()), backend.views)
    request = SearchRequest("where is the deploy key", k=3, mode="hybrid", as_of=T0)
    expected = run_search(backend, request, hashed_vector, load_profile("default")).to_dict(raw=True)
    assert run_search(refusing, request, hashed_vector, load_profile("default")).to_dict(raw=True) == expected


def test_scope_reaches_the_backend(backend: FakeBackend) -> None:
    request = SearchRequest("crashes deploy coffee", k=5, mode="hybrid", scope=replace(EVERYTHING, project="cli"))
    outcome = run_search(backend, request, hashed_vector, load_profile("default"))
    assert [c.id for c in outcome.results] == [2]


def test_retrieval_imports_no_concrete_store() -> None:
    root = Path(__file__).parent.parent / "memsearch" / "retrieval"
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                assert name not in ("sqlite3", "sqlean"), (path.name, name)
                assert not name.startswith("memsearch.store.sqlite"), (path.name, name)
                assert not name.startswith("memsearch.store.fts"), (path.name, name)
        assert "MATCH" not in path.read_text(encoding="utf-8"), path.name


def test_one_store_serves_searches_from_many_threads(ms: Memsearch) -> None:
    ms.add_many([NewMemory(f"note number {n} about topic {n % 7}") for n in range(60)])
    ms.search(SearchRequest("topic 3", k=5, mode="hybrid", touch=False))  # warm the encoder
    errors: list[BaseException] = []
    found: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        try:
            for n in range(10):
                outcome = ms.search(SearchRequest(f"topic {n % 7}", k=5, mode="hybrid"))
                with lock:
                    found.append(len(outcome.results))
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert found == [5] * 80
    accessed = sum(m.access_count for m in ms.list(limit=None))
    assert accessed == 80 * 5  # every access recorded, none lost
