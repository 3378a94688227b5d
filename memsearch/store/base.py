"""The store protocol: what retrieval and the service need from a store, in their own words.

Plain text, a `Scope` and vectors go in; `(id, score)` lists and `Memory` records come out. No
SQL, full-text syntax or vector matrix crosses this boundary, so a store may answer in process
(SQLite, with the vectors in memory) or push the work into a database server (PostgreSQL with
pgvector). A store is made of capabilities, each a protocol of its own: `MemoryRows`,
`LexicalIndex`, `OwnVectors` (the vector index), `ModelVectors`, `IndexState` and `WholeStore`.
`SearchBackend` is what `run_search` reads (the search parts of four of them); `Store` is all of
them, with the writes and the bulk reads of the use cases (import, curation, reindex, consolidate,
copy).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memsearch.errors import EditConflictError, MemoryNotFoundError
from memsearch.models import EmbeddingModelInfo, Memory, NewMemory
from memsearch.scope import EVERYTHING as EVERYTHING  # re-exported: the store protocol's words
from memsearch.scope import Scope as Scope
from memsearch.text import LexicalQuery

if TYPE_CHECKING:
    import numpy as np

INDEX_STATE_KEY = "notes_index"  # the meta row holding the notes index's state (memsearch.ingest.indexing)


Hits = list[tuple[int, float]]  # (memory id, score), best first


class EngineHits(list[tuple[int, float]]):
    """Hits with the engine that found them (`exact` unless a subclass says otherwise)."""

    def __init__(self, hits: Iterable[tuple[int, float]] = (), engine: str = "exact") -> None:
        super().__init__(hits)
        self.engine = engine


class VectorHits(EngineHits):
    """A vector search's hits: `exact` (every vector in scope scored) or `index` (an
    approximate index proposed the candidates; their scores are exact)."""


class LexicalHits(EngineHits):
    """A lexical search's hits: `exact` (FTS5's BM25 top k) or `bounded` (a large store read its
    posting lists only up to a budget and could not prove the top k; each score is exact)."""


@dataclass(frozen=True)
class StoreHealth:
    """What `memsearch doctor` reads from a store: its shape, its counts and its own checks."""

    backend: str  # sqlite or postgresql
    schema_version: int
    latest_schema_version: int  # this memsearch's
    model: EmbeddingModelInfo | None  # the model that made the stored vectors
    memories_by_kind: Mapping[str, int]
    vectors: int  # memories with their own vector
    without_vector: int  # memories that vector search cannot find
    fts_rows: int  # memories in the full-text index
    view_vectors: int
    integrity: str  # "ok", or what the database's own check found
    ann_index: bool  # whether vector search is served by an approximate index (else exact, in memory)
    wal_bytes: int | None  # SQLite's write-ahead log; None for a server
    size_bytes: int
    extra_models: tuple[EmbeddingModelInfo, ...] = ()  # the store's other models (see vector_search's `model`)


@dataclass(frozen=True)
class ExportedMemory:
    """One memory with everything a store holds for it, to move it to another store unchanged
    (ids, access counts and consolidation marks are in `memory`)."""

    memory: Memory
    lexical_views: Mapping[str, str]  # every full-text view (LEXICAL_VIEWS) → the text indexed for it
    vector: np.ndarray | None  # the memory's own vector
    views: Mapping[str, tuple[str, np.ndarray | None]]  # vector view → (its text, its vector)


@dataclass(frozen=True)
class Rewrite:
    """What a memory that stays derives from memories being deleted, rebuilt without them (a
    session chunk's text, its neighbours' views): its text, metadata and own vector, and the
    views named in `views`. A view maps to its text and its vector (None: the memory's own
    vector stands for it), or to None to remove it; views not named are kept (facets).
    `model_vectors` holds the text's vector of each of the store's other models, by name. An edit
    names the text it was made from (`expected_text`): the store writes nothing unless the memory
    still has that text when the write transaction holds it (`check_stored`)."""

    id: int
    text: str
    metadata: Mapping[str, Any]
    vector: np.ndarray
    views: Mapping[str, tuple[str, np.ndarray | None] | None]
    model_vectors: Mapping[str, np.ndarray] = field(default_factory=dict)
    expected_text: str | None = None

    def check_stored(self, stored_text: str | None) -> None:
        """Raise unless the memory's text as stored (None: no such memory) is what the rewrite expects."""
        if stored_text is None:
            raise MemoryNotFoundError(f"no memory with id {self.id}; nothing was written")
        if self.expected_text is not None and stored_text != self.expected_text:
            raise EditConflictError(self.id)


