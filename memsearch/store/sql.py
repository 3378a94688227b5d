"""What both SQL stores share: the memories table's columns, read and written through one
description of a memory's fields (`memsearch.models.MEMORY_FIELDS`) in each engine's dialect, the
scope condition, and the store methods that run alike on SQLite and PostgreSQL (`SQLStore`). Each
store keeps what its engine does differently: connections, transactions, full-text and vectors."""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from memsearch.errors import DuplicateKeyError, MemoryNotFoundError, ModelMismatchError
from memsearch.growth import added_per_period
from memsearch.models import (
    FIELDS_BY_NAME,
    GIVEN_FIELDS,
    MEMORY_FIELDS,
    SETTABLE_FIELDS,
    EmbeddingModelInfo,
    Memory,
    NewMemory,
)
from memsearch.store.base import EVERYTHING, INDEX_STATE_KEY, FilledVectors, Rewrite, Scope, StoreHealth
from memsearch.store.dialects import Dialect
from memsearch.store.model_vectors import SqlModelVectors, extra_fields
from memsearch.store.sql_search_state import SearchStateReads
from memsearch.timeutil import to_iso

if TYPE_CHECKING:
    import numpy as np

# Every column of a memory, in the order of the Memory dataclass (a row of them is one Memory).
MEMORY_COLUMNS = ", ".join(f.name for f in MEMORY_FIELDS)
# A new memory's columns: those it gives (NewMemory's fields of the same name), its text's hash
# and its session chunk's id. An engine may add columns of its own (SQLStore.insert_columns).
NEW_COLUMNS = (*(f.name for f in GIVEN_FIELDS), "content_hash", "parent_id")
# What `amend` may change: what `set` may, and what a note's file says of a memory that keeps its
# text (where it is, its tags, its time and its key; see memsearch.ingest.indexing).
AMENDABLE_FIELDS = (*SETTABLE_FIELDS, "key", "metadata", "created_at")
# Columns that name another memory: a restore sets them once every memory is there.
REFERS = tuple(f.name for f in MEMORY_FIELDS if f.spec.refers)
RESTORED = tuple(f for f in MEMORY_FIELDS if not f.spec.refers)  # the fields a restore writes first
T = TypeVar("T")


def described(model: EmbeddingModelInfo) -> str:
    version = f", version {model.version[:12]}" if model.version else ""
    return f"{model.name} ({model.dim}-d{version})"


log = logging.getLogger(__name__)
# The meta rows that record the vectors' model (models.EmbeddingModelInfo), in its field order.
# Stores written before versions have the first two only.
MODEL_META = ("embedding_model", "embedding_dim", "embedding_version", "embedding_location")


class NewBatch:
    """What one `insert` writes: the memories, their vectors and their views' vectors, and what
    the engine prepared for them before its transaction (`SQLStore._prepare`)."""

    def __init__(
        self,
        memories: Sequence[NewMemory],
        vectors: np.ndarray | None,
        view_vectors: Mapping[int, Mapping[str, np.ndarray]] | None,
        prepared: Sequence[Any],
    ) -> None:
        self.memories = memories
        self.vectors = vectors
        self.view_vectors = view_vectors or {}
        self.prepared = prepared
        self.replaced = False  # a memory was rewritten in place: its old text is to be forgotten


