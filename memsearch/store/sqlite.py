"""The SQLite store: every SQL statement memsearch runs lives in this module."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsearch.errors import (
    DuplicateKeyError,
    MemoryNotFoundError,
    ModelMismatchError,
    StoreCorruptError,
    StoreNotFoundError,
)
from memsearch.models import Memory, NewMemory, content_hash
from memsearch.store.migrations import MIGRATIONS, SCHEMA_VERSION
from memsearch.timeutil import from_iso, to_iso

if TYPE_CHECKING:
    import numpy as np

# "MSRC" in the SQLite header marks the file as a memsearch store.
APPLICATION_ID = 0x4D535243
BUSY_TIMEOUT_MS = 10_000

_MEMORY_COLUMNS = (
    "id, key, text, created_at, last_accessed_at, access_count, importance, priority, pinned, "
    "project, namespace, session, role, tags, metadata, content_hash, memory_score, superseded_by, group_id, "
    "kind, conversation, position, parent_id"
)

# The full-text columns, and the views that are full-text columns or have vectors.
FTS_COLUMNS = ("text", "tags", "context", "prev")
LEXICAL_VIEWS = ("context", "prev")
FACETS = ("personal_info", "preferences", "events")
VECTOR_VIEWS = ("context", "next", *(f"facet_{name}" for name in FACETS))

# Fields `memsearch set` may change, with their SQL columns.
SETTABLE_FIELDS = ("importance", "priority", "pinned", "project", "namespace", "memory_score", "tags")


@dataclass(frozen=True)
class Scope:
    """Which memories a read may see. Every field narrows; tags must all be present."""

    project: str | None = None
    namespace: str | None = None
    tags: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    kinds: tuple[str, ...] = ()  # note, turn, session; empty: every kind
    conversation: str | None = None
    roles: tuple[str, ...] = ()

    @property
    def is_everything(self) -> bool:
        return self == EVERYTHING

    @property
    def only_kinds(self) -> bool:
        """True when the scope does nothing but leave out some kinds (served by the kind index)."""
        return bool(self.kinds) and self == Scope(kinds=self.kinds)

    def where(self, alias: str = "m") -> tuple[str, list[Any]]:
        """A SQL condition over the memories table (under `alias`) and its parameters."""
        clauses: list[str] = []
        params: list[Any] = []
        if self.project is not None:
            clauses.append(f"{alias}.project = ?")
            params.append(self.project)
        if self.namespace is not None:
            clauses.append(f"{alias}.namespace = ?")
            params.append(self.namespace)
        for tag in self.tags:
            clauses.append(f"EXISTS (SELECT 1 FROM json_each({alias}.tags) WHERE json_each.value = ?)")
            params.append(tag)
        if self.since is not None:
            clauses.append(f"{alias}.created_at >= ?")
            params.append(to_iso(self.since))
        if self.until is not None:
            clauses.append(f"{alias}.created_at <= ?")
            params.append(to_iso(self.until))
        if self.kinds:
            clauses.append(f"{alias}.kind IN ({','.join('?' * len(self.kinds))})")
            params.extend(self.kinds)
        if self.conversation is not None:
            clauses.append(f"{alias}.conversation = ?")
            params.append(self.conversation)
        if self.roles:
            clauses.append(f"{alias}.role IN ({','.join('?' * len(self.roles))})")
            params.extend(self.roles)
        return (" AND ".join(clauses) or "1"), params


EVERYTHING = Scope()


@dataclass(frozen=True)
class EmbeddingModelInfo:
    name: str
    dim: int


@dataclass(frozen=True)
class VectorIndex:
    """All stored vectors as one contiguous matrix, row i belonging to memory ids[i]."""

    ids: np.ndarray
    matrix: np.ndarray

    def rows_of(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Of `ids`, those that have a vector here, and their rows in the matrix (ids are sorted)."""
        import numpy as np

        wanted = np.asarray(ids, np.int64)
        if self.ids.size == 0 or wanted.size == 0:
            return wanted[:0], wanted[:0]
        rows = np.minimum(np.searchsorted(self.ids, wanted), self.ids.size - 1)
        present = self.ids[rows] == wanted
        return wanted[present], rows[present]