@dataclass(frozen=True)
class FilledVectors:
    """The vectors of a memory that waits for them (`Store.fill_vectors`): its own, and its vector
    views' (view → (text, vector)). `text` is the text they were made from: nothing is written for
    a memory whose text changed meanwhile (or that no longer waits)."""

    id: int
    text: str
    vector: np.ndarray
    views: Mapping[str, tuple[str, np.ndarray]] = field(default_factory=dict)


# -- the store's parts -------------------------------------------------------------------------
# A store is made of five capabilities (and what the whole store does: open, close, a transaction,
# moving and checking it). Each says what it needs in the protocol's words; the reads a search
# makes (`SearchBackend`) are the search parts of four of them. A backend implements them one by
# one, and registers it with one row of `memsearch.store.BACKENDS`.


@runtime_checkable
class RowReads(Protocol):
    """The memory rows a search reads: counts, speakers, records by id and their neighbours."""

    def count(self, scope: Scope) -> int:
        """How many memories are in scope."""
        ...

    def has_kind(self, kind: str) -> bool: ...

    def roles(self, scope: Scope) -> list[str]:
        """The distinct roles (speakers) of the memories in scope."""
        ...

    def get_many(self, ids: Sequence[int]) -> dict[int, Memory]: ...

    def fields_of(self, ids: Sequence[int], names: Sequence[str]) -> dict[int, tuple[Any, ...]]:
        """Some fields of each of `ids` that exists, by id: the values of the Memory fields
        `names` (in that order, as Memory holds them), reading nothing else; what a search ranks
        its candidates by, before it reads the rows it shows."""
        ...

    def around(self, memory: Memory, before: int, after: int) -> list[Memory]:
        """The memory with its neighbours: a session chunk with all its turns; a turn with the
        turns around it in its session; a note with the memories around it in time."""
        ...


@runtime_checkable
class MemoryRows(RowReads, Protocol):
    """The memories' rows (`Memory`'s fields): their reads and writes. Each write is one transaction
    that keeps the other parts in step (its full-text rows, its vectors, the other models')."""

    def get(self, memory_id: int) -> Memory: ...

    def get_by_key(self, key: str) -> Memory: ...

    def id_for_key(self, key: str) -> int | None: ...

    def key_hashes(self, prefix: str) -> dict[str, str]:
        """Each key that starts with `prefix` → its memory's `content_hash` (models.content_hash)."""
        ...

    def list(self, scope: Scope = EVERYTHING, *, limit: int | None = None, offset: int = 0) -> builtins.list[Memory]:
        """Memories in scope, newest first."""
        ...

    def tags(self, scope: Scope = EVERYTHING) -> builtins.list[tuple[str, int]]:
        """Each tag of the memories in scope with how many have it, most used first, then by name."""
        ...

    def iter_texts(self) -> Iterator[tuple[int, str]]: ...

    def session_turns(self, conversation: str | None, session: str) -> builtins.list[Memory]:
        """The turns of one session, in order."""
        ...

    def insert(
        self,
        memories: Sequence[NewMemory],
        vectors: np.ndarray | None,
        model: EmbeddingModelInfo | None,
        now: datetime,
        *,
        replace: bool = False,
        view_vectors: Mapping[int, Mapping[str, np.ndarray]] | None = None,
        model_vectors: Mapping[str, np.ndarray] | None = None,
    ) -> builtins.list[int]:
        """`model_vectors` holds, for each of the store's other models (by name), the vectors
        of the memories' texts (rows in batch order): required for every one of them. Memories
        stored without `vectors` wait for them (`pending_count`, `fill_vectors`): they are found
        by their words at once, by vector search once filled."""
        ...

    def delete(self, ids: Sequence[int], rewrites: Sequence[Rewrite] = ()) -> None:
        """Delete the memories and apply `rewrites` to the ones that stay, in one transaction: all
        of it, or nothing if any id is unknown."""
        ...

    def rewrite(self, rewrites: Sequence[Rewrite]) -> None:
        """Apply `rewrites` in one transaction, deleting nothing (an edit of a memory's text)."""
        ...

    def touch(self, ids: Sequence[int], now: datetime) -> None: ...

    def update(self, memory_id: int, changes: dict[str, Any]) -> Memory: ...

    def amend(self, changes: Mapping[int, Mapping[str, Any]]) -> None:
        """Change fields of memories that keep their text, in one transaction: what `update` may,
        and `key`, `metadata` and `created_at` (a note section that moved in its file)."""
        ...

    def set_consolidation(self, superseded: dict[int, int], groups: dict[int, int]) -> None: ...


