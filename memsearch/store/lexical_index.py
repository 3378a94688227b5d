"""The impact index of a large SQLite store's full text: FTS5's BM25 top-k over the columns a
lexical leg searches (text and tags, or one lexical view), exactly as FTS5 scores it, found
without scoring every match (FTS5 does: 448 ms at a million memories; see
bench/lexical_scale.py and the README).

What it holds (numpy arrays, one file): each indexed row's memory id and length in tokens (of
all its full-text columns, what FTS5's bm25 calls D), and for each token of the searched
columns (FTS5's own tokens, read out of the store through fts5vocab) its postings — rows in id
order with the token's count in those columns — with the largest count and the shortest row
among them (a bound on what the token can add to any row's score).

How a query is answered (MaxScore, as search engines stop early): the query's tokens, highest
bound first, are scored over their postings into one accumulator; once the k-th best partial
score is above all that the tokens left could add, no row that has none of the tokens seen can
reach the top k, so only the rows seen whose partial score plus that bound reaches the k-th are
scored for the remaining tokens (by binary search in their postings). The last step scores
every candidate again, phrase by phrase in the query's order, as fts5_aux.c's bm25 does (its
k1, b, idf and sums), so scores are FTS5's to the last bit; rows of equal score come by id, as
the store's FTS5 query orders them.

What it does not answer (the caller asks FTS5): queries with gram terms (CJK, symbols) or with a
phrase of several tokens (a quoted phrase, or a word FTS5 splits, like `auth_service`), which
need positions. Rows changed since it was made are searched beside it, every part scored with
the table's statistics as they are now (`answer_parts`; memsearch.store.lexical_delta).
"""

from __future__ import annotations

import json
import math
import mmap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memsearch.store.sqlite_driver import sqlite3
from memsearch.store.vectors import locate

if TYPE_CHECKING:
    import numpy as np

    from memsearch.text import LexicalQuery

# fts5_aux.c's bm25 constants.
K1 = 1.2
B = 0.75
_MAGIC = b"MSLEX001"
# Relative slack on the bounds compared with partial scores summed in another order than the
# exact ones (their last bits may differ): a row is dropped only when clearly out of the top k.
_SLACK = 1e-9
_ALIGN = 64
TEXT_COLUMNS = ("text", "tags")  # the columns a search over a memory's own text and tags reads


