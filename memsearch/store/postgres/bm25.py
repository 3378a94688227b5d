"""FTS5's BM25 in SQL over the PostgreSQL store's postings (see schema: postings with their term
frequency and document length, term_docs, fts_totals), for the lexical leg: the same scores as the
SQLite store's bm25(), read in the caller's snapshot through one connection."""

from __future__ import annotations

import builtins
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from psycopg.adapt import Loader
from psycopg.pq import Format

from memsearch.models import LEXICAL_VIEWS
from memsearch.store.base import LexicalHits, Scope
from memsearch.store.dialects import POSTGRES
from memsearch.store.fts import FTS_COLUMNS, FTS_TOKENIZER, GRAM_COLUMNS
from memsearch.store.postgres.text import K1, B, phrase_count
from memsearch.text import LexicalQuery, idf

if TYPE_CHECKING:
    from psycopg import Connection

Phrases = builtins.list[tuple[tuple[str, ...], builtins.list[int]]]  # each phrase's tokens and its columns

# Above this many postings in a query's lists (the sum of its phrases' document counts), the
# lexical leg reads the lists in impact order, heads first (see _ImpactRead); below, it is
# FTS5's BM25 of every memory that can matter. The first head is this long per list.
IMPACT_ABOVE = 50_000
IMPACT_FIRST_HEAD = 2048
# The most postings the impact-ordered reading takes before it answers with the best it has
# scored (`bounded`) rather than proving the top k.
POSTING_BUDGET = 128_000
# Looking a posting up by memory costs about as much as reading this many along a list.
LOOKUP_COST = 8


def _scoped_hits(where: str) -> str:
    """The join that keeps a query's `hits` rows (`h`) to the memories in scope."""
    return "" if where == "true" else f"JOIN memories m ON m.id = h.memory_id WHERE {where}"


def _int_array(values: np.ndarray) -> str:
    """An integer array as a PostgreSQL array literal (cast in the SQL): thousands of ids bind far
    faster so than as a list of Python ints."""
    return "{" + ",".join(map(str, values.tolist())) + "}"


# The postings of some memories in one list (an index scan over the ids, one descent each, costs a
# third of a lateral probe per id).
_MISSING_SQL = """
    SELECT coalesce(array_agg(memory_id), '{}'), coalesce(array_agg(tf), '{}') FROM postings
    WHERE term = %s AND col = %s AND memory_id = ANY(%s::bigint[])
"""

# The element types a _NumpyArrayLoader reads (by the element's OID), and their arrays' OIDs.
_NUMPY_ELEMENTS: dict[int, np.dtype[Any]] = {
    21: np.dtype(">i2"), 23: np.dtype(">i4"), 20: np.dtype(">i8"), 701: np.dtype(">f8")
}  # fmt: skip
_NUMPY_ARRAYS = (1005, 1007, 1016, 1022)  # int2[], int4[], int8[], float8[]


class _NumpyArrayLoader(Loader):
    """A one-dimensional array of numbers without NULLs, from PostgreSQL's binary array format
    (dimensions, flags, element OID; then each element's length and value) straight into numpy:
    lists of Python ints cost more than the queries that make them, at tens of thousands of
    postings per search."""

    format = Format.BINARY

    def load(self, data: Any) -> np.ndarray:
        buffer = memoryview(data)
        header = np.frombuffer(buffer, dtype=">i4", count=3)
        dimensions, has_nulls, element = int(header[0]), int(header[1]), int(header[2])
        dtype = _NUMPY_ELEMENTS[element]
        if dimensions == 0:
            return np.zeros(0, dtype=dtype.newbyteorder("="))
        if dimensions != 1 or has_nulls:
            raise ValueError("a numeric array of one dimension without NULLs was expected")
        (count,) = np.frombuffer(buffer, dtype=">i4", count=1, offset=12)
        items = np.frombuffer(buffer, dtype=np.dtype([("size", ">i4"), ("value", dtype)]), count=int(count), offset=20)
        return items["value"].astype(dtype.newbyteorder("="))