@runtime_checkable
class LexicalIndex(Protocol):
    """Full-text search over the memories' text, tags and lexical views, with FTS5's BM25."""

    def lexical_search(self, query: LexicalQuery, scope: Scope, limit: int, view: str | None = None) -> LexicalHits:
        """BM25 over the memories' text and tags (or one full-text view: `context`, `prev`) for
        the words, quoted phrases and gram terms of `query` (read from the query's text once, see
        text.LexicalQuery), any of them; higher scores are better. A query with no words finds
        nothing. A large store may read only part of long posting lists (`engine` `bounded`: each
        score exact, the top k not proven)."""
        ...

    def document_frequency(self, word: str, scope: Scope, at_most: int) -> int:
        """How many memories in scope hold `word` in their text or tags, counting no further than
        `at_most`."""
        ...

    def word_documents(self, words: Sequence[str]) -> tuple[int, builtins.list[int]]:
        """How many memories the store holds, and for each word how many of them hold it (the
        document frequencies BM25's idf reads, over the whole store), from the full-text index's
        own counts: the word's text column count plus its tags column count (a memory with the
        word in both counts twice); a word of several tokens (`snake_case`) counts as its rarest."""
        ...


@runtime_checkable
class VectorReads(Protocol):
    """The own vectors a search reads. Vectors are unit length; cosine is their dot product."""

    def vector_search(
        self, vector: np.ndarray, scope: Scope, limit: int | None, view: str | None = None, *, model: str | None = None
    ) -> VectorHits:
        """The `limit` memories in scope whose vector (or whose `view`'s vector) is most cosine-
        similar to `vector`, best first, ties to the smaller id; `limit=None` ranks them all
        (exactly). A large store may answer through an approximate index (`engine`). With
        `model` (one of `extra_models`, by name), that model's vectors of the memories' own
        texts are searched instead, exactly (no view)."""
        ...

    def cosines(self, vector: np.ndarray, ids: Sequence[int]) -> dict[int, float]:
        """`vector`'s cosine with the own vector of each of `ids` that has one."""
        ...

    def vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The own vectors of those of `ids` that have one."""
        ...

    def check_model(self, model: EmbeddingModelInfo) -> None:
        """Refuse (ModelMismatchError) to use vectors of another model than the store's."""
        ...


@runtime_checkable
class OwnVectors(VectorReads, Protocol):
    """The vector index: each memory's own vector and its vector views, of the store's model, and
    the memories that wait for theirs."""

    def embedding_model(self) -> EmbeddingModelInfo | None: ...

    def vector_count(self) -> int: ...

    def view_names(self, memory_id: int) -> builtins.list[str]:
        """The vector views stored for one memory, by name."""
        ...

    def views_with_vectors(self) -> builtins.list[tuple[int, str, str]]:
        """(memory id, view, text) of every stored vector view."""
        ...

    def all_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """Every memory's own vector: sorted ids and the matching rows of one matrix."""
        ...

    def nearest(self, vectors: np.ndarray, exclude: Collection[int] = ()) -> builtins.list[tuple[int, float] | None]:
        """For each row of `vectors`, the stored memory most cosine-similar to it (leaving out
        `exclude`), or None in an empty store."""
        ...

    def pending_count(self) -> int:
        """How many memories wait for their vectors."""
        ...

    def pending_ids(self, limit: int | None = None) -> builtins.list[int]:
        """The ids of memories that wait for their vectors, oldest first (at most `limit`)."""
        ...

    def fill_vectors(
        self,
        model: EmbeddingModelInfo,
        filled: Sequence[FilledVectors],
        model_vectors: Mapping[str, np.ndarray] | None = None,
    ) -> int:
        """Write the vectors of memories that wait for them, in one transaction (rows of
        `model_vectors`, by the store's other models' names, in `filled`'s order); a memory that no
        longer waits, or whose text is no longer the one embedded, is passed over. Returns how
        many memories were filled."""
        ...

    def replace_vectors(
        self,
        ids: Sequence[int],
        vectors: np.ndarray,
        model: EmbeddingModelInfo,
        view_vectors: Mapping[tuple[int, str], np.ndarray] | None = None,
    ) -> None: ...

    def prepare_search_indexes(self, progress: Callable[[int, int], None] | None = None) -> int:
        """After a bulk write (index, import, reindex, copy), make what a search would otherwise
        make on its first read of the new state (a large SQLite store's approximate vector index),
        in the writing process; `progress` gets (done, to do) while it runs. Returns how many
        vectors were indexed (0: nothing to make here, as for a server that keeps its own indexes)."""
        ...