@dataclass
class ImpactIndex:
    """See the module's doc. `ids` and `lengths` by row; `starts` (one more than the terms) and
    `max_counts`, `min_lengths` by term; `rows` and `counts` the postings; `vocabulary` the terms'
    UTF-8 bytes in FTS5's (byte) order, `vocabulary_starts` where each begins."""

    ids: np.ndarray
    lengths: np.ndarray
    starts: np.ndarray
    max_counts: np.ndarray
    min_lengths: np.ndarray
    rows: np.ndarray
    counts: np.ndarray
    vocabulary: np.ndarray
    vocabulary_starts: np.ndarray

    @property
    def nbytes(self) -> int:
        return sum(int(getattr(self, name).nbytes) for name in _ARRAYS)

    @property
    def total_tokens(self) -> int:
        return int(self.lengths.sum(dtype="int64"))

    def term(self, token: str) -> int | None:
        """The index of `token` among the terms (binary search over the vocabulary), or None."""
        wanted = token.encode("utf-8")
        starts = self.vocabulary_starts
        vocabulary = self.vocabulary
        low, high = 0, int(starts.size) - 1
        while low < high:
            middle = (low + high) // 2
            found = vocabulary[int(starts[middle]) : int(starts[middle + 1])].tobytes()
            if found < wanted:
                low = middle + 1
            else:
                high = middle
        if low < starts.size - 1 and vocabulary[int(starts[low]) : int(starts[low + 1])].tobytes() == wanted:
            return low
        return None

    def search(
        self,
        phrases: Sequence[str | Scored],
        k: int,
        mask: np.ndarray | None,
        stats: Stats,
    ) -> list[tuple[int, float]]:
        """The top `k` rows for a query's phrases, in the query's order (repeats kept: FTS5 scores
        each phrase): a single-token phrase as its token, a longer one as its Scored rows (what
        FTS5 answers for that phrase alone). As (memory id, score) best first, higher better.
        `mask`: which rows may be returned (None: all). `stats`: the full-text table's row count,
        average length and each token's row count as they are now (the table may have changed
        since the index was made). Every bound is derived from them, so
        the early stop stays safe: a token's largest count and shortest row over the rows the
        index holds bound what it adds to any of them that is still there unchanged."""
        import numpy as np

        if self.ids.size == 0 or k <= 0 or not phrases:
            return []
        rows_count = stats.rows
        average = stats.average
        units: dict[int | str, float] = {}  # a term's index, or a Scored phrase's position: summed idf
        keys: list[int | str | None] = []
        idf: list[float] = []
        for position, phrase in enumerate(phrases):
            if isinstance(phrase, Scored):
                key: int | str | None = f"p{position}" if phrase.rows.size else None
                weight = 1.0
            else:
                key = self.term(phrase)
                hits = stats.hits[phrase]
                # FTS5's idf: log((N - n + 0.5) / (n + 0.5)), at least 1e-6.
                value = math.log((rows_count - hits + 0.5) / (hits + 0.5))
                weight = value if value > 0.0 else 1e-6
            keys.append(key)
            idf.append(weight)
            if key is not None:
                units[key] = units.get(key, 0.0) + weight
        if not units:
            return []
        scored = {f"p{i}": phrase for i, phrase in enumerate(phrases) if isinstance(phrase, Scored)}

        def size(unit: int | str) -> int:
            return scored[unit].rows.size if isinstance(unit, str) else int(self.starts[unit + 1] - self.starts[unit])

        def bound(unit: int | str) -> float:
            if isinstance(unit, str):
                return units[unit] * float(scored[unit].scores.max())
            count = float(self.max_counts[unit])
            length = float(self.min_lengths[unit])
            return units[unit] * (count * (K1 + 1.0)) / (count + K1 * (1.0 - B + B * length / average))

        order = sorted(units, key=lambda unit: (-bound(unit), size(unit)))
        bounds = [bound(unit) for unit in order]
        left = [sum(bounds[i:]) for i in range(len(bounds))] + [0.0]
        accumulator = np.zeros(self.ids.size, np.float64)
        seen: list[np.ndarray] = []  # each row once: the rows a unit added first
        done = 0
        threshold = -1.0
        candidates = np.zeros(0, np.int64)
        while done < len(order):
            unit = order[done]
            if isinstance(unit, str):
                rows, contribution = scored[unit].rows, units[unit] * scored[unit].scores
            else:
                rows, contribution = self._contributions(unit, average, units[unit])
            fresh = rows if not seen else rows[accumulator[rows] == 0.0]  # every contribution is > 0
            accumulator[rows] += contribution
            seen.append(fresh if mask is None else fresh[mask[fresh]])
            done += 1
            candidates = np.concatenate(seen) if len(seen) > 1 else seen[0]
            if candidates.size >= k:
                partial = accumulator[candidates]
                threshold = float(np.partition(partial, candidates.size - k)[candidates.size - k])
                if threshold > left[done] * (1.0 + _SLACK):
                    break
        if done < len(order) and candidates.size:
            # Rows seen that may still reach the k-th score with the phrases left, narrowed phrase
            # by phrase: each adds its part to the candidates' partial scores (lower bounds), and
            # those that can no longer reach the k-th of them are dropped.
            partial = accumulator[candidates]
            for position in range(done, len(order)):
                floor = threshold * (1.0 - _SLACK)
                keep = partial + left[position] >= floor
                candidates, partial = candidates[keep], partial[keep]
                if candidates.size <= k:
                    break
                unit = order[position]
                if isinstance(unit, str):
                    partial = partial + _lookup(scored[unit].rows, scored[unit].scores, candidates, 0.0) * units[unit]
                else:
                    partial = partial + self._candidate_contributions(unit, candidates, average, units[unit])
                threshold = max(threshold, float(np.partition(partial, candidates.size - k)[candidates.size - k]))
            else:
                candidates = candidates[partial >= threshold * (1.0 - _SLACK)]
        elif candidates.size > k:  # every phrase scored in full: the accumulator holds the scores
            candidates = candidates[accumulator[candidates] >= threshold * (1.0 - _SLACK)]
        if candidates.size == 0:
            return []
        scores = self._exact(candidates, keys, idf, scored, average)
        top = np.lexsort((self.ids[candidates], -scores))[:k]
        return [(int(self.ids[candidates[i]]), float(scores[i])) for i in top if scores[i] > 0.0]

    def _candidate_contributions(self, term: int, candidates: np.ndarray, average: float, weight: float) -> np.ndarray:
        """What the term adds to each of `candidates` (rows), summed idf `weight`."""
        import numpy as np

        start, end = int(self.starts[term]), int(self.starts[term + 1])
        counts = _lookup(self.rows[start:end], self.counts[start:end], candidates, 0).astype(np.float64)
        lengths = self.lengths[candidates].astype(np.float64)
        result: np.ndarray = weight * (counts * (K1 + 1.0)) / (counts + K1 * (1.0 - B + B * lengths / average))
        return result

    def _contributions(self, term: int, average: float, weight: float) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        start, end = int(self.starts[term]), int(self.starts[term + 1])
        rows = self.rows[start:end]
        counts = self.counts[start:end].astype(np.float64)
        lengths = self.lengths[rows].astype(np.float64)
        return rows, weight * (counts * (K1 + 1.0)) / (counts + K1 * (1.0 - B + B * lengths / average))

    def _exact(
        self,
        candidates: np.ndarray,
        keys: Sequence[int | str | None],
        idf: Sequence[float],
        scored: dict[str, Scored],
        average: float,
    ) -> np.ndarray:
        """Each candidate row's score as fts5_aux.c's bm25 sums it: phrase by phrase, in order."""
        import numpy as np

        scores = np.zeros(candidates.size, np.float64)
        lengths = self.lengths[candidates].astype(np.float64)
        norm = K1 * (1.0 - B + B * lengths / average)
        for key, weight in zip(keys, idf, strict=True):
            if key is None:
                continue
            if isinstance(key, str):
                scores += _lookup(scored[key].rows, scored[key].scores, candidates, 0.0)
                continue
            start, end = int(self.starts[key]), int(self.starts[key + 1])
            counts = _lookup(self.rows[start:end], self.counts[start:end], candidates, 0).astype(np.float64)
            scores += weight * ((counts * (K1 + 1.0)) / (counts + norm))
        return scores


