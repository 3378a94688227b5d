"""The vectors of a store's other models: besides the vectors of its own model (which the vector
leg, the views, dedup and consolidation use), a store may hold those of further models, each of
every memory's own text (no views), for the profile legs that name the model (`vector(gemma)`).

Both SQL stores run this alike: a `model_vectors` table keyed by (model name, memory id), whose
rows go with their memory (ON DELETE CASCADE), and one meta row (EXTRA_MODELS_KEY) that records
the models by name, dimension and version as EmbeddingModelInfo does. A search of a model's
vectors is exact: the vectors in scope are read and ranked here, in float32, as in either store.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from memsearch.errors import ModelMismatchError, StoreUnavailableError
from memsearch.models import EmbeddingModelInfo
from memsearch.store.base import Rewrite, Scope, VectorHits
from memsearch.store.dialects import Dialect
from memsearch.store.vectors import row_scores

if TYPE_CHECKING:
    import numpy as np

# The meta row listing the store's other models: a JSON list of EmbeddingModelInfo's fields.
EXTRA_MODELS_KEY = "extra_models"
_FIELDS = ("name", "dim", "version", "location")


def model_key(name: str) -> str:
    """`memsearch.embedding.registry.model_key`, its registry imported when a store's other models
    are read or written: a search that names none (a lexical one) imports no model registry."""
    from memsearch.embedding.registry import model_key as key

    return key(name)


T = TypeVar("T")


def extra_fields(model: EmbeddingModelInfo) -> dict[str, Any]:
    """What `stats` shows of one of the store's other models."""
    return {"name": model.name, "dim": model.dim, "version": model.version}


class SQLDatabase(Protocol):
    """What the part needs of the SQL store it lives in: this thread's connection, a write
    transaction and the meta rows."""

    @property
    def _db(self) -> Any: ...

    def _write(self, work: Callable[[Any], T]) -> T: ...

    def _meta(self, key: str) -> str | None: ...