def columns_of(view: str | None) -> builtins.list[int]:
    """The full-text columns a search reads: text and tags, or one lexical view's."""
    if view is None:
        return [FTS_COLUMNS.index("text"), FTS_COLUMNS.index("tags")]
    if view in LEXICAL_VIEWS:
        return [FTS_COLUMNS.index(view)]
    raise ValueError(f"no full-text view {view!r}")


def query_phrases(query: LexicalQuery, view: str | None) -> Phrases:
    """The query's phrases, each with the columns it is searched in: its words in text and tags (or
    the view), its CJK bigrams and symbols (none in plain English) in the gram column."""
    columns = columns_of(view)
    phrases = [(tokens, columns) for tokens in (FTS_TOKENIZER.phrase(p) for p in query.match_phrases) if tokens]
    grams = [FTS_COLUMNS.index(GRAM_COLUMNS[view])]
    return phrases + [(tokens, grams) for tokens in (FTS_TOKENIZER.phrase(t) for t in query.grams) if tokens]


class Bm25:
    """BM25 as FTS5 computes it (k1 1.2, b 0.75, its idf and its document lengths), best first,
    ties to the smaller id, from the postings read through `db`."""

    def __init__(self, db: Connection[Any]) -> None:
        self.db = db

    def phrase_hits(self, phrase: tuple[str, ...], columns: builtins.list[int]) -> dict[int, tuple[int, int]]:
        """memory id → (how often a phrase of several tokens occurs in `columns`, summed over them;
        the memory's token count D)."""
        by_memory: dict[tuple[int, int], dict[str, list[int]]] = defaultdict(dict)
        lengths: dict[int, int] = {}
        for memory_id, col, term, positions, length in self.db.execute(
            "SELECT memory_id, col, term, positions, doc_length FROM postings WHERE term = ANY(%s) AND col = ANY(%s)",
            (list(set(phrase)), columns),
        ):
            by_memory[(memory_id, col)][term] = positions
            lengths[memory_id] = length
        hits: dict[int, int] = defaultdict(int)
        for (memory_id, _), terms in by_memory.items():
            if all(token in terms for token in phrase):
                found = phrase_count([terms[token] for token in phrase])
                if found:
                    hits[memory_id] += found
        return {memory_id: (frequency, lengths[memory_id]) for memory_id, frequency in hits.items()}

    def _documents_with_terms(self, term_cols: builtins.list[tuple[str, builtins.list[int]]]) -> builtins.list[int]:
        """How many memories hold each term in any of its columns, from the term_docs counters (a
        term in text and tags at once counts once: that overlap is counted from the postings)."""
        counts: dict[tuple[str, int], int] = {
            (term, int(col)): int(docs)
            for term, col, docs in self.db.execute(
                "SELECT term, col, sum(docs)::bigint FROM term_docs WHERE term = ANY(%s) GROUP BY term, col",
                (sorted({term for term, _ in term_cols}),),
            )
        }
        found: builtins.list[int] = []
        for term, columns in term_cols:
            present = sorted((c for c in columns if counts.get((term, c), 0) > 0), key=lambda c: counts[term, c])
            total = sum(counts[term, c] for c in present)
            for at, rarer in enumerate(present):  # memories also in a later (commoner) column count once
                later = present[at + 1 :]
                if later:
                    (overlap,) = self.db.execute(
                        "SELECT count(*) FROM postings a WHERE a.term = %s AND a.col = %s AND EXISTS (SELECT 1 "
                        "FROM postings b WHERE b.term = a.term AND b.col = ANY(%s) AND b.memory_id = a.memory_id)",
                        (term, rarer, later),
                    ).fetchone()  # type: ignore[misc]
                    total -= int(overlap)
            found.append(total)
        return found

    def search(self, phrases: Phrases, scope: Scope, limit: int) -> LexicalHits:
        """BM25 of the phrases, each searched in its own columns (FTS5's `{columns} : phrase`),
        exactly as FTS5 scores them, but without scoring every memory that holds a common word.

        The phrases are split by their score bound, idf·(k1+1) (a phrase adds less than that to
        any memory): the rarest ones (essential) find the candidates, which are scored on them
        alone; the k-th best of those partial scores, less the bound of the other phrases, is the
        least a memory needs to be scored in full. When the k-th full score beats the bound of the
        other phrases, no memory holding none of the essential phrases can reach the top k, and
        the answer is exact; otherwise one more phrase becomes essential (at worst all are, and
        every matching memory is scored, as FTS5 does). Common words have a tiny idf (FTS5 floors
        it at 1e-6 for a word in half the memories), so they seldom need scoring at all.
        """
        rows, tokens = self.db.execute("SELECT sum(memories)::bigint, sum(tokens)::bigint FROM fts_totals").fetchone()  # type: ignore[misc]
        if not rows:
            return LexicalHits()
        singles = [(ordinal, p[0], cols) for ordinal, (p, cols) in enumerate(phrases) if len(p) == 1]
        single_counts = dict(
            zip(
                [ordinal for ordinal, _, _ in singles],
                self._documents_with_terms([(term, cols) for _, term, cols in singles]),
                strict=True,
            )
        )
        # One row per (term, ordinal, column) of the single-token phrases; one per (memory,
        # ordinal) of the phrases of several tokens, with f and D.
        term_cols = [(term, ordinal, col) for ordinal, term, cols in singles for col in cols]
        query_rows = [[t for t, _, _ in term_cols], [o for _, o, _ in term_cols], [c for _, _, c in term_cols]]
        extra: builtins.list[builtins.list[Any]] = [[], [], [], []]
        idfs: builtins.list[float] = []
        documents: builtins.list[int] = []
        for ordinal, (phrase, columns) in enumerate(phrases):
            if len(phrase) == 1:
                hits = single_counts[ordinal]
            else:
                found = self.phrase_hits(phrase, columns)
                for memory_id, (frequency, length) in found.items():
                    for column, value in zip(extra, (memory_id, ordinal, float(frequency), length), strict=True):
                        column.append(value)
                hits = len(found)
            idfs.append(idf(rows, hits))
            documents.append(hits)
        where, scope_params = POSTGRES.where(scope)
        average = tokens / rows
        if sum(documents) > IMPACT_ABOVE:
            return _ImpactRead(self, term_cols, extra, idfs, where, scope_params, limit, average).run()
        bounds = [value * (K1 + 1.0) for value in idfs]
        by_bound = sorted(range(len(phrases)), key=lambda o: (-bounds[o], documents[o], o))
        essential = next(
            (j for j in range(1, len(by_bound)) if sum(documents[o] for o in by_bound[:j]) >= limit), len(by_bound)
        )
        common = [*query_rows, *extra, idfs]
        for count in range(essential, len(by_bound) + 1):
            rest = sum(bounds[o] for o in by_bound[count:]) * (1 + 1e-9) + 1e-12  # float slack
            # Pruning pays where the other phrases weigh less than an essential phrase adds to
            # a memory of average length holding it once (bound / (k1 + 1)), and the essential
            # phrases hold under half the postings; else scoring every memory costs about the same.
            if (
                count == len(by_bound)
                or rest >= min(idfs[o] for o in by_bound[:count])
                or 2 * sum(documents[o] for o in by_bound[:count]) > sum(documents)
            ):
                return self._rows(self._all_sql(where, average), [*common, *scope_params, limit])
            chosen = sorted(by_bound[:count])
            (contenders,) = self.db.execute(  # type: ignore[misc]
                self._contenders_sql(where, average), [*common, chosen, chosen, *scope_params, limit - 1, rest]
            ).fetchone()
            contenders = contenders or []
            if len(contenders) * len(term_cols) > sum(documents) / 4:  # look-ups would cost more than the lists
                return self._rows(self._all_sql(where, average), [*common, *scope_params, limit])
            top = self._rows(self._scored_sql(average), [*common, contenders, limit])
            if len(top) == limit and top[-1][1] > rest:
                return top
        raise AssertionError("unreachable")

    def arrays(self, sql: str, params: builtins.list[Any]) -> builtins.list[np.ndarray]:
        """The one row of a query of numeric arrays (see _NumpyArrayLoader), as numpy arrays."""
        with self.db.cursor(binary=True) as cursor:
            for oid in _NUMPY_ARRAYS:
                cursor.adapters.register_loader(oid, _NumpyArrayLoader)
            return list(cursor.execute(sql, params).fetchone())  # type: ignore[arg-type]

    def _rows(self, sql: str, params: builtins.list[Any]) -> LexicalHits:
        return LexicalHits((int(memory_id), float(score)) for memory_id, score in self.db.execute(sql, params))

    @staticmethod
    def _inputs(average_length: float) -> tuple[str, str]:
        """The common table expressions of the BM25 queries, and one phrase's term of bm25():
        idf·f·(k1+1)/(f + k1·(1 − b + b·D/avgdl)), from a hits row `h` and its weight `w`."""
        ctes = """
            q(term, ord, col) AS (SELECT * FROM unnest(%s::text[], %s::int[], %s::int[])),
            extra(memory_id, ord, f, dl) AS (SELECT * FROM unnest(%s::bigint[], %s::int[], %s::float8[], %s::int[])),
            w(ord, idf) AS (SELECT ordinality::int - 1, idf FROM unnest(%s::float8[]) WITH ORDINALITY AS t(idf))
        """
        # Literals from repr() read back as the same float8.
        term = (
            f"w.idf * ((h.f * {K1 + 1.0!r}::float8) / (h.f + {K1!r}::float8 * ({1 - B!r}::float8 + {B!r}::float8 "
            f"* h.dl / {average_length!r}::float8)))"
        )
        return ctes, term

    def _all_sql(self, where: str, average_length: float) -> str:
        """Every memory holding a phrase, scored in full (phrases summed in query order, as FTS5)."""
        ctes, term = self._inputs(average_length)
        return f"""
            WITH {ctes},
            {self._hits_sql(essential_only=False)}
            SELECT h.memory_id, sum({term} ORDER BY h.ord) AS score
            FROM hits h JOIN w ON w.ord = h.ord {_scoped_hits(where)}
            GROUP BY h.memory_id ORDER BY score DESC, h.memory_id LIMIT %s
        """

    @staticmethod
    def _hits_sql(*, essential_only: bool) -> str:
        """The `hits` table: each memory's frequency and length for each query phrase it holds,
        from the postings and `extra`; with `essential_only`, of the phrases whose ordinals the
        next two parameters list."""
        postings_filter = "WHERE q.ord = ANY(%s::int[])" if essential_only else ""
        extra_filter = "WHERE ord = ANY(%s::int[])" if essential_only else ""
        return f"""hits AS (
                SELECT p.memory_id, q.ord, sum(p.tf)::float8 AS f, max(p.doc_length) AS dl
                FROM q JOIN postings p ON p.term = q.term AND p.col = q.col {postings_filter}
                GROUP BY p.memory_id, q.ord
                UNION ALL SELECT * FROM extra {extra_filter}
            )"""

    def _contenders_sql(self, where: str, average_length: float) -> str:
        """The memories in scope holding an essential phrase whose partial score (on those phrases
        alone) is within the other phrases' bound of the k-th best (parameters after the common
        ones: essential ordinals twice, scope, k − 1, the bound), as one array."""
        ctes, term = self._inputs(average_length)
        return f"""
            WITH {ctes},
            {self._hits_sql(essential_only=True)},
            partial AS MATERIALIZED (
                SELECT h.memory_id, sum({term}) AS score FROM hits h JOIN w ON w.ord = h.ord {_scoped_hits(where)}
                GROUP BY h.memory_id
            )
            SELECT array_agg(memory_id) FROM partial WHERE score >= coalesce(
                (SELECT score FROM partial ORDER BY score DESC LIMIT 1 OFFSET %s), '-infinity') - %s
        """

    def _scored_sql(self, average_length: float) -> str:
        """The given memories (parameter after the common ones) scored in full, best first; their
        postings read by key (OFFSET 0 keeps the look-ups from becoming scans of whole lists)."""
        ctes, term = self._inputs(average_length)
        return f"""
            WITH {ctes},
            contenders(memory_id) AS (SELECT unnest(%s::bigint[])),
            scored AS (
                SELECT p.memory_id, q.ord, sum(p.tf)::float8 AS f, max(p.doc_length) AS dl
                FROM contenders c CROSS JOIN q JOIN LATERAL (SELECT p.memory_id, p.tf, p.doc_length FROM postings p
                    WHERE p.term = q.term AND p.col = q.col AND p.memory_id = c.memory_id OFFSET 0) p ON true
                GROUP BY p.memory_id, q.ord
                UNION ALL SELECT e.* FROM extra e JOIN contenders c ON c.memory_id = e.memory_id
            )
            SELECT h.memory_id, sum({term} ORDER BY h.ord) AS score
            FROM scored h JOIN w ON w.ord = h.ord
            GROUP BY h.memory_id ORDER BY score DESC, h.memory_id LIMIT %s
        """

    def word_documents(self, words: Sequence[str]) -> tuple[int, builtins.list[int]]:
        """How many memories there are, and each word's text plus tags document counts (see
        SearchBackend.word_documents), from fts_totals and term_docs."""
        phrases = FTS_TOKENIZER.phrases(words)
        terms = sorted({term for phrase in phrases for term in phrase})
        (memories,) = self.db.execute("SELECT coalesce(sum(memories), 0)::bigint FROM fts_totals").fetchone()  # type: ignore[misc]
        sql = "SELECT term, sum(docs)::bigint FROM term_docs WHERE term = ANY(%s) AND col = ANY(%s) GROUP BY term"
        counts = dict(self.db.execute(sql, (terms, columns_of(None))).fetchall())
        return int(memories), [min((int(counts.get(term, 0)) for term in phrase), default=0) for phrase in phrases]

    def document_frequency(self, word: str, scope: Scope, at_most: int) -> int:
        """How many memories in scope hold `word` in their text or tags, counting no further than `at_most`."""
        phrase = FTS_TOKENIZER.phrase(word)
        if not phrase:
            return 0
        columns = columns_of(None)
        where, params = POSTGRES.where(scope)
        if len(phrase) == 1:
            sql = (
                "SELECT count(*) FROM (SELECT DISTINCT p.memory_id FROM postings p "
                "JOIN memories m ON m.id = p.memory_id "
                f"WHERE p.term = %s AND p.col = ANY(%s) AND {where} LIMIT %s) s"
            )
            return int(self.db.execute(sql, [phrase[0], columns, *params, at_most]).fetchone()[0])  # type: ignore[index]
        ids = list(self.phrase_hits(phrase, columns))
        sql = f"SELECT count(*) FROM (SELECT 1 FROM memories m WHERE m.id = ANY(%s) AND {where} LIMIT %s) s"
        return int(self.db.execute(sql, [ids, *params, at_most]).fetchone()[0])  # type: ignore[index]