@dataclass(frozen=True)
class Stats:
    """What FTS5's bm25 reads of the whole table: its row count, the average row length (all
    columns' tokens over the rows, as FTS5 divides them) and each query token's row count in the
    searched columns."""

    rows: int
    average: float
    hits: Mapping[str, int]


@dataclass(frozen=True)
class Part:
    """An index and the rows of it that no longer hold (sorted: rows written or deleted since it
    was made; `live` False for them, None when there are none). The parts of a full-text table
    hold each of its rows once, live in exactly one of them."""

    index: ImpactIndex
    dead: np.ndarray
    live: np.ndarray | None = None

    def hits(self, token: str) -> int:
        """The live rows of this part that hold `token` in the indexed columns."""
        import numpy as np

        term = self.index.term(token)
        if term is None:
            return 0
        start, end = int(self.index.starts[term]), int(self.index.starts[term + 1])
        found = end - start
        if self.dead.size and found:
            found -= int(np.count_nonzero(locate(self.index.rows[start:end], self.dead)[1]))
        return found


@dataclass(frozen=True)
class Scored:
    """A phrase's rows (ascending) and what it adds to each row's score (FTS5's bm25 of the phrase
    alone, its idf included)."""

    rows: np.ndarray
    scores: np.ndarray


def _lookup(rows: np.ndarray, values: np.ndarray, wanted: np.ndarray, missing: float) -> np.ndarray:
    """values[i] where rows[i] is each of `wanted`, `missing` where it is not among `rows`."""
    import numpy as np

    if rows.size == 0:
        return np.full(wanted.size, missing, values.dtype)
    where = np.searchsorted(rows, wanted)
    where[where >= rows.size] = 0
    return np.where(rows[where] == wanted, values[where], missing)


def query_phrases(query: LexicalQuery) -> list[tuple[str, ...]] | None:
    """The query's phrases as FTS5's tokens, in the order FTS5 is asked for them; None when the
    index cannot answer it (gram terms, a phrase with no token)."""
    from memsearch.store.fts import FTS_TOKENIZER

    if query.grams:
        return None
    phrases = FTS_TOKENIZER.phrases(list(query.match_phrases))
    if any(not phrase for phrase in phrases):
        return None
    return phrases