class SqlModelVectors:
    """The ModelVectors part of both SQL stores, in the database and dialect it is given."""

    def __init__(self, database: SQLDatabase, dialect: Dialect) -> None:
        self._database = database
        self.dialect = dialect

    def extra_models(self) -> builtins.list[EmbeddingModelInfo]:
        """The store's other models, in the order they were added."""
        stored = self._database._meta(EXTRA_MODELS_KEY)
        if not stored:
            return []
        return [EmbeddingModelInfo(**{k: entry.get(k) for k in _FIELDS}) for entry in json.loads(stored)]

    def _save_models(self, db: Any, models: Sequence[EmbeddingModelInfo]) -> None:
        mark = self.dialect.mark
        listed = json.dumps([{k: getattr(model, k) for k in _FIELDS} for model in models])
        db.execute(
            f"INSERT INTO meta (key, value) VALUES ({mark}, {mark}) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (EXTRA_MODELS_KEY, listed),
        )

    def add_model_vectors(self, model: EmbeddingModelInfo, ids: Sequence[int], vectors: np.ndarray) -> None:
        """Record `model` among the store's other models (replacing one of its name) with the
        vectors of the memories `ids` (rows of `vectors`), in one transaction; every stored memory
        must be among `ids` (else StoreUnavailableError, nothing changed: a write came in between)."""
        key = model_key(model.name)

        def work(db: Any) -> None:
            (count,) = db.execute("SELECT count(*) FROM memories").fetchone()
            if int(count) != len(set(ids)):
                raise StoreUnavailableError(
                    f"the store changed while {key} embedded its memories; nothing was added, run it again"
                )
            db.execute(f"DELETE FROM model_vectors WHERE model = {self.dialect.mark}", (key,))
            self._save_models(db, [*(m for m in self.extra_models() if model_key(m.name) != key), model])
            self._put(db, key, list(zip(ids, vectors, strict=True)))

        self._database._write(work)

    def drop_model_vectors(self, name: str) -> None:
        """Forget one of the store's other models and its vectors, in one transaction."""
        key = model_key(name)

        def work(db: Any) -> None:
            db.execute(f"DELETE FROM model_vectors WHERE model = {self.dialect.mark}", (key,))
            self._save_models(db, [m for m in self.extra_models() if model_key(m.name) != key])

        self._database._write(work)

    def _put(self, db: Any, key: str, rows: Sequence[tuple[int, np.ndarray]]) -> None:
        """Write (or overwrite) the model's vectors of the memories in `rows`."""
        mark, column = self.dialect.mark, self.dialect.vector_column
        db.cursor().executemany(
            f"INSERT INTO model_vectors (model, memory_id, {column}) VALUES ({mark}, {mark}, {mark}) "
            f"ON CONFLICT (model, memory_id) DO UPDATE SET {column} = excluded.{column}",
            [(key, int(memory_id), self.dialect.vector_value(vector)) for memory_id, vector in rows],
        )

    def write(self, db: Any, ids: Sequence[int], model_vectors: Mapping[str, np.ndarray] | None) -> None:
        """In a write of the memories `ids`: their vectors of each of the store's other models
        (rows of `model_vectors[model key]`), which must be given for every one of them."""
        given = {model_key(name): vectors for name, vectors in (model_vectors or {}).items()}
        for model in self.extra_models():
            key = model_key(model.name)
            if key not in given:
                raise StoreUnavailableError(
                    f"this store also holds {key}'s vectors, and they were not made for the new text; "
                    "nothing was stored, run it again"
                )
            self._put(db, key, list(zip(ids, given[key], strict=True)))

    def rewrite(self, db: Any, rewrite: Rewrite) -> None:
        """In a rewrite of one memory's text: its vectors of the store's other models."""
        self.write(db, [rewrite.id], {name: vector.reshape(1, -1) for name, vector in rewrite.model_vectors.items()})

    def search(self, model: str, vector: np.ndarray, scope: Scope, limit: int | None) -> VectorHits:
        """The `limit` memories in scope whose vector of `model` is most cosine-similar to `vector`
        (exactly), best first, ties to the smaller id; none for a model the store does not hold."""
        import numpy as np

        where, params = self.dialect.where(scope)
        mark, column = self.dialect.mark, self.dialect.vector_column
        rows = self._database._db.execute(
            f"SELECT v.memory_id, v.{column} FROM model_vectors v JOIN memories m ON m.id = v.memory_id "
            f"WHERE v.model = {mark} AND {where}",
            [model_key(model), *params],
        ).fetchall()
        if not rows:
            return VectorHits()
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        matrix = np.stack([self.dialect.read_vector(row[1]) for row in rows])
        if matrix.shape[1] != vector.shape[0]:
            raise ModelMismatchError(
                f"this store's {model_key(model)} vectors have {matrix.shape[1]} dimensions, "
                f"the query's {vector.shape[0]}"
            )
        scores = row_scores(matrix, vector)  # as the own vectors are scored: one thread, row by row
        order = np.lexsort((ids, -scores))
        if limit is not None:
            order = order[:limit]
        return VectorHits([(int(ids[i]), float(scores[i])) for i in order])

    def all_model_vectors(self, model: str) -> tuple[np.ndarray, np.ndarray]:
        """Every vector of one of the other models: sorted memory ids and the matching rows."""
        import numpy as np

        column = self.dialect.vector_column
        rows = self._database._db.execute(
            f"SELECT memory_id, {column} FROM model_vectors WHERE model = {self.dialect.mark} ORDER BY memory_id",
            (model_key(model),),
        ).fetchall()
        ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        if not rows:
            return ids, np.zeros((0, 0), np.float32)
        return ids, np.stack([self.dialect.read_vector(row[1]) for row in rows])

    def model_vector_counts(self) -> dict[str, int]:
        """How many vectors each of the other models has, by model key."""
        rows = self._database._db.execute("SELECT model, count(*) FROM model_vectors GROUP BY model")
        return {str(model): int(n) for model, n in rows}