class _ImpactRead:
    """The top k by BM25 from the heads of the posting lists (`lists`: term, phrase ordinal,
    column) read in impact order, for queries whose lists are long.

    Along a list in the postings_impact index (tf descending, then the memory's length D, then
    its id) a posting's BM25 term only falls. Every memory seen in a head is a candidate; its
    score lies between what its seen postings give (lower) and that plus the most the unread
    parts of its other lists can add (upper, knowing its D and id). Candidates whose upper
    bound reaches the k-th lower bound are scored exactly (their missing postings looked up).
    A memory seen in no head scores at most the sum of the lists' bounds past their heads:
    when the k-th exact score beats that sum, or ties it with an id no larger than an unseen
    memory of that score must have (within one tf and D a list runs by id), the top k is
    FTS5's, exact. Otherwise the open heads grow fourfold (at once, when that costs less than
    the look-ups: LOOKUP_COST), until POSTING_BUDGET postings are read: then the best memories
    found are returned scored exactly (`bounded`: the top k not proven). Scores are computed as
    the SQL of the exact route computes them (the same float operations, phrases summed in
    query order), so ties stay ties. One reading keeps how far each list is read, what each
    candidate is known to hold, and the bounds that prove the top k.
    """

    def __init__(
        self,
        bm25: Bm25,
        lists: builtins.list[tuple[str, int, int]],
        extra: builtins.list[builtins.list[Any]],
        idfs: builtins.list[float],
        where: str,
        scope_params: builtins.list[Any],
        limit: int,
        average: float,
    ) -> None:
        self.bm25, self.lists, self.idfs, self.limit, self.average = bm25, lists, idfs, limit, average
        self.scope_params = scope_params
        self.ordinals = sorted({o for _, o, _ in lists} | {int(o) for o in extra[1]})
        column_of = {o: at for at, o in enumerate(self.ordinals)}
        self.weights = np.array([idfs[o] for o in self.ordinals])
        self.list_column = np.array([column_of[o] for _, o, _ in lists], dtype=np.int64)
        self.terms, self.columns = [t for t, _, _ in lists], [c for _, _, c in lists]
        (shortest,) = bm25.db.execute("SELECT min(fts_length) FROM memories WHERE fts_length > 0").fetchone()  # type: ignore[misc]
        self.shortest = int(shortest or 1)
        scoped = "" if where == "true" else f"JOIN memories m ON m.id = p.memory_id AND {where}"
        # Each round reads only the next part of each open list (OFFSET: the snapshot is fixed).
        self.heads_sql = f"""
            SELECT coalesce(array_agg(h.i), '{{}}'), coalesce(array_agg(h.memory_id), '{{}}'),
                coalesce(array_agg(h.tf), '{{}}'), coalesce(array_agg(h.doc_length), '{{}}')
            FROM (SELECT q.list, p.memory_id, p.tf, p.doc_length
                FROM unnest(%s::int[], %s::text[], %s::int[], %s::int[], %s::int[]) AS q(list, term, col, read, depth)
                CROSS JOIN LATERAL (SELECT p.memory_id, p.tf, p.doc_length FROM postings p {scoped}
                    WHERE p.term = q.term AND p.col = q.col ORDER BY p.tf DESC, p.doc_length, p.memory_id
                    OFFSET q.read LIMIT q.depth - q.read) p) h(i, memory_id, tf, doc_length)
        """
        # The phrases of several tokens: every memory holding one is known already, with f and D.
        extra_ids = np.asarray(extra[0], dtype=np.int64)
        extra_keep = np.ones(len(extra_ids), dtype=bool)
        if len(extra_ids) and where != "true":
            sql = f"SELECT coalesce(array_agg(m.id), '{{}}') FROM memories m WHERE m.id = ANY(%s) AND {where}"
            (kept,) = bm25.db.execute(sql, [sorted(set(extra_ids.tolist())), *scope_params]).fetchone()  # type: ignore[misc]
            extra_keep = np.isin(extra_ids, np.asarray(kept, dtype=np.int64))
        self.extra_ids = extra_ids[extra_keep]
        self.extra_columns = np.array([column_of[int(o)] for o in extra[1]], dtype=np.int64)[extra_keep]
        self.extra_f = np.asarray(extra[2], dtype=np.float64)[extra_keep]
        self.extra_lengths = np.asarray(extra[3], dtype=np.int64)[extra_keep]
        self.depth = [min(POSTING_BUDGET // max(1, len(lists)), max(IMPACT_FIRST_HEAD, 4 * limit))] * len(lists)
        self.read = [0] * len(lists)  # how far each list has been read (only open lists grow)
        self.end_tf: dict[int, int] = {}
        self.end_length: dict[int, int] = {}
        self.end_id: dict[int, int] = {}
        self.at_list, self.ids, self.tfs, self.lengths = (np.zeros(0, dtype=np.int64) for _ in range(4))

    def scores(self, frequencies: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """BM25 of memories (rows) from their f per phrase (columns) and D, as Bm25._inputs' SQL."""
        total = np.zeros(len(lengths))
        norm = K1 * ((1 - B) + B * lengths / self.average)
        for at in range(len(self.ordinals)):
            f = frequencies[:, at]
            total = total + self.weights[at] * ((f * (K1 + 1.0)) / (f + norm))
        return total

    def contending(self, chosen: np.ndarray, known: np.ndarray, unread: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Those of `chosen` whose upper bound (their known f per phrase, plus what their lists'
        unread parts may add) reaches the k-th best lower bound (the known f alone) among them."""
        if len(chosen) < self.limit:
            return chosen
        more = np.zeros((len(chosen), len(self.ordinals)))
        for i, column in enumerate(self.list_column):
            more[:, column] += unread[chosen, i]
        lower = self.scores(known[chosen], lengths[chosen])
        upper = self.scores(known[chosen] + more, lengths[chosen])
        floor = float(np.partition(lower, len(lower) - self.limit)[len(lower) - self.limit])
        return chosen[upper >= floor * (1 - 1e-9) - 1e-12]

    def term(self, f: float, length: float) -> float:
        """One phrase's BM25 term without its idf."""
        return f * (K1 + 1.0) / (f + K1 * ((1 - B) + B * length / self.average)) if f > 0 else 0.0

    def read_heads(self) -> tuple[builtins.list[int], np.ndarray]:
        """Read the next part of each list that is to grow; the lists still open (not read to their
        end) and how many postings of each are read."""
        lists = range(len(self.lists))
        wanted = [i for i in lists if self.depth[i] > self.read[i]]
        reading = [
            wanted,
            *([values[i] for i in wanted] for values in (self.terms, self.columns, self.read, self.depth)),
        ]
        batch = self.bm25.arrays(self.heads_sql, [*reading, *self.scope_params])
        self.at_list, self.ids, self.tfs, self.lengths = (
            np.concatenate(pair) for pair in zip((self.at_list, self.ids, self.tfs, self.lengths), batch, strict=True)
        )
        counts = np.bincount(self.at_list, minlength=len(self.lists))
        self.read = list(self.depth)
        open_lists = [i for i in lists if counts[i] >= self.depth[i]]  # the others were read to their end
        for i in open_lists:
            if i in wanted:  # its head's end, last in index order: least tf, then longest, then largest id
                part = np.flatnonzero(batch[0] == i)
                part = part[batch[2][part] == batch[2][part].min()]
                part = part[batch[3][part] == batch[3][part].max()]
                self.end_tf[i], self.end_length[i], self.end_id[i] = (int(batch[n][part].max()) for n in (2, 3, 1))
        return open_lists, counts

    def unseen_bounds(self, open_lists: builtins.list[int]) -> tuple[dict[int, float], dict[int, int]]:
        """What a memory seen in no head can score, phrase by phrase; and, per phrase whose bound is
        tight, the id an unseen memory scoring that bound exceeds."""
        rest: dict[int, float] = {}
        tight: dict[int, int] = {}
        for ordinal in self.ordinals:
            heads = [i for i in open_lists if self.lists[i][1] == ordinal]
            if len(heads) == 1:
                (i,) = heads
                at_end, below = (
                    self.term(self.end_tf[i], self.end_length[i]),
                    self.term(self.end_tf[i] - 1, self.shortest),
                )
                rest[ordinal] = self.idfs[ordinal] * max(at_end, below)
                if below < at_end * (1 - 1e-9):
                    tight[ordinal] = self.end_id[i]
            elif heads:
                rest[ordinal] = self.idfs[ordinal] * self.term(sum(self.end_tf[i] for i in heads), self.shortest)
        return rest, tight

    def candidates(self, open_lists: builtins.list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The memories seen so far (ids), the f each is known to hold per phrase, its D, and what
        the unread part of each open list may add to it."""
        ids, at_list = self.ids, self.at_list
        candidates, where_row = np.unique(np.concatenate([ids, self.extra_ids]), return_inverse=True)
        seen_rows, extra_rows = where_row[: len(ids)], where_row[len(ids) :]
        width = len(self.ordinals)
        cells = seen_rows * width + self.list_column[at_list]  # (candidate, phrase), flattened
        known = np.bincount(cells, weights=self.tfs, minlength=len(candidates) * width)
        known = known.reshape(len(candidates), width)
        known[extra_rows, self.extra_columns] = self.extra_f
        memory_lengths = np.zeros(len(candidates), dtype=np.int64)
        memory_lengths[seen_rows] = self.lengths
        memory_lengths[extra_rows] = self.extra_lengths
        seen = np.zeros((len(candidates), len(self.lists)), dtype=bool)
        seen[seen_rows, at_list] = True
        # What each candidate's unread part of an open list may add (none once looked up).
        unread = np.zeros((len(candidates), len(self.lists)), dtype=np.int64)
        for i in open_lists:
            end_tf, end_length = self.end_tf[i], self.end_length[i]
            after_end = (memory_lengths > end_length) | ((memory_lengths == end_length) & (candidates > self.end_id[i]))
            unread[:, i] = np.where(seen[:, i], 0, np.where(after_end, end_tf, end_tf - 1))
        return candidates, known, memory_lengths, unread

    def look_up(
        self,
        chosen: np.ndarray,
        order: builtins.list[int],
        candidates: np.ndarray,
        known: np.ndarray,
        unread: np.ndarray,
        lengths: np.ndarray,
    ) -> np.ndarray:
        """Look up the chosen candidates' missing postings one open list at a time (in `order`),
        keeping only those whose upper bound still reaches the k-th lower."""
        for i in order:
            rows = chosen[unread[chosen, i] > 0]
            if len(rows):
                lookup = [self.terms[i], self.columns[i], _int_array(candidates[rows])]
                found_ids, found_tf = self.bm25.arrays(_MISSING_SQL, lookup)
                known[np.searchsorted(candidates, found_ids), self.list_column[i]] += found_tf
                unread[rows, i] = 0
            chosen = self.contending(chosen, known, unread, lengths)
        return chosen

    def proven(self, top: builtins.list[tuple[int, float]], rest: dict[int, float], tight: dict[int, int]) -> bool:
        """Whether no memory seen in no head can enter the top k: the k-th score beats what such a
        memory can score, or ties it with an id no larger than such a memory must have."""
        if len(top) < self.limit:
            return False
        unseen_bound = sum(rest.values())
        kth_id, kth_score = top[-1]
        if kth_score > unseen_bound * (1 + 1e-9) + 1e-12:
            return True
        return (
            abs(kth_score - unseen_bound) <= unseen_bound * 1e-9 + 1e-12
            and set(tight) == set(rest)
            and kth_id <= max(tight.values())
        )

    def run(self) -> LexicalHits:
        while True:
            open_lists, counts = self.read_heads()
            rest, tight = self.unseen_bounds(open_lists)
            unseen_bound = sum(rest.values())
            candidates, known, memory_lengths, unread = self.candidates(open_lists)
            weight = {i: rest.get(self.lists[i][1], 0.0) for i in open_lists}
            significant = [i for i in open_lists if weight[i] >= 1e-3 * unseen_bound] or open_lists
            grown = [4 * depth if i in significant else depth for i, depth in enumerate(self.depth)]
            read = sum(grown[i] if i in open_lists else int(counts[i]) for i in range(len(self.lists)))
            can_grow = read <= POSTING_BUDGET
            chosen = self.contending(np.arange(len(candidates)), known, unread, memory_lengths)
            lookups = int(np.count_nonzero(unread[chosen]))
            if can_grow and LOOKUP_COST * lookups > sum(grown[i] for i in open_lists):
                self.depth = grown  # reading further costs less than looking the candidates up
                continue
            unproven = not can_grow and LOOKUP_COST * lookups > POSTING_BUDGET - int(counts.sum())
            if unproven:  # proving the top k would overrun the budget: the best seen, scored exactly
                seen_score = self.scores(known[chosen], memory_lengths[chosen])
                chosen = chosen[np.lexsort((candidates[chosen], -seen_score))[: self.limit]]
            weightiest = sorted(open_lists, key=lambda i: -weight[i])
            chosen = self.look_up(chosen, weightiest, candidates, known, unread, memory_lengths)
            final = self.scores(known[chosen], memory_lengths[chosen])
            ranked = np.lexsort((candidates[chosen], -final))[: self.limit]
            top = [(int(candidates[chosen][r]), float(final[r])) for r in ranked]
            if not open_lists or (not unproven and self.proven(top, rest, tight)):
                return LexicalHits(top, "exact")
            if unproven or not can_grow:
                return LexicalHits(top, "bounded")
            self.depth = grown