def answer(
    index: ImpactIndex,
    db: sqlite3.Connection,
    query: LexicalQuery,
    k: int,
    mask: np.ndarray | None = None,
    columns: Sequence[str] = TEXT_COLUMNS,
) -> list[tuple[int, float]] | None:
    """The top `k` of `query` over the full-text `columns` the index was built from, as the
    store's FTS5 query ranks them (its scores), when the table is as the index was made; None
    when the index cannot answer it (see `query_phrases`)."""
    import numpy as np

    part = Part(index, np.zeros(0, np.int64))
    return answer_parts([part], [mask], db, query, k, columns, int(index.ids.size), index.total_tokens)


def answer_parts(
    parts: Sequence[Part],
    masks: Sequence[np.ndarray | None],
    db: sqlite3.Connection,
    query: LexicalQuery,
    k: int,
    columns: Sequence[str],
    rows: int,
    total_tokens: int,
    phrases_tokens: list[tuple[str, ...]] | None = None,
) -> list[tuple[int, float]] | None:
    """The top `k` of `query` over the full-text `columns`, as the store's FTS5 query ranks them
    (its scores), from parts that together hold the table's `rows` rows of `total_tokens` tokens
    (as FTS5 counts them now) each live in one part; `masks`: which rows of each part are in
    scope (None: all). Each part is searched with the table's current statistics, and the best
    `k` of their answers kept. None when the parts cannot answer it (see `query_phrases`; or a
    row FTS5 matches that no part holds live). A phrase of several tokens is scored by FTS5 (a
    query of that phrase alone: positions are FTS5's), on `db`. `phrases_tokens`: the query's
    query_phrases, when the caller has them already (tokenizing is a statement: once a search)."""
    import numpy as np

    from memsearch.store.fts import FTS_COLUMNS

    tokens = query_phrases(query) if phrases_tokens is None else phrases_tokens
    if tokens is None:
        return None
    if rows <= 0:
        return []
    single = {phrase[0] for phrase in tokens if len(phrase) == 1}
    stats = Stats(rows, float(total_tokens) / float(rows), {t: sum(part.hits(t) for part in parts) for t in single})
    phrases: list[list[str | Scored]] = [[] for _ in parts]
    weights = ", ".join("1.0" if name in columns else "0.0" for name in FTS_COLUMNS)
    for text, phrase in zip(query.match_phrases, tokens, strict=True):
        if len(phrase) == 1:
            for each in phrases:
                each.append(phrase[0])
            continue
        found = db.execute(
            f"SELECT rowid, -bm25(memories_fts, {weights}) FROM memories_fts WHERE memories_fts MATCH ?",
            (f'{{{" ".join(columns)}}} : ("{text}")',),
        ).fetchall()
        ids = np.fromiter((row[0] for row in found), np.int64, len(found))
        scores = np.fromiter((row[1] for row in found), np.float64, len(found))
        placed = np.zeros(ids.size, bool)
        for part, each in zip(parts, phrases, strict=True):
            where, mine = locate(part.index.ids, ids)
            if part.live is not None:
                mine &= part.live[where]
            placed |= mine
            order = np.argsort(where[mine])
            each.append(Scored(where[mine][order], scores[mine][order]))
        if not bool(placed.all()):
            return None  # a row no part holds: the parts are not of this state of the store
    found_all: list[tuple[int, float]] = []
    for part, mask, each in zip(parts, masks, phrases, strict=True):
        wanted = part.live if mask is None else (mask if part.live is None else mask & part.live)
        found_all.extend(part.index.search(each, k, wanted, stats))
    found_all.sort(key=lambda hit: (-hit[1], hit[0]))
    return found_all[:k]


_ARRAYS = (
    "ids", "lengths", "starts", "max_counts", "min_lengths", "rows", "counts", "vocabulary", "vocabulary_starts",
)  # fmt: skip


def read_varints(blob: bytes) -> list[int]:
    """SQLite's varints (big-endian, 7 bits a byte, a ninth byte of 8 bits) in `blob`."""
    values: list[int] = []
    value = length = 0
    for byte in blob:
        length += 1
        if length == 9:
            values.append((value << 8) | byte)
            value = length = 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            values.append((value << 7) | byte)
            value = length = 0
    return values


