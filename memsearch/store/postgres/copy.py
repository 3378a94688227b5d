"""The PostgreSQL store's copy between stores (memsearch.store.copy): every memory with all it
holds read out in id order, and written into an empty store keeping its ids (a part of
PostgresStore, as sqlite_copy is of the SQLite store)."""

from __future__ import annotations

import builtins
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from memsearch.errors import InvalidInputError
from memsearch.models import LEXICAL_VIEWS, EmbeddingModelInfo, Memory, NewMemory, default_view_text
from memsearch.store.base import ExportedMemory
from memsearch.store.dialects import POSTGRES
from memsearch.store.fts import FTS_TOKENIZER, fts_row
from memsearch.store.postgres.vectors import f32
from memsearch.store.sql import MEMORY_COLUMNS, REFERS, RESTORED, SQLStore

if TYPE_CHECKING:
    import numpy as np
    from psycopg import Connection

T = TypeVar("T")


def lexical_views_of(text: str, stored: Mapping[str, str], kind: str) -> dict[str, str]:
    """Every full-text view's indexed text: a missing `context` is the memory's own text, a
    missing `prev` is empty (as the SQLite store indexes them)."""
    return {view: stored.get(view, default_view_text(kind, view, text)) for view in LEXICAL_VIEWS}


class PostgresCopy(SQLStore):
    """Bulk writes, export and restore (a part of PostgresStore)."""

    location: str

    if TYPE_CHECKING:  # what the store provides

        @property
        def _db(self) -> Connection[Any]: ...

        def _write(self, work: Callable[[Connection[Any]], T]) -> T: ...

        vectors: Callable[[Sequence[int]], dict[int, np.ndarray]]

        def _record_model(self, db: Connection[Any], model: EmbeddingModelInfo) -> None: ...

    # -- bulk writes (COPY), shared by every write path ---------------------------------------

    @staticmethod
    def _fts_texts(memory: NewMemory | Memory, lexical_views: Mapping[str, str] | None = None) -> tuple[str, ...]:
        views = lexical_views if lexical_views is not None else getattr(memory, "views", {})
        return fts_row(memory.text, memory.tags, memory.kind, views)

    @staticmethod
    def _add_tokens(db: Connection[Any], delta: int, *, memories: int = 0) -> None:
        """Add to the token total and the memory count. Every write does this before it changes
        postings (whose triggers lock term_docs rows), so two writers lock in one order."""
        if delta or memories:
            # one of 16 counters, by connection, so concurrent writers seldom wait on each other
            db.execute(
                "UPDATE fts_totals SET tokens = tokens + %s, memories = memories + %s "
                "WHERE shard = pg_backend_pid() %% 16",
                (delta, memories),
            )

    @staticmethod
    def _copy_postings(db: Connection[Any], rows: Iterable[tuple[int, Any]]) -> None:
        """Postings of whole memories (`tokens` of all their columns, so its length is their D)."""
        with db.cursor().copy("COPY postings (term, col, memory_id, positions, doc_length) FROM STDIN") as copy:
            for memory_id, tokens in rows:
                for (column, term), offsets in tokens.positions.items():
                    copy.write_row((term, column, memory_id, offsets, tokens.length))

    @staticmethod
    def _copy_vectors(db: Connection[Any], rows: Iterable[tuple[int, np.ndarray]], *, upsert: bool = False) -> None:
        rows = list(rows)
        if not rows:
            return
        if upsert:
            db.execute("DELETE FROM vectors WHERE memory_id = ANY(%s)", ([memory_id for memory_id, _ in rows],))
        with db.cursor().copy("COPY vectors (memory_id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["bigint", "vector"])
            for memory_id, vector in rows:
                copy.write_row((memory_id, f32(vector)))

    @staticmethod
    def _copy_views(db: Connection[Any], rows: Sequence[tuple[int, str, str, np.ndarray | None]]) -> None:
        if not rows:
            return
        with db.cursor().copy("COPY views (memory_id, view, text, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["bigint", "text", "text", "vector"])
            for memory_id, view, text, vector in rows:
                copy.write_row((memory_id, view, text, None if vector is None else f32(vector)))

    def export(self, batch: int = 1000) -> Iterator[ExportedMemory]:
        """Every memory with all it holds, in id order (for `copy_store`)."""
        last = 0
        while True:
            memories = [
                POSTGRES.row_to_memory(row)
                for row in self._db.execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id > %s ORDER BY id LIMIT %s", (last, batch)
                )
            ]
            if not memories:
                return
            ids = [m.id for m in memories]
            lexical = dict(
                self._db.execute("SELECT id, lexical_views FROM memories WHERE id = ANY(%s)", (ids,)).fetchall()
            )
            vectors = self.vectors(ids)
            views: dict[int, dict[str, tuple[str, np.ndarray | None]]] = defaultdict(dict)
            for memory_id, view, text, embedding in self._db.execute(
                "SELECT memory_id, view, text, embedding FROM views WHERE memory_id = ANY(%s) ORDER BY memory_id, view",
                (ids,),
                binary=True,
            ):
                views[memory_id][view] = (text, None if embedding is None else f32(embedding))
            for memory in memories:
                yield ExportedMemory(
                    memory,
                    lexical_views_of(memory.text, json.loads(lexical[memory.id]), memory.kind),
                    vectors.get(memory.id),
                    views.get(memory.id, {}),
                )
            last = ids[-1]

    def restore(self, memories: Iterable[ExportedMemory], model: EmbeddingModelInfo | None) -> int:
        """Write exported memories into this empty store, keeping their ids, in one transaction."""

        def work(db: Connection[Any]) -> int:
            db.execute("LOCK TABLE memories IN EXCLUSIVE MODE")
            if db.execute("SELECT EXISTS (SELECT 1 FROM memories)").fetchone()[0]:  # type: ignore[index]
                raise InvalidInputError(f"{self.location} holds memories already; copy needs an empty store")
            if model is not None:
                self._record_model(db, model)
            db.execute("SET LOCAL memsearch.bulk_load = on")  # term_docs counted once, at the end
            links: builtins.list[tuple[Any, ...]] = []
            total_tokens = written = 0
            batch: builtins.list[ExportedMemory] = []

            def flush() -> None:
                nonlocal total_tokens
                tokenized = FTS_TOKENIZER.rows([self._fts_texts(e.memory, e.lexical_views) for e in batch])
                restored = ", ".join(f.name for f in RESTORED)
                with db.cursor().copy(f"COPY memories ({restored}, fts_length, lexical_views) FROM STDIN") as copy:
                    for exported, tokens in zip(batch, tokenized, strict=True):
                        m = exported.memory
                        stored_views = {
                            view: text
                            for view, text in exported.lexical_views.items()
                            if text != lexical_views_of(m.text, {}, m.kind).get(view)
                        }
                        copy.write_row(
                            (*(POSTGRES.write(f, getattr(m, f.name)) for f in RESTORED), tokens.length,
                             json.dumps(stored_views, ensure_ascii=False))
                        )  # fmt: skip
                        total_tokens += tokens.length
                self._copy_postings(db, ((e.memory.id, t) for e, t in zip(batch, tokenized, strict=True)))
                self._copy_vectors(db, ((e.memory.id, e.vector) for e in batch if e.vector is not None))
                self._copy_views(
                    db,
                    [(e.memory.id, view, text, vec) for e in batch for view, (text, vec) in sorted(e.views.items())],
                )
                batch.clear()

            for exported in memories:
                batch.append(exported)
                written += 1
                memory = exported.memory
                if any(getattr(memory, name) is not None for name in REFERS):
                    links.append((*(getattr(memory, name) for name in REFERS), memory.id))
                if len(batch) >= 1000:
                    flush()
            if batch:
                flush()
            # Links may point forward in id order: set once every memory is there.
            with db.cursor() as cursor:
                sets = ", ".join(f"{name} = %s" for name in REFERS)
                cursor.executemany(f"UPDATE memories SET {sets} WHERE id = %s", links)
            self._add_tokens(db, total_tokens, memories=written)
            db.execute(
                "INSERT INTO term_docs (term, col, shard, docs) SELECT term, col, 0, count(*) FROM postings "
                "GROUP BY term, col ORDER BY term, col "
                "ON CONFLICT (term, col, shard) DO UPDATE SET docs = term_docs.docs + excluded.docs"
            )
            db.execute("SET LOCAL memsearch.bulk_load = off")
            db.execute(self.WAITING_SQL)
            db.execute(
                "SELECT setval(pg_get_serial_sequence('memories', 'id'), greatest(1, (SELECT max(id) FROM memories)), "
                "(SELECT count(*) > 0 FROM memories))"
            )
            return written

        return self._write(work)