def _row_to_memory(row: sqlite3.Row | tuple[Any, ...]) -> Memory:
    return Memory(
        id=row[0],
        key=row[1],
        text=row[2],
        created_at=from_iso(row[3]),
        last_accessed_at=from_iso(row[4]),
        access_count=row[5],
        importance=row[6],
        priority=row[7],
        pinned=bool(row[8]),
        project=row[9],
        namespace=row[10],
        session=row[11],
        role=row[12],
        tags=tuple(json.loads(row[13])),
        metadata=json.loads(row[14]),
        content_hash=row[15],
        memory_score=row[16],
        superseded_by=row[17],
        group_id=row[18],
        kind=row[19],
        conversation=row[20],
        position=row[21],
        parent_id=row[22],
    )


def _create_private_file(path: Path) -> None:
    """Create the store file (and its folder) readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)


class SQLiteStore:
    """One memsearch store file. Open with `SQLiteStore.open`; close when done."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self._db = connection
        self._vector_cache: dict[str | None, tuple[int, VectorIndex]] = {}

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, *, create: bool = False) -> SQLiteStore:
        """Open the store at `path`, creating it when `create` is set, migrating it to the latest schema."""
        if not path.exists():
            if not create:
                raise StoreNotFoundError(f"no memsearch store at {path}; add a memory first or pass --db")
            _create_private_file(path)
        if path.is_dir():
            raise StoreCorruptError(f"{path} is a directory, not a memsearch store file")
        try:
            connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        except sqlite3.Error as error:
            raise StoreCorruptError(f"cannot open {path}: {error}") from None
        store = cls(path, connection)
        try:
            store._configure()
            store._migrate()
        except sqlite3.DatabaseError as error:
            connection.close()
            raise StoreCorruptError(f"{path} is not a usable memsearch store ({error})") from None
        except BaseException:
            connection.close()
            raise
        return store

    def _configure(self) -> None:
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute("PRAGMA foreign_keys = ON")

    def _migrate(self) -> None:
        (app_id,) = self._db.execute("PRAGMA application_id").fetchone()
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        if app_id != APPLICATION_ID:
            (tables,) = self._db.execute("SELECT count(*) FROM sqlite_schema").fetchone()
            if app_id != 0 or tables:
                raise StoreCorruptError(f"{self.path} is an SQLite file of another program, not a memsearch store")
        if version > SCHEMA_VERSION:
            raise StoreCorruptError(
                f"{self.path} has schema version {version}, newer than this memsearch's {SCHEMA_VERSION}; "
                "upgrade memsearch"
            )
        for number in range(version + 1, SCHEMA_VERSION + 1):
            with self.transaction():
                for statement in _split_statements(MIGRATIONS[number - 1]):
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {number}")
                self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- transactions and store facts -----------------------------------------------------

    def transaction(self) -> _Transaction:
        return _Transaction(self._db)

    @property
    def schema_version(self) -> int:
        return self._db.execute("PRAGMA user_version").fetchone()[0]

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def _bump_generation(self) -> None:
        """Every write moves the generation on, so cached vector matrices know they are stale."""
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES ('generation', '1') "
            "ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )

    def generation(self) -> int:
        return int(self._meta("generation") or 0)

    def embedding_model(self) -> EmbeddingModelInfo | None:
        name, dim = self._meta("embedding_model"), self._meta("embedding_dim")
        return EmbeddingModelInfo(name, int(dim)) if name and dim else None

    def check_model(self, model: EmbeddingModelInfo) -> None:
        """Refuse to mix vectors of two models in one store."""
        stored = self.embedding_model()
        if stored is not None and stored != model and self.vector_count():
            raise ModelMismatchError(
                f"this store's vectors come from {stored.name} ({stored.dim}-d) but the model in use is "
                f"{model.name} ({model.dim}-d); run `memsearch reindex` to re-embed the store with it, "
                "or pass the store's model with --model"
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
    ) -> list[int]:
        """Store the memories with their FTS rows and vectors in one transaction; return their ids.

        A key that exists already is an error unless `replace`, which rewrites that memory in place.
        `view_vectors` maps a batch position to the vectors of its vector views (see VECTOR_VIEWS).
        """
        if vectors is not None and model is None:
            raise ValueError("vectors need the model that made them")
        ids: list[int] = []
        with self.transaction():
            if model is not None:
                self.check_model(model)
                self._set_meta("embedding_model", model.name)
                self._set_meta("embedding_dim", str(model.dim))
            for index, memory in enumerate(memories):
                existing = self.id_for_key(memory.key) if memory.key is not None else None
                if existing is not None and not replace:
                    raise DuplicateKeyError(
                        f"a memory with key {memory.key!r} exists already (id {existing}); "
                        "pass --replace to overwrite it"
                    )
                created = to_iso(memory.created_at or now)
                values = (
                    memory.key,
                    memory.text,
                    content_hash(memory.text),
                    created,
                    memory.importance,
                    memory.priority,
                    int(memory.pinned),
                    memory.project,
                    memory.namespace,
                    memory.session,
                    memory.role,
                    json.dumps(list(memory.tags), ensure_ascii=False),
                    json.dumps(dict(memory.metadata), ensure_ascii=False),
                    memory.kind,
                    memory.conversation,
                    memory.position,
                    self.id_for_key(memory.parent_key) if memory.parent_key is not None else None,
                )
                if existing is not None:
                    self._db.execute(
                        "UPDATE memories SET key = ?, text = ?, content_hash = ?, created_at = ?, importance = ?, "
                        "priority = ?, pinned = ?, project = ?, namespace = ?, session = ?, role = ?, tags = ?, "
                        "metadata = ?, kind = ?, conversation = ?, position = ?, parent_id = ?, "
                        "last_accessed_at = created_at WHERE id = ?",
                        (*values, existing),
                    )
                    self._db.execute("DELETE FROM memories_fts WHERE rowid = ?", (existing,))
                    self._delete_views(existing)
                    memory_id = existing
                else:
                    cursor = self._db.execute(
                        "INSERT INTO memories (key, text, content_hash, created_at, importance, priority, pinned, "
                        "project, namespace, session, role, tags, metadata, kind, conversation, position, parent_id, "
                        "last_accessed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (*values, created),
                    )
                    memory_id = int(cursor.lastrowid or 0)
                self._db.execute(
                    "INSERT INTO memories_fts (rowid, text, tags, context, prev) VALUES (?, ?, ?, ?, ?)",
                    (
                        memory_id,
                        memory.text,
                        " ".join(memory.tags),
                        memory.views.get("context", memory.text),
                        memory.views.get("prev", ""),
                    ),
                )
                if vectors is not None:
                    self._db.execute(
                        "INSERT INTO vectors (memory_id, vector) VALUES (?, ?) "
                        "ON CONFLICT (memory_id) DO UPDATE SET vector = excluded.vector",
                        (memory_id, vectors[index].astype("<f4").tobytes()),
                    )
                for view, vector in sorted((view_vectors or {}).get(index, {}).items()):
                    self._db.execute(
                        "INSERT INTO views (memory_id, view, text, vector) VALUES (?, ?, ?, ?)",
                        (memory_id, view, memory.views[view], vector.astype("<f4").tobytes()),
                    )
                ids.append(memory_id)
            self._bump_generation()
        return ids

    def delete(self, ids: Sequence[int]) -> None:
        """Delete all of the memories or, if any id is unknown, none of them."""
        with self.transaction():
            for memory_id in ids:
                self._delete_views(memory_id)
                if self._db.execute("DELETE FROM memories WHERE id = ?", (memory_id,)).rowcount == 0:
                    raise MemoryNotFoundError(f"no memory with id {memory_id}; nothing was deleted")
                self._db.execute("DELETE FROM memories_fts WHERE rowid = ?", (memory_id,))
            self._bump_generation()

    def _delete_views(self, memory_id: int) -> None:
        self._db.execute("DELETE FROM views WHERE memory_id = ?", (memory_id,))

    def touch(self, ids: Sequence[int], now: datetime) -> None:
        """Record that a search returned these memories; increments are atomic in SQL, so
        concurrent searches lose no update."""
        if not ids:
            return
        with self.transaction():
            self._db.executemany(
                "UPDATE memories SET access_count = access_count + 1, last_accessed_at = max(last_accessed_at, ?) "
                "WHERE id = ?",
                [(to_iso(now), memory_id) for memory_id in ids],
            )

    def update(self, memory_id: int, changes: dict[str, Any]) -> Memory:
        """Change some of SETTABLE_FIELDS of one memory (tags rewrite its FTS row too)."""
        unknown = set(changes) - set(SETTABLE_FIELDS)
        if unknown:
            raise ValueError(f"cannot set {sorted(unknown)}")
        with self.transaction():
            memory = self.get(memory_id)
            for name, value in changes.items():
                stored = json.dumps(list(value), ensure_ascii=False) if name == "tags" else value
                self._db.execute(f"UPDATE memories SET {name} = ? WHERE id = ?", (stored, memory_id))
            if "tags" in changes:
                self._db.execute(
                    "UPDATE memories_fts SET tags = ? WHERE rowid = ?", (" ".join(changes["tags"]), memory_id)
                )
            self._bump_generation()
        return self.get(memory.id)

    def set_consolidation(self, superseded: dict[int, int], groups: dict[int, int]) -> None:
        """Replace every supersession mark and group id in one transaction."""
        with self.transaction():
            self._db.execute("UPDATE memories SET superseded_by = NULL, group_id = NULL")
            self._db.executemany(
                "UPDATE memories SET superseded_by = ? WHERE id = ?", [(new, old) for old, new in superseded.items()]
            )
            self._db.executemany(
                "UPDATE memories SET group_id = ? WHERE id = ?", [(group, mid) for mid, group in groups.items()]
            )
            self._bump_generation()

    def replace_vectors(
        self,
        ids: Sequence[int],
        vectors: np.ndarray,
        model: EmbeddingModelInfo,
        view_vectors: Mapping[tuple[int, str], np.ndarray] | None = None,
    ) -> None:
        """Swap every vector (and each (memory id, view)'s) for one of `model` in one transaction."""
        with self.transaction():
            self._db.executemany(
                "UPDATE views SET vector = ? WHERE memory_id = ? AND view = ?",
                ((v.astype("<f4").tobytes(), memory_id, view) for (memory_id, view), v in (view_vectors or {}).items()),
            )
            self._db.execute("DELETE FROM vectors")
            self._db.executemany(
                "INSERT INTO vectors (memory_id, vector) VALUES (?, ?)",
                ((memory_id, vectors[row].astype("<f4").tobytes()) for row, memory_id in enumerate(ids)),
            )
            self._set_meta("embedding_model", model.name)
            self._set_meta("embedding_dim", str(model.dim))
            self._bump_generation()

    # -- reads ----------------------------------------------------------------------------

    def id_for_key(self, key: str) -> int | None:
        row = self._db.execute("SELECT id FROM memories WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def get(self, memory_id: int) -> Memory:
        row = self._db.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id = ?", (memory_id,)).fetchone()
        if row is None:
            raise MemoryNotFoundError(f"no memory with id {memory_id}")
        return _row_to_memory(row)

    def get_by_key(self, key: str) -> Memory:
        memory_id = self.id_for_key(key)
        if memory_id is None:
            raise MemoryNotFoundError(f"no memory with key {key!r}")
        return self.get(memory_id)

    def get_many(self, ids: Sequence[int]) -> dict[int, Memory]:
        found: dict[int, Memory] = {}
        unique = list(dict.fromkeys(int(i) for i in ids))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._db.execute(f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE id IN ({marks})", chunk):
                found[row[0]] = _row_to_memory(row)
        return found

    def list(self, scope: Scope = EVERYTHING, *, limit: int | None = None, offset: int = 0) -> list[Memory]:
        """Memories in scope, newest first."""
        where, params = scope.where()
        rows = self._db.execute(
            f"SELECT {_MEMORY_COLUMNS} FROM memories m WHERE {where} ORDER BY m.created_at DESC, m.id DESC "
            "LIMIT ? OFFSET ?",
            (*params, -1 if limit is None else limit, offset),
        )
        return [_row_to_memory(row) for row in rows]

    def iter_texts(self) -> Iterator[tuple[int, str]]:
        yield from self._db.execute("SELECT id, text FROM memories ORDER BY id")

    def count(self, scope: Scope = EVERYTHING) -> int:
        if scope.is_everything:
            return self._db.execute("SELECT count(*) FROM memories").fetchone()[0]
        if scope.only_kinds:
            return self.count() - len(self.ids_of_other_kinds(scope.kinds))
        where, params = scope.where()
        return self._db.execute(f"SELECT count(*) FROM memories m WHERE {where}", params).fetchone()[0]

    def vector_count(self) -> int:
        return self._db.execute("SELECT count(*) FROM vectors").fetchone()[0]

    def scoped_ids(self, scope: Scope) -> list[int]:
        where, params = scope.where()
        return [row[0] for row in self._db.execute(f"SELECT m.id FROM memories m WHERE {where}", params)]

    def lexical_search(
        self, match: str, scope: Scope, limit: int, column: str | None = None
    ) -> list[tuple[int, float]]:
        """FTS5 BM25, best first, as (id, score) with higher scores better: over text and tags, or
        over one view's column (`context`, `prev`) only."""
        if column is None:
            expression, weights = f"{{text tags}} : ({match})", "1.0, 1.0, 0.0, 0.0"
        elif column in LEXICAL_VIEWS:
            expression, weights = (
                f"{{{column}}} : ({match})",
                ", ".join("1.0" if name == column else "0.0" for name in FTS_COLUMNS),
            )
        else:
            raise ValueError(f"no full-text view {column!r}")
        rank = f"bm25(memories_fts, {weights})"
        if scope.is_everything:
            sql = f"SELECT rowid, -{rank} FROM memories_fts WHERE memories_fts MATCH ? ORDER BY {rank} LIMIT ?"
            params: list[Any] = [expression, limit]
        else:
            where, scope_params = scope.where()
            sql = (
                f"SELECT f.rowid, -{rank} FROM memories_fts f JOIN memories m ON m.id = f.rowid "
                f"WHERE memories_fts MATCH ? AND {where} ORDER BY {rank} LIMIT ?"
            )
            params = [expression, *scope_params, limit]
        return [(int(row[0]), float(row[1])) for row in self._db.execute(sql, params)]

    def document_frequency(self, match: str, scope: Scope, at_most: int) -> int:
        """How many memories in scope match `match` in their text or tags, counting no further
        than `at_most` (enough to tell a common word; a rare one answers at once)."""
        if scope.is_everything:
            sql = "SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)"
            params: list[Any] = [f"{{text tags}} : ({match})", at_most]
        else:
            where, scope_params = scope.where()
            sql = (
                "SELECT count(*) FROM (SELECT 1 FROM memories_fts f JOIN memories m ON m.id = f.rowid "
                f"WHERE memories_fts MATCH ? AND {where} LIMIT ?)"
            )
            params = [f"{{text tags}} : ({match})", *scope_params, at_most]
        return self._db.execute(sql, params).fetchone()[0]

    def has_kind(self, kind: str) -> bool:
        return self._db.execute("SELECT 1 FROM memories WHERE kind = ? LIMIT 1", (kind,)).fetchone() is not None

    def ids_of_other_kinds(self, kinds: Sequence[str]) -> list[int]:
        """The memories whose kind is not one of `kinds` (through the kind index: cheap when few)."""
        marks = ",".join("?" * len(kinds))
        return [row[0] for row in self._db.execute(f"SELECT id FROM memories WHERE kind NOT IN ({marks})", kinds)]

    def ids_created_between(self, start: datetime, end: datetime, scope: Scope, limit: int) -> list[int]:
        """Memories in scope created within [start, end], at most `limit` + 1 (so callers see overflow)."""
        where, params = scope.where()
        rows = self._db.execute(
            f"SELECT m.id FROM memories m WHERE m.created_at >= ? AND m.created_at <= ? AND {where} "
            "ORDER BY m.created_at, m.id LIMIT ?",
            [to_iso(start), to_iso(end), *params, limit + 1],
        )
        return [row[0] for row in rows]

    def vector_index(self, view: str | None = None) -> VectorIndex:
        """The stored vectors (of the memories' own texts, or of one view) as one matrix, cached
        until the store's next write."""
        import numpy as np

        generation = self.generation()
        cached = self._vector_cache.get(view)
        if cached is not None and cached[0] == generation:
            return cached[1]
        model = self.embedding_model()
        dim = model.dim if model else 0
        if view is None:
            rows = self._db.execute("SELECT memory_id, vector FROM vectors ORDER BY memory_id").fetchall()
        else:
            rows = self._db.execute(
                "SELECT memory_id, vector FROM views WHERE view = ? ORDER BY memory_id", (view,)
            ).fetchall()
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        matrix = np.frombuffer(b"".join(row[1] for row in rows), dtype="<f4").astype(np.float32, copy=False)
        index = VectorIndex(ids=ids, matrix=matrix.reshape(len(rows), dim) if rows else np.zeros((0, dim), np.float32))
        self._vector_cache[view] = (generation, index)
        return index

    def views_with_vectors(self) -> list[tuple[int, str, str]]:
        """(memory id, view, text) of every stored vector view, for reindex."""
        return self._db.execute("SELECT memory_id, view, text FROM views ORDER BY memory_id, view").fetchall()

    def session_turns(self, conversation: str | None, session: str) -> list[Memory]:
        """The turns of one session, in order."""
        rows = self._db.execute(
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE kind = 'turn' AND session = ? "
            "AND conversation IS ? ORDER BY position, id",
            (session, conversation),
        )
        return [_row_to_memory(row) for row in rows]

    def around(self, memory: Memory, before: int, after: int) -> list[Memory]:
        """The memory with its neighbours: a session chunk with all its turns; a turn with the
        turns around it; a note with the memories of its session (or store) around it in time."""
        if memory.kind == "session" and memory.session is not None:
            return [memory, *self.session_turns(memory.conversation, memory.session)]
        if memory.kind == "turn" and memory.session is not None:
            turns = self.session_turns(memory.conversation, memory.session)
            at = next(i for i, turn in enumerate(turns) if turn.id == memory.id)
            return turns[max(0, at - before) : at + after + 1]
        same_session = "AND session = ?" if memory.session is not None else ""
        params: list[Any] = [memory.session] if memory.session is not None else []
        stamp = (to_iso(memory.created_at), memory.id)
        older = self._db.execute(
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE (created_at, id) < (?, ?) AND kind != 'session' "
            f"{same_session} ORDER BY created_at DESC, id DESC LIMIT ?",
            (*stamp, *params, before),
        ).fetchall()
        newer = self._db.execute(
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE (created_at, id) > (?, ?) AND kind != 'session' "
            f"{same_session} ORDER BY created_at, id LIMIT ?",
            (*stamp, *params, after),
        ).fetchall()
        return [_row_to_memory(row) for row in reversed(older)] + [memory] + [_row_to_memory(row) for row in newer]

    def stats(self) -> dict[str, Any]:
        db = self._db
        (total,) = db.execute("SELECT count(*) FROM memories").fetchone()
        oldest, newest = db.execute("SELECT min(created_at), max(created_at) FROM memories").fetchone()
        model = self.embedding_model()

        def counts(column: str) -> dict[str, int]:
            rows = db.execute(
                f"SELECT coalesce({column}, ''), count(*) FROM memories GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 50"
            )
            return {name: n for name, n in rows}

        size = sum(os.path.getsize(p) for p in (self.path, Path(f"{self.path}-wal")) if os.path.exists(p))
        return {
            "path": str(self.path),
            "memories": total,
            "vectors": self.vector_count(),
            "embedding_model": model.name if model else None,
            "embedding_dim": model.dim if model else None,
            "schema_version": self.schema_version,
            "oldest": oldest,
            "newest": newest,
            "projects": counts("project"),
            "namespaces": counts("namespace"),
            "size_bytes": size,
        }


def _split_statements(script: str) -> list[str]:
    """Split a migration into statements; migrations contain no semicolons inside literals."""
    return [part.strip() for part in script.split(";") if part.strip()]


class _Transaction:
    """BEGIN IMMEDIATE … COMMIT, rolled back on any exception, so a failed write leaves nothing."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._db = connection

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is None:
            self._db.execute("COMMIT")
        else:
            self._db.execute("ROLLBACK")