def _varint_sum(blob: bytes) -> int:
    """The sum of the SQLite varints (big-endian, 7 bits a byte) in `blob`: FTS5's docsize record,
    a row's token count in each column."""
    total = value = 0
    for byte in blob:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            total += value
            value = 0
    return total


def _integers(text: str) -> np.ndarray:
    """The space-separated integers in `text`, parsed by numpy."""
    import numpy as np

    if not text:
        return np.zeros(0, np.int64)
    return np.fromstring(text, np.int64, sep=" ")


def build_from_connection(
    db: sqlite3.Connection, columns: Sequence[str] = TEXT_COLUMNS, table: str = "memories_fts"
) -> ImpactIndex:
    """The impact index of the full-text `columns` of the table `table` of the store open on
    `db`, read in one read transaction (the caller's, or its own)."""
    import numpy as np

    docsize = db.execute(f"SELECT id, sz FROM {table}_docsize ORDER BY id").fetchall()
    ids = np.fromiter((row[0] for row in docsize), np.int64, len(docsize))
    lengths = np.fromiter((_varint_sum(row[1]) for row in docsize), np.int64, len(docsize))
    del docsize
    if lengths.size and int(lengths.max()) < 2**31:
        lengths = lengths.astype(np.int32)
    # Every instance of a term in text or tags, by term, then row (one string of row ids: SQLite
    # makes it far faster than Python reads millions of rows), and the terms with their counts.
    db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_instances USING fts5vocab(main, {table}, instance)")
    db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_columns USING fts5vocab(main, {table}, col)")
    named = ", ".join("?" * len(columns))
    listed = db.execute(
        f"SELECT group_concat(doc, ' ') FROM temp.{table}_instances WHERE col IN ({named})", tuple(columns)
    ).fetchone()[0]
    doc_ids = _integers(listed or "")
    del listed
    terms = db.execute(
        f"SELECT term, sum(cnt) FROM temp.{table}_columns WHERE col IN ({named}) GROUP BY term ORDER BY term",
        tuple(columns),
    ).fetchall()
    vocabulary = [term for term, _ in terms]
    instances = np.fromiter((count for _, count in terms), np.int64, len(terms))
    del terms
    if int(instances.sum()) != doc_ids.size:
        raise ValueError("the full-text vocabulary changed while it was read")
    term_ids = np.repeat(np.arange(len(vocabulary), dtype=np.int64), instances)
    # Each instance's row (instances come by term, then row, then column and offset): through a
    # table of row by memory id when the ids are not too sparse (a gather, not a binary search).
    if ids.size and int(ids[-1]) < 4 * ids.size + (1 << 20):
        position = np.zeros(int(ids[-1]) + 1, np.int64)
        position[ids] = np.arange(ids.size)
        rows = position[doc_ids]
        del position
    else:
        rows = np.searchsorted(ids, doc_ids)
    del doc_ids
    key = term_ids * (ids.size + 1) + rows
    if key.size and not bool(np.all(key[1:] >= key[:-1])):  # SQLite gave the instances in another order
        order = np.argsort(key, kind="stable")
        key, rows, term_ids = key[order], rows[order], term_ids[order]
    new = np.empty(key.size, bool)
    if key.size:
        new[0] = True
        np.not_equal(key[1:], key[:-1], out=new[1:])
    firsts = np.flatnonzero(new)
    counts = np.diff(np.append(firsts, key.size))
    posting_rows = rows[firsts]
    posting_terms = term_ids[firsts]
    del key, new, rows, term_ids
    return assemble(ids, lengths, vocabulary, posting_terms, posting_rows, counts)