class SQLStore(SearchStateReads):
    """The store methods both SQL engines run alike. A store supplies its connection (`_db`, one
    per thread, whose `execute` returns a cursor), its dialect, its write transaction (`_write`)
    and the hooks below where its engine differs."""

    dialect: ClassVar[Dialect]
    latest_schema_version: ClassVar[int]
    insert_columns: ClassVar[tuple[str, ...]] = NEW_COLUMNS  # an engine's own columns follow NEW_COLUMNS
    # A memory's row (MEMORY_COLUMNS) from the memories table under the alias m; a store that keeps
    # part of a memory elsewhere joins it here (SQLite's access record: sqlite_access).
    memory_select: ClassVar[str] = f"SELECT {MEMORY_COLUMNS} FROM memories m"
    location: str
    read_only: bool
    _access_skipped: bool  # the note that access was not recorded is given once
    _local: threading.local
    _lock: threading.Lock
    _connections: builtins.list[Any]

    def _compose(self) -> None:
        """Make the parts both SQL stores hold (each store's __init__ calls it): the ModelVectors
        part, whose methods are the store's."""
        self.models = SqlModelVectors(self, self.dialect)
        self.extra_models, self.add_model_vectors = self.models.extra_models, self.models.add_model_vectors
        self.drop_model_vectors, self.all_model_vectors = self.models.drop_model_vectors, self.models.all_model_vectors
        self.model_vector_counts = self.models.model_vector_counts

    def _write(self, work: Callable[[Any], T]) -> T:
        """Run `work(connection)` in one write transaction and return what it returns."""
        raise NotImplementedError

    @property
    def schema_version(self) -> int:
        raise NotImplementedError

    def embedding_model(self) -> EmbeddingModelInfo | None:
        """The model recorded with the vectors (see MODEL_META), or None before the first."""
        meta = self._search_state()
        if meta is None:
            rows = self._db.execute(
                f"SELECT key, value FROM meta WHERE key IN ({self.dialect.marks(len(MODEL_META))})", MODEL_META
            ).fetchall()
            meta = dict(rows)
        name, dim = meta.get("embedding_model"), meta.get("embedding_dim")
        if not name or not dim:
            return None
        return EmbeddingModelInfo(name, int(dim), meta.get("embedding_version"), meta.get("embedding_location"))

    def _write_model_meta(self, db: Any, model: EmbeddingModelInfo) -> None:
        """Record `model` in the meta rows of MODEL_META (a version or location it lacks is removed);
        a row that holds its value already is not written, so writers do not queue on its lock."""
        mark = self.dialect.mark
        for key, value in zip(MODEL_META, (model.name, str(model.dim), model.version, model.location), strict=True):
            if self._meta(key) == value:
                continue
            if value is None:
                db.execute(f"DELETE FROM meta WHERE key = {mark}", (key,))
            else:
                db.execute(
                    f"INSERT INTO meta (key, value) VALUES ({mark}, {mark}) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )

    def _close_thread_connection(self) -> None:
        """Close this thread's own connection, for a thread that ends before the store does (the
        next use in this thread opens another)."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            return
        self._local.connection = None
        with self._lock:
            if connection in self._connections:
                self._connections.remove(connection)
        connection.close()

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()
        self._local = threading.local()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def check_model(self, model: EmbeddingModelInfo) -> None:
        """Refuse to mix vectors of two models in one store."""
        stored = self.embedding_model()
        if stored is not None and not stored.is_same_model(model) and self.vector_count():
            raise ModelMismatchError(
                f"this store's vectors come from {described(stored)} but the model in use is {described(model)}"
            )

    # -- writes ---------------------------------------------------------------------------

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
        """Store the memories with their full-text rows and vectors in one transaction; return their ids.

        A key that exists already is an error unless `replace`, which rewrites that memory in place.
        `view_vectors` maps a batch position to the vectors of its vector views (see VECTOR_VIEWS);
        `model_vectors` the store's other models (by name) to their vectors of the texts.
        """
        if vectors is not None and model is None:
            raise ValueError("vectors need the model that made them")
        batch = NewBatch(memories, vectors, view_vectors, self._prepare(memories))
        columns = self.insert_columns
        sets = ", ".join(f"{column} = {self.dialect.mark}" for column in columns)
        created = columns.index("created_at")

        def work(db: Any) -> builtins.list[int]:
            if model is not None:
                self.check_model(model)
                self._record_model(db, model)
            ids: builtins.list[int] = []
            for index, memory in enumerate(memories):
                existing = self.id_for_key(memory.key) if memory.key is not None else None
                if existing is not None and not replace:
                    raise DuplicateKeyError(f"a memory with key {memory.key!r} exists already (id {existing})")
                parent_id = self.id_for_key(memory.parent_key) if memory.parent_key is not None else None
                values = [*self.dialect.new_values(memory, now, parent_id), *self._own_values(batch, index)]
                if existing is not None:
                    self._unindex(db, existing, batch, index)
                    db.execute(
                        f"UPDATE memories SET {sets}, last_accessed_at = created_at WHERE id = {self.dialect.mark}",
                        (*values, existing),
                    )
                    memory_id = existing
                else:
                    memory_id = self._insert_row(db, columns, [*values, values[created]])
                    self._added(db, batch, index)
                self._index(db, memory_id, batch, index)
                ids.append(memory_id)
            self._index_all(db, ids, batch)
            if vectors is None:  # they wait for their vectors, those of the other models too
                self._set_pending(db, ids, waiting=True)
            else:
                self.models.write(db, ids, model_vectors)
                self._set_pending(db, ids, waiting=False)
            return ids

        return self._write(work)

    # A memory without its own vector waits for one: what a copy carries over (`restore`).
    WAITING_SQL = (
        "INSERT INTO pending_vectors (memory_id) SELECT id FROM memories m "
        "WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.memory_id = m.id) ON CONFLICT (memory_id) DO NOTHING"
    )

    def _set_pending(self, db: Any, ids: Sequence[int], *, waiting: bool) -> None:
        """Record that the memories wait for their vectors, or that they wait no longer."""
        mark = self.dialect.mark
        if not ids:
            return
        rows = [(int(memory_id),) for memory_id in ids]
        if waiting:  # a memory stored again in place keeps no vector of its old text
            db.cursor().executemany(f"DELETE FROM vectors WHERE memory_id = {mark}", rows)
            db.cursor().executemany(f"DELETE FROM model_vectors WHERE memory_id = {mark}", rows)
            sql = f"INSERT INTO pending_vectors (memory_id) VALUES ({mark}) ON CONFLICT (memory_id) DO NOTHING"
        else:
            sql = f"DELETE FROM pending_vectors WHERE memory_id = {mark}"
        db.cursor().executemany(sql, rows)

    def fill_vectors(
        self,
        model: EmbeddingModelInfo,
        filled: Sequence[FilledVectors],
        model_vectors: Mapping[str, np.ndarray] | None = None,
    ) -> int:
        """Write the vectors of memories that wait for them, in one transaction; a memory that no
        longer waits, or whose text changed since it was embedded, is passed over."""
        mark = self.dialect.mark

        def work(db: Any) -> int:
            self.check_model(model)
            self._record_model(db, model)
            ids = [item.id for item in filled]
            waiting: dict[int, str] = {}
            for start in range(0, len(ids), 500):
                part = ids[start : start + 500]
                rows = db.execute(
                    f"SELECT m.id, m.text FROM memories m JOIN pending_vectors p ON p.memory_id = m.id "
                    f"WHERE m.id IN ({self.dialect.marks(len(part))})",
                    part,
                )
                waiting.update((int(memory_id), text) for memory_id, text in rows)
            kept = [row for row, item in enumerate(filled) if waiting.get(item.id) == item.text]
            chosen = [filled[row] for row in kept]
            self._fill(db, chosen)
            chosen_ids = [item.id for item in chosen]
            rows_of = {name: vectors[kept] for name, vectors in (model_vectors or {}).items()}
            self.models.write(db, chosen_ids, rows_of)
            db.cursor().executemany(
                f"DELETE FROM pending_vectors WHERE memory_id = {mark}", [(memory_id,) for memory_id in chosen_ids]
            )
            return len(chosen)

        return self._write(work) if filled else 0

    def _fill(self, db: Any, filled: Sequence[FilledVectors]) -> None:
        """Write (or overwrite) the memories' own vectors and their views' texts and vectors."""
        raise NotImplementedError

    def update(self, memory_id: int, changes: dict[str, Any]) -> Memory:
        """Change some of SETTABLE_FIELDS of one memory (new tags are indexed anew)."""
        unknown = set(changes) - set(SETTABLE_FIELDS)
        if unknown:
            raise ValueError(f"cannot set {sorted(unknown)}")
        self.amend({memory_id: changes})
        return self.get(memory_id)

    def amend(self, changes: Mapping[int, Mapping[str, Any]]) -> None:
        """Change fields of memories that keep their text (AMENDABLE_FIELDS: new tags are indexed
        anew), in one transaction."""
        unknown = {name for fields in changes.values() for name in fields} - set(AMENDABLE_FIELDS)
        if unknown:
            raise ValueError(f"cannot amend {sorted(unknown)}")
        mark = self.dialect.mark

        def work(db: Any) -> None:
            for memory_id, fields in changes.items():
                memory = self.get(memory_id)
                for name, value in fields.items():
                    stored = self.dialect.write(FIELDS_BY_NAME[name], value)
                    db.execute(f"UPDATE memories SET {name} = {mark} WHERE id = {mark}", (stored, memory_id))
                if "tags" in fields:
                    self._retag(db, memory, fields["tags"])

        if changes:
            self._write(work)

    def key_hashes(self, prefix: str) -> dict[str, str]:
        """Each key that starts with `prefix` → its memory's `content_hash`."""
        sql = f"SELECT key, content_hash FROM memories WHERE substr(key, 1, {len(prefix)}) = {self.dialect.mark}"
        return {key: digest for key, digest in self._db.execute(sql, (prefix,))}

    def rewrite(self, rewrites: Sequence[Rewrite]) -> None:
        """Apply `rewrites` in one transaction, deleting nothing (an edit of a memory's text)."""
        self.delete((), rewrites)

    def delete(self, ids: Sequence[int], rewrites: Sequence[Rewrite] = ()) -> None:
        raise NotImplementedError

    def set_consolidation(self, superseded: dict[int, int], groups: dict[int, int]) -> None:
        """Replace every supersession mark and group id in one transaction."""
        mark = self.dialect.mark

        def work(db: Any) -> None:
            db.execute(
                "UPDATE memories SET superseded_by = NULL, group_id = NULL "
                "WHERE superseded_by IS NOT NULL OR group_id IS NOT NULL"
            )
            cursor = db.cursor()
            cursor.executemany(
                f"UPDATE memories SET superseded_by = {mark} WHERE id = {mark}",
                [(new, old) for old, new in sorted(superseded.items())],
            )
            cursor.executemany(
                f"UPDATE memories SET group_id = {mark} WHERE id = {mark}",
                [(group, memory_id) for memory_id, group in sorted(groups.items())],
            )

        self._write(work)

    def replace_vectors(
        self,
        ids: Sequence[int],
        vectors: np.ndarray,
        model: EmbeddingModelInfo,
        view_vectors: Mapping[tuple[int, str], np.ndarray] | None = None,
    ) -> None:
        """Swap every vector (and each (memory id, view)'s) for one of `model` in one transaction."""
        mark, column = self.dialect.mark, self.dialect.vector_column

        def work(db: Any) -> None:
            self._clear_vectors(db)
            self._record_model(db, model)
            db.cursor().executemany(
                f"UPDATE views SET {column} = {mark} WHERE memory_id = {mark} AND view = {mark}",
                [
                    (self.dialect.vector_value(v), memory_id, view)
                    for (memory_id, view), v in (view_vectors or {}).items()
                ],
            )
            self._add_vectors(db, ids, vectors)

        self._write(work)

    def _clear_vectors(self, db: Any) -> None:
        """Delete every memory's own vector (for replace_vectors)."""
        raise NotImplementedError

    def _add_vectors(self, db: Any, ids: Sequence[int], vectors: np.ndarray) -> None:
        """Write the memories' own vectors (rows of `vectors`), none of which is stored."""
        raise NotImplementedError

    def _access_not_recorded(self, reason: str) -> None:
        """Recording access after a search is best effort: a read-only, busy or full store still
        answers. The note is given once."""
        if not self._access_skipped:
            self._access_skipped = True
            log.warning("access not recorded: %s", reason)

    def _retag(self, db: Any, memory: Memory, tags: Sequence[str]) -> None:
        """Index the memory's new tags (its text as it is)."""
        raise NotImplementedError

    def _insert_row(self, db: Any, columns: Sequence[str], values: Sequence[Any]) -> int:
        """INSERT a memory's `columns` and its last_accessed_at (the last value); its new id."""
        raise NotImplementedError

    def _record_model(self, db: Any, model: EmbeddingModelInfo) -> None:
        raise NotImplementedError

    def _prepare(self, memories: Sequence[NewMemory]) -> Sequence[Any]:
        """What the engine works out for the memories before the transaction (none by default)."""
        return ()

    def _own_values(self, batch: NewBatch, index: int) -> Sequence[Any]:
        """The values of the engine's own insert_columns for one memory (none by default)."""
        return ()

    def _unindex(self, db: Any, memory_id: int, batch: NewBatch, index: int) -> None:
        """Remove what a memory being rewritten in place indexed for its old text."""
        raise NotImplementedError

    def _added(self, db: Any, batch: NewBatch, index: int) -> None:
        """After a new memory's row is written."""

    def _index(self, db: Any, memory_id: int, batch: NewBatch, index: int) -> None:
        """Index one memory just written (full text, vectors, views), or nothing to do it in `_index_all`."""

    def _index_all(self, db: Any, ids: Sequence[int], batch: NewBatch) -> None:
        """Index the memories just written, all at once, or nothing when `_index` did."""

    # -- reads ----------------------------------------------------------------------------

    def id_for_key(self, key: str) -> int | None:
        row = self._db.execute(f"SELECT id FROM memories WHERE key = {self.dialect.mark}", (key,)).fetchone()
        return row[0] if row else None

    def get(self, memory_id: int) -> Memory:
        row = self._db.execute(f"{self.memory_select} WHERE m.id = {self.dialect.mark}", (memory_id,)).fetchone()
        if row is None:
            raise MemoryNotFoundError(f"no memory with id {memory_id}")
        return self.dialect.row_to_memory(row)

    def get_by_key(self, key: str) -> Memory:
        memory_id = self.id_for_key(key)
        if memory_id is None:
            raise MemoryNotFoundError(f"no memory with key {key!r}")
        return self.get(memory_id)

    def _memories(self, condition: str, params: Sequence[Any]) -> builtins.list[Memory]:
        """The memories (table `m`) that meet `condition`, in the order and limits it ends with."""
        rows = self._db.execute(f"{self.memory_select} WHERE {condition}", params)
        return [self.dialect.row_to_memory(row) for row in rows]

    def list(self, scope: Scope = EVERYTHING, *, limit: int | None = None, offset: int = 0) -> builtins.list[Memory]:
        """Memories in scope, newest first."""
        where, params = self.dialect.where(scope)
        mark = self.dialect.mark
        order = f"ORDER BY m.created_at DESC, m.id DESC LIMIT {mark} OFFSET {mark}"
        return self._memories(f"{where} {order}", (*params, *self.dialect.page(limit, offset)))

    def tags(self, scope: Scope = EVERYTHING) -> builtins.list[tuple[str, int]]:
        """Each tag of the memories in scope with how many have it, most used first, then by name
        (ordered here: the engines' collations differ)."""
        where, params = self.dialect.where(scope)
        sql = f"SELECT t.value, count(*) FROM memories m, {self.dialect.each_tag} WHERE {where} GROUP BY t.value"
        return sorted(((str(tag), int(n)) for tag, n in self._db.execute(sql, params)), key=lambda t: (-t[1], t[0]))

    def has_kind(self, kind: str) -> bool:
        sql = f"SELECT 1 FROM memories WHERE kind = {self.dialect.mark} LIMIT 1"
        return self._db.execute(sql, (kind,)).fetchone() is not None

    def vector_count(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM vectors").fetchone()[0])

    def pending_count(self) -> int:
        if (values := self._search_state()) is not None and None in values:
            return int(values[None] or 0)
        return int(self._db.execute("SELECT count(*) FROM pending_vectors").fetchone()[0])

    def pending_ids(self, limit: int | None = None) -> builtins.list[int]:
        mark = self.dialect.mark
        sql = f"SELECT memory_id FROM pending_vectors ORDER BY memory_id LIMIT {mark} OFFSET {mark}"
        return [int(memory_id) for (memory_id,) in self._db.execute(sql, self.dialect.page(limit, 0))]

    def view_names(self, memory_id: int) -> builtins.list[str]:
        """The vector views stored for one memory, by name."""
        sql = f"SELECT view FROM views WHERE memory_id = {self.dialect.mark} ORDER BY view"
        return [view for (view,) in self._db.execute(sql, (memory_id,))]

    def views_with_vectors(self) -> builtins.list[tuple[int, str, str]]:
        """(memory id, view, text) of every stored vector view, for reindex."""
        rows = self._db.execute("SELECT memory_id, view, text FROM views ORDER BY memory_id, view")
        return [(int(memory_id), view, text) for memory_id, view, text in rows]

    # -- neighbours and time ------------------------------------------------------------------

    def session_turns(self, conversation: str | None, session: str) -> builtins.list[Memory]:
        """The turns of one session, in order."""
        mark = self.dialect.mark
        condition = f"kind = 'turn' AND session = {mark} AND conversation {self.dialect.same} ORDER BY position, id"
        return self._memories(condition, (session, conversation))

    def around(self, memory: Memory, before: int, after: int) -> builtins.list[Memory]:
        """The memory with its neighbours: a session chunk with all its turns; a turn with the
        turns around it; a note with the memories of its session (or store) around it in time."""
        if memory.kind == "session" and memory.session is not None:
            return [memory, *self.session_turns(memory.conversation, memory.session)]
        if memory.kind == "turn" and memory.session is not None:
            turns = self.session_turns(memory.conversation, memory.session)
            at = next(i for i, turn in enumerate(turns) if turn.id == memory.id)
            return turns[max(0, at - before) : at + after + 1]
        mark = self.dialect.mark
        same_session = f"AND session = {mark}" if memory.session is not None else ""
        params: builtins.list[Any] = [memory.session] if memory.session is not None else []
        stamp = (self.dialect.time_value(memory.created_at), memory.id)
        older = self._memories(
            f"(created_at, id) < ({mark}, {mark}) AND kind != 'session' {same_session} "
            f"ORDER BY created_at DESC, id DESC LIMIT {mark}",
            (*stamp, *params, before),
        )
        newer = self._memories(
            f"(created_at, id) > ({mark}, {mark}) AND kind != 'session' {same_session} "
            f"ORDER BY created_at, id LIMIT {mark}",
            (*stamp, *params, after),
        )
        return [*reversed(older), memory, *newer]

    # -- the store's shape ----------------------------------------------------------------------

    def health(self) -> StoreHealth:
        db = self._db
        by_kind = db.execute("SELECT kind, count(*) FROM memories GROUP BY kind ORDER BY kind")
        kinds = {kind: int(n) for kind, n in by_kind}
        (without_vector,) = db.execute(
            "SELECT count(*) FROM memories m WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.memory_id = m.id)"
        ).fetchone()
        (view_vectors,) = db.execute(
            f"SELECT count(*) FROM views WHERE {self.dialect.vector_column} IS NOT NULL"
        ).fetchone()
        return StoreHealth(
            backend=self.dialect.name,
            schema_version=self.schema_version,
            latest_schema_version=self.latest_schema_version,
            model=self.embedding_model(),
            memories_by_kind=kinds,
            vectors=self.vector_count(),
            without_vector=int(without_vector),
            view_vectors=int(view_vectors),
            **self._engine_health(),
            extra_models=tuple(self.extra_models()),
        )

    def _engine_health(self) -> dict[str, Any]:
        """StoreHealth's fts_rows, integrity, ann_index, wal_bytes and size_bytes."""
        raise NotImplementedError

    def _size_bytes(self) -> int:
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        db = self._db
        total, oldest, newest = db.execute("SELECT count(*), min(created_at), max(created_at) FROM memories").fetchone()
        model = self.embedding_model()

        def counts(column: str) -> dict[str, int]:
            rows = db.execute(
                f"SELECT coalesce({column}, ''), count(*) FROM memories GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 50"
            )
            return {name: n for name, n in rows}

        def shown(moment: Any) -> str | None:
            return None if moment is None else to_iso(self.dialect.read_time(moment))

        from memsearch.embedding.registry import model_key  # (a search imports no model registry)

        per_day = db.execute(f"SELECT {self.dialect.utc_day}, count(*) FROM memories GROUP BY 1").fetchall()
        extra_counts = self.model_vector_counts()

        return {
            "path": self.location,
            "memories": total,
            "vectors": self.vector_count(),
            "vectors_pending": self.pending_count(),
            "embedding_model": model.name if model else None,
            "embedding_dim": model.dim if model else None,
            "embedding_version": model.version if model else None,
            "extra_models": [
                {**extra_fields(extra), "vectors": extra_counts.get(model_key(extra.name), 0)}
                for extra in self.extra_models()
            ],
            "schema_version": self.schema_version,
            "oldest": shown(oldest),
            "newest": shown(newest),
            "projects": counts("project"),
            "namespaces": counts("namespace"),
            "kinds": counts("kind"),
            "growth": added_per_period(dict(per_day)),
            "size_bytes": self._size_bytes(),
        }

    def index_state(self) -> str | None:
        return self._meta(INDEX_STATE_KEY)