@runtime_checkable
class ModelReads(Protocol):
    """The other models a search may name (`vector(NAME)` legs)."""

    def extra_models(self) -> builtins.list[EmbeddingModelInfo]:
        """The store's other models, whose vectors `vector_search(model=…)` searches."""
        ...


@runtime_checkable
class ModelVectors(ModelReads, Protocol):
    """The vectors of the store's other models: one vector of each memory's text per model."""

    def add_model_vectors(self, model: EmbeddingModelInfo, ids: Sequence[int], vectors: np.ndarray) -> None:
        """Record another model with its vectors of every memory (`ids`, rows of `vectors`), in
        one transaction."""
        ...

    def drop_model_vectors(self, name: str) -> None:
        """Forget another model and its vectors, in one transaction."""
        ...

    def all_model_vectors(self, model: str) -> tuple[np.ndarray, np.ndarray]:
        """Every vector of one of the other models: sorted memory ids and the matching rows."""
        ...

    def model_vector_counts(self) -> dict[str, int]:
        """How many vectors each of the other models has, by name."""
        ...


@runtime_checkable
class IndexState(Protocol):
    """The notes index's state document (memsearch.ingest.indexing), kept beside the memories."""

    def index_state(self) -> str | None:
        """The state document `memsearch index` saved last (its roots and each file's chunks), or None."""
        ...

    def save_index_state(self, document: str) -> None:
        """Replace the state document, in one transaction of its own."""
        ...


@runtime_checkable
class WholeStore(Protocol):
    """What the whole store does: where it is, closing it, a transaction its parts' writes join,
    moving it (memsearch.store.copy) and checking it (`memsearch doctor`, `stats`)."""

    location: str  # a path or a URL without its password, for messages

    def close(self) -> None: ...

    def batch(self) -> AbstractContextManager[None]:
        """A transaction that the writes made inside it join: all of them, or none (an index run's
        files and the state that names them are committed together)."""
        ...

    def export(self, batch: int = 1000) -> Iterator[ExportedMemory]:
        """Every memory with all it holds, in id order, read `batch` memories at a time."""
        ...

    def restore(self, memories: Iterable[ExportedMemory], model: EmbeddingModelInfo | None) -> int:
        """Write exported memories into this store, which must be empty, keeping their ids, in one
        transaction (all or nothing); `model` made their vectors. Returns how many were written."""
        ...

    def stats(self) -> dict[str, Any]: ...

    def health(self) -> StoreHealth:
        """Counts and the database's own consistency check (SQLite's quick_check; for a server,
        that it answers), for `memsearch doctor`."""
        ...


@runtime_checkable
class SearchBackend(RowReads, LexicalIndex, VectorReads, ModelReads, Protocol):
    """The reads a search makes (what `run_search` reads): the search parts of the capabilities."""

    # Whether a search makes reads side by side (its lexical legs in a second thread while it
    # embeds the query and runs the others; its candidates' cosines beside their rows): it pays
    # where a server answers the queries (their time is waiting), not where the reads run in
    # this process.
    parallel_reads: bool

    def one_search(self) -> AbstractContextManager[None]:
        """The reads of one search (`run_searches` opens one a request, around its search): inside
        it, on this thread, the store's own state that a search asks for many times (its meta
        values: generation, model, lexical views' state…, and how many memories wait for their
        vectors) is read once, together, and read again only after a write of this store's.
        Another connection's write in between is seen by the next search."""
        ...


@runtime_checkable
class Store(SearchBackend, MemoryRows, OwnVectors, ModelVectors, IndexState, WholeStore, Protocol):
    """A whole store: its five capabilities and what the whole store does."""


CAPABILITIES: tuple[type, ...] = (MemoryRows, LexicalIndex, OwnVectors, ModelVectors, IndexState, WholeStore)