def assemble(
    ids: np.ndarray,
    lengths: np.ndarray,
    vocabulary: Sequence[str],
    terms: np.ndarray,
    rows: np.ndarray,
    counts: np.ndarray,
) -> ImpactIndex:
    """The impact index of rows `ids` (ascending) of `lengths` tokens, over `vocabulary` (FTS5's
    byte order) and its postings: term `terms[i]` is `counts[i]` times in row `rows[i]`, by term
    then row. A term may have no postings (it is then bounded by nothing: 0)."""
    import numpy as np

    term_count = len(vocabulary)
    starts = np.searchsorted(terms, np.arange(term_count + 1)).astype(np.int64)
    max_counts = np.zeros(term_count, np.int64)
    min_lengths = np.zeros(term_count, np.int64)
    held = starts[1:] > starts[:-1]  # terms with postings: each reduced over its own postings only
    if bool(held.any()):
        begins = starts[:-1][held]
        max_counts[held] = np.maximum.reduceat(counts, begins)
        min_lengths[held] = np.minimum.reduceat(lengths[rows].astype(np.int64), begins)
    count_type = np.uint16 if counts.size == 0 or int(counts.max()) < 2**16 else np.uint32
    row_type = np.int32 if ids.size < 2**31 else np.int64
    encoded = [term.encode("utf-8") for term in vocabulary]  # in FTS5's order: by bytes
    vocabulary_starts = np.zeros(term_count + 1, np.int64)
    np.cumsum([len(term) for term in encoded], out=vocabulary_starts[1:])
    return ImpactIndex(
        ids=ids,
        lengths=lengths,
        starts=starts,
        max_counts=max_counts.astype(count_type),
        min_lengths=min_lengths.astype(lengths.dtype),
        rows=rows.astype(row_type),
        counts=counts.astype(count_type),
        vocabulary=np.frombuffer(b"".join(encoded), np.uint8),
        vocabulary_starts=vocabulary_starts,
    )


def write(index: ImpactIndex, handle: Any) -> None:
    """Write `index` to the binary file `handle`: a header (magic, length, JSON of each array's
    dtype, shape and offset), then the arrays, each aligned."""
    import numpy as np

    layout: dict[str, Any] = {}
    offset = 0
    for name in _ARRAYS:
        array = np.ascontiguousarray(getattr(index, name))
        layout[name] = {"dtype": array.dtype.str, "shape": list(array.shape), "offset": offset}
        offset += -(-array.nbytes // _ALIGN) * _ALIGN
    header = json.dumps(layout, sort_keys=True).encode("ascii")
    head = len(_MAGIC) + 8 + len(header)
    base = -(-head // _ALIGN) * _ALIGN
    handle.write(_MAGIC + len(header).to_bytes(8, "little") + header + b"\0" * (base - head))
    for name in _ARRAYS:
        array = np.ascontiguousarray(getattr(index, name))
        handle.write(array.tobytes())
        handle.write(b"\0" * (-array.nbytes % _ALIGN))


def read(mapped: mmap.mmap) -> ImpactIndex | None:
    """The index in the mapped file (see `write`), its arrays views of the map; None when the file
    is not one."""
    import numpy as np

    try:
        if mapped[: len(_MAGIC)] != _MAGIC:
            return None
        size = int.from_bytes(mapped[len(_MAGIC) : len(_MAGIC) + 8], "little")
        head = len(_MAGIC) + 8 + size
        layout = json.loads(mapped[len(_MAGIC) + 8 : head])
        base = -(-head // _ALIGN) * _ALIGN
        arrays = {}
        for name in _ARRAYS:
            entry = layout[name]
            dtype = np.dtype(entry["dtype"])
            shape = tuple(int(n) for n in entry["shape"])
            count = math.prod(shape)
            start = base + int(entry["offset"])
            if start + count * dtype.itemsize > len(mapped):
                return None
            arrays[name] = np.frombuffer(mapped, dtype, count, start).reshape(shape)
    except (ValueError, KeyError, TypeError):
        return None
    index = ImpactIndex(**arrays)
    terms = index.starts.size - 1
    if (
        index.lengths.shape != index.ids.shape
        or index.max_counts.size != terms
        or index.min_lengths.size != terms
        or index.vocabulary_starts.size != terms + 1
        or index.rows.shape != index.counts.shape
        or (terms >= 0 and index.starts.size and int(index.starts[-1]) != index.rows.size)
    ):
        return None
    return index


__all__ = [
    "K1",
    "TEXT_COLUMNS",
    "B",
    "ImpactIndex",
    "Part",
    "Scored",
    "Stats",
    "answer",
    "answer_parts",
    "assemble",
    "build_from_connection",
    "query_phrases",
    "read",
    "read_varints",
    "write",
]
