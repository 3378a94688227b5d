"""memsearch's in-process search beside its floor and the stores a user would pick instead (issue 32).

Run by `bench/bench.py` (its `peers` part; one entry point), on the stores bench.py builds: the same
generated texts, the same vectors (bench.py's cached embeddings of them) and the same queries as its
API figures, each query's vector given (embedded once before anything is timed, so no figure
includes the model). At each size, taking turns query by query (the order rotating), one
interleaved run times:

- memsearch (`Memsearch.search`, k=10, the default profile, `touch=False` as the peers write
  nothing): vector mode, hybrid, lexical mode, and the hydration and ranking inside each hybrid
  search (bench/fixed_cost.py's timer);
- the stop-word floor (bench/fixed_cost.py): one numpy product over the store's vectors plus one
  FTS5 bm25 query of the query's words without stop words, on memsearch's own store;
- Chroma (PersistentClient, HNSW, cosine, its defaults: M 16, ef_search 100): vector search;
- sqlite-vec (vec0, cosine, exact; through apsw: this Python's sqlite3 cannot load extensions):
  vector search, and a hand-made hybrid: vec0's top pool + FTS5 bm25's top pool (the floor's
  stop-word query) fused by reciprocal rank (k 60), the top ten's texts read;
- LanceDB (no vector index: a flat, exact scan; its own FTS index): vector search, and its hybrid
  (`query_type="hybrid"`, its default RRF reranker).

Every answer reads the ten results' texts. The vector answers also get recall@10 against exact
cosine search over the same vectors. The peers' stores are built once under --out/peers (keyed
like bench.py's stores) and reused. A peer whose package is missing prints "skipped (pip install
.[bench])" and the others still run.

`goal_rows` turns a run's figures into issue 32's goals: each figure beside its floor or peer,
the ratio, the goal and whether it is met.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import bench  # noqa: E402

SKIPPED = "skipped (pip install .[bench])"
RRF_K = 60
PEERS_VERSION = 1  # bump when what the peers' stores hold changes: they are keyed by it

# The figures' names (bench.py's table, JSON and the goals read them back by these).
MS_VECTOR = "memsearch vector mode"
MS_HYBRID = "memsearch hybrid"
MS_LEXICAL = "memsearch lexical mode"
MS_RANK = "memsearch hybrid: hydration + ranking"
FLOOR = "stop-word floor (numpy product + FTS5 bm25)"
CHROMA = "Chroma HNSW vector"
SQLITE_VEC = "sqlite-vec vector (exact)"
LANCE = "LanceDB vector (flat, exact)"
SQLITE_VEC_HYBRID = "sqlite-vec + FTS5 hybrid (hand-made, RRF)"
LANCE_HYBRID = "LanceDB hybrid (its FTS + vector, RRF)"

Answer = Callable[[str, np.ndarray], Sequence[int]]  # (query, its vector) -> the result ids, best first


@dataclass
class Data:
    """What every engine gets: the store's texts, tags and vectors (ids 1..n, memsearch's order)
    and the queries with their vectors."""

    size: int
    texts: list[str]
    tags: list[str]
    vectors: np.ndarray
    queries: list[str]
    query_vectors: np.ndarray
    pool: int  # the profile's candidate pool for k=10: the hand-made hybrid's legs take as many


@dataclass
class Engine:
    name: str
    ops: dict[str, Answer] = field(default_factory=dict)  # figure name -> answer
    close: Callable[[], None] = lambda: None
    build_s: float | None = None  # seconds, when this run built its store
    legs: dict[str, str] = field(default_factory=dict)  # memsearch: a mode -> how its vector legs were searched


class GivenQueries:
    """An encoder that embeds nothing: the queries' vectors, computed before the run."""

    def __init__(self, info: Any, queries: Sequence[str], vectors: np.ndarray) -> None:
        self.info = info
        self._rows = {query: vectors[n] for n, query in enumerate(queries)}

    def encode(self, texts: Sequence[str], *, progress: Any = None) -> np.ndarray:
        missing = [text for text in texts if text not in self._rows]
        if missing:
            raise RuntimeError(f"the bench gives no vector for {missing[0]!r}")
        return np.stack([self._rows[text] for text in texts])


def stop_word_match(query: str) -> str | None:
    """The floor's FTS5 query (bench/fixed_cost.py): the query's words without stop words, OR'ed."""
    from memsearch.text import STOPWORDS, WORD

    words = [w for w in dict.fromkeys(WORD.findall(query.lower())) if w not in STOPWORDS]
    if not words:
        return None
    return "{text tags} : (" + " OR ".join('"' + w.replace('"', '""') + '"' for w in words) + ")"


def rrf(*rankings: Sequence[int], k: int = RRF_K) -> list[int]:
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank + 1)
    return sorted(scores, key=lambda item: -scores[item])


def peer_folder(out: Path, name: str, seed: int, size: int) -> Path:
    return out / "peers" / f"{name}-v{PEERS_VERSION}-g{bench.GENERATOR_VERSION}-s{seed}-n{size}"


@contextmanager
def building(folder: Path) -> Iterator[Path]:
    """A staging folder that becomes `folder` when the block ends without an error."""
    staging = folder.with_name(folder.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    yield staging
    staging.replace(folder)


# -- the engines ------------------------------------------------------------------------------


def chroma(data: Data, folder: Path) -> Engine:
    import chromadb
    from chromadb.config import Settings

    built = None
    if not folder.is_dir():
        started = time.perf_counter()
        with building(folder) as staging:
            client = chromadb.PersistentClient(path=str(staging), settings=Settings(anonymized_telemetry=False))
            collection = client.create_collection(
                "memories", embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
            )
            batch = min(5000, client.get_max_batch_size())
            for start in range(0, data.size, batch):
                stop = min(data.size, start + batch)
                collection.add(
                    ids=[str(i + 1) for i in range(start, stop)],
                    embeddings=data.vectors[start:stop],
                    documents=data.texts[start:stop],
                )
            del collection, client
        built = time.perf_counter() - started
    client = chromadb.PersistentClient(path=str(folder), settings=Settings(anonymized_telemetry=False))
    collection = client.get_collection("memories", embedding_function=None)

    def vector(query: str, qv: np.ndarray) -> list[int]:
        found = collection.query(query_embeddings=[qv], n_results=10, include=["documents", "distances"])
        return [int(i) for i in found["ids"][0]]

    return Engine("Chroma", {CHROMA: vector}, build_s=built)


def sqlite_vec(data: Data, folder: Path) -> Engine:
    import apsw
    import sqlite_vec as vec

    from memsearch.store.fts import TOKENIZER

    def connect(path: Path) -> Any:
        db = apsw.Connection(str(path))
        db.enable_load_extension(True)
        db.load_extension(vec.loadable_path())
        db.enable_load_extension(False)
        return db

    built = None
    if not folder.is_dir():
        started = time.perf_counter()
        with building(folder) as staging:
            db = connect(staging / "store.db")
            db.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, text TEXT NOT NULL, tags TEXT NOT NULL)")
            db.execute(f"CREATE VIRTUAL TABLE docs_fts USING fts5 (text, tags, tokenize = '{TOKENIZER}')")
            db.execute(
                f"CREATE VIRTUAL TABLE docs_vec USING vec0 (embedding float[{data.vectors.shape[1]}] "
                "distance_metric=cosine)"
            )
            with db:
                rows = [(i + 1, data.texts[i], data.tags[i]) for i in range(data.size)]
                db.executemany("INSERT INTO docs VALUES (?, ?, ?)", rows)
                db.executemany("INSERT INTO docs_fts (rowid, text, tags) VALUES (?, ?, ?)", rows)
                db.executemany(
                    "INSERT INTO docs_vec (rowid, embedding) VALUES (?, ?)",
                    ((i + 1, data.vectors[i].astype(np.float32).tobytes()) for i in range(data.size)),
                )
            db.execute("INSERT INTO docs_fts (docs_fts) VALUES ('optimize')")
            db.close()
        built = time.perf_counter() - started
    db = connect(folder / "store.db")

    def texts(ids: Sequence[int]) -> list[int]:
        if ids:
            marks = ", ".join("?" * len(ids))
            db.execute(f"SELECT id, text FROM docs WHERE id IN ({marks})", list(ids)).fetchall()
        return list(ids)

    def knn(qv: np.ndarray, k: int) -> list[int]:
        sql = "SELECT rowid FROM docs_vec WHERE embedding MATCH ? AND k = ? ORDER BY distance"
        return [row[0] for row in db.execute(sql, (qv.astype(np.float32).tobytes(), k))]

    def vector(query: str, qv: np.ndarray) -> list[int]:
        return texts(knn(qv, 10))

    def hybrid(query: str, qv: np.ndarray) -> list[int]:
        match = stop_word_match(query)
        lexical = []
        if match is not None:
            sql = "SELECT rowid FROM docs_fts WHERE docs_fts MATCH ? ORDER BY bm25(docs_fts) LIMIT ?"
            lexical = [row[0] for row in db.execute(sql, (match, data.pool))]
        return texts(rrf(knn(qv, data.pool), lexical)[:10])

    return Engine("sqlite-vec", {SQLITE_VEC: vector, SQLITE_VEC_HYBRID: hybrid}, db.close, built)


def lancedb(data: Data, folder: Path) -> Engine:
    import lancedb as lance
    import pyarrow as pa

    built = None
    if not folder.is_dir():
        started = time.perf_counter()
        with building(folder) as staging:
            db = lance.connect(str(staging))
            dim = data.vectors.shape[1]
            table = pa.table(
                {
                    "id": pa.array(range(1, data.size + 1), pa.int64()),
                    "text": pa.array(data.texts),
                    "vector": pa.FixedSizeListArray.from_arrays(pa.array(data.vectors.astype(np.float32).ravel()), dim),
                }
            )
            created = db.create_table("memories", data=table)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # create_fts_index is deprecated for create_index(FTS())
                created.create_fts_index("text")
        built = time.perf_counter() - started
    table = lance.connect(str(folder)).open_table("memories")

    def ids(found: Any) -> list[int]:
        return [
            int(i) for i in found.distance_type("cosine").select(["id", "text"]).limit(10).to_arrow()["id"].to_pylist()
        ]

    def vector(query: str, qv: np.ndarray) -> list[int]:
        return ids(table.search(qv, vector_column_name="vector"))

    def hybrid(query: str, qv: np.ndarray) -> list[int]:
        return ids(table.search(query_type="hybrid", vector_column_name="vector").vector(qv).text(query))

    return Engine("LanceDB", {LANCE: vector, LANCE_HYBRID: hybrid}, build_s=built)


PEERS: dict[str, Callable[[Data, Path], Engine]] = {"chroma": chroma, "sqlite-vec": sqlite_vec, "lancedb": lancedb}


@contextmanager
def ranking_timer(store: Any) -> Iterator[Any]:
    """bench/fixed_cost.py's timer of hydration and ranking (the pipeline's functions wrapped
    where they are looked up), unwrapped again when the block ends."""
    import fixed_cost

    import memsearch.retrieval.pipeline as pipeline

    timer = fixed_cost.Timed()
    saved: list[tuple[Any, str, bool, Any]] = []

    def wrap(owner: Any, name: str, *, inner: bool = False) -> None:
        saved.append((owner, name, name in vars(owner), vars(owner).get(name)))
        timer.wrap(owner, name, inner=inner)

    for name in ("build_candidates", "fuse", "select"):
        wrap(pipeline, name)
    wrap(pipeline.SearchRun, "query_facts")
    columns = getattr(pipeline, "ranking", None)
    if columns is not None:
        wrap(columns, "rank_columns")
        wrap(columns.LazyRanked, "_upto")
    wrap(store, "cosines", inner=True)
    try:
        yield timer
    finally:
        for owner, name, had, original in reversed(saved):
            if had:
                setattr(owner, name, original)
            elif name in vars(owner):
                delattr(owner, name)


def memsearch_engine(store_path: Path, data: Data, encoder_info: Any) -> tuple[Engine, Any]:
    """memsearch's three modes and the floor on its store; (engine, the hybrid search's store: the
    ranking timer wraps it)."""
    import fixed_cost

    from memsearch.api import Memsearch
    from memsearch.retrieval.pipeline import SearchRequest

    # One Memsearch (one store object) per mode, as bench/fixed_cost.py: a store keeps its last
    # vector and lexical answers for the next leg asking the same question, and taking turns the
    # modes ask the same query one after another, which a user's distinct searches would not.
    given = GivenQueries(encoder_info, data.queries, data.query_vectors)
    searchers = {mode: Memsearch(store_path, encoder=given) for mode in ("hybrid", "lexical", "vector")}
    store: Any = searchers["hybrid"].store()  # its vector index and raw connection, for the floor

    def close() -> None:
        for searcher in searchers.values():
            searcher.close()

    engine = Engine("memsearch", close=close)

    def search(mode: str) -> Answer:
        def answer(query: str, qv: np.ndarray) -> list[int]:
            outcome = searchers[mode].search(SearchRequest(query, k=10, mode=mode, touch=False))
            engine.legs[mode] = ", ".join(f"{leg} {how}" for leg, how in sorted(outcome.vector_engines.items()))
            return [candidate.id for candidate in outcome.results]

        return answer

    matrix = np.ascontiguousarray(store.vector_index().matrix)

    def floor(query: str, qv: np.ndarray) -> list[int]:
        fixed_cost.floor_search(matrix, store._db, qv, query, data.pool)  # raw SQL, by design
        return []

    engine.ops = {MS_VECTOR: search("vector"), MS_HYBRID: search("hybrid"), MS_LEXICAL: search("lexical"), FLOOR: floor}
    return engine, store


def load_data(size: int, seed: int, out: Path, now: datetime, queries: Sequence[str], encoder: Any) -> Data:
    from memsearch.embedding import encode_queries
    from memsearch.profiles import load_profile

    records = bench.corpus(size, seed, now)
    texts = [r["text"] for r in records]
    return Data(
        size=size,
        texts=texts,
        tags=[" ".join(r.get("tags", [])) for r in records],
        vectors=bench.corpus_embeddings(texts, seed, out, encoder),
        queries=list(queries),
        query_vectors=encode_queries(encoder, list(queries)),
        pool=load_profile("default").pool.size(10),
    )


def recall_at_10(data: Data) -> Callable[[int, Sequence[int]], float]:
    """recall@10 of an answer to query n against exact cosine search over the same vectors: the
    share of its ten that score at least the exact tenth (a tie with it counts: the generated
    corpus repeats some texts, so equal vectors straddle the tenth place)."""
    scores = data.query_vectors @ data.vectors.T
    tenth = -np.partition(-scores, 9, axis=1)[:, 9]

    def recall(n: int, ids: Sequence[int]) -> float:
        return sum(1 for i in ids[:10] if scores[n, i - 1] >= tenth[n] - 1e-5) / 10

    return recall


def bench_peers(
    size: int,
    store_path: Path,
    queries: Sequence[str],
    seed: int,
    out: Path,
    now: datetime,
    warm: int = 5,
    encoder: Any = None,
) -> tuple[list[bench.Figure], list[str]]:
    """The interleaved run at one size on bench.py's store of `size` memories of the seed's corpus
    (made with `encoder`, default the bundled model): (figures, the peers skipped and why)."""
    from memsearch.embedding import load_encoder, resolve_model

    load_before = Path("/proc/loadavg").read_text().strip()
    encoder = encoder or load_encoder(resolve_model())
    data = load_data(size, seed, out, now, queries, encoder)
    engines: list[Engine] = []
    skipped: list[str] = []
    for name, make in PEERS.items():
        try:
            folder = peer_folder(out, name, seed, size)
            if not folder.is_dir():
                bench.log(f"  building the {name} store of {size} memories (cached for later runs)")
            engines.append(make(data, folder))
        except ImportError as error:
            skipped.append(f"{name}: {SKIPPED} ({error})")
            bench.log(f"  {name} {SKIPPED}")
    mine, store = memsearch_engine(store_path, data, encoder.info)
    engines.insert(0, mine)
    ops = [(engine, name, answer) for engine in engines for name, answer in engine.ops.items()]
    times: dict[str, list[float]] = {name: [] for _, name, _ in ops}
    recalls: dict[str, list[float]] = {name: [] for _, name, _ in ops}
    rank: list[float] = []
    recall = recall_at_10(data)
    try:
        for query, qv in zip(data.queries[:warm], data.query_vectors[:warm], strict=True):
            for _, _, answer in ops:  # untimed: indexes loaded, caches warm
                answer(query, qv)
        with ranking_timer(store) as timer:
            for n, (query, qv) in enumerate(zip(data.queries, data.query_vectors, strict=True)):
                turn = ops[n % len(ops) :] + ops[: n % len(ops)]  # the order rotates query by query
                for _, name, answer in turn:
                    timer.total = timer.cpu = 0.0
                    started = time.perf_counter()
                    ids = answer(query, qv)
                    times[name].append((time.perf_counter() - started) * 1000)
                    if name == MS_HYBRID:
                        rank.append(timer.total * 1000)
                    if name in (MS_VECTOR, CHROMA, SQLITE_VEC, LANCE):
                        recalls[name].append(recall(n, ids))
    finally:
        for engine in engines:
            engine.close()
    label = bench.label(size)
    figures = [
        bench.Figure(
            f"peers: {name}, {label}",
            "ms",
            values,
            note=(
                ("its ranked top 10's recall@10 against exact cosine " if name == MS_VECTOR else "recall@10 ")
                + f"{statistics.mean(recalls[name]):.3f}"
            )
            if recalls[name]
            else "",
            extra={"peer_op": name, "size": size},
        )
        for name, values in times.items()
    ]
    figures.append(bench.Figure(f"peers: {MS_RANK}, {label}", "ms", rank, extra={"peer_op": MS_RANK, "size": size}))
    modes = {MS_VECTOR: "vector", MS_HYBRID: "hybrid"}
    for fig in figures:
        legs = mine.legs.get(modes.get(fig.extra["peer_op"], ""))
        if legs:
            fig.note = (fig.note + "; " if fig.note else "") + f"vector legs: {legs}"
        if recalls.get(fig.extra["peer_op"]):
            fig.extra["recall_at_10"] = statistics.mean(recalls[fig.extra["peer_op"]])
    for engine in engines:
        if engine.build_s is not None:
            figures.append(bench.Figure(f"peers: {engine.name} store build, {label} (one-off)", "s", [engine.build_s]))
    load = {"loadavg_before": load_before, "loadavg_after": Path("/proc/loadavg").read_text().strip()}
    for fig in figures:
        fig.extra.update(load)
    by_op = {fig.extra.get("peer_op"): fig for fig in figures}
    for name, beside in ((MS_VECTOR, (CHROMA, SQLITE_VEC, LANCE)), (MS_HYBRID, (SQLITE_VEC_HYBRID, LANCE_HYBRID))):
        for peer in beside:
            if peer in by_op:
                by_op[name].extra[f"over {peer}"] = by_op[name].median / by_op[peer].median
    by_op[MS_HYBRID].extra["over floor"] = by_op[MS_HYBRID].median / by_op[FLOOR].median
    return figures, skipped


# -- issue 32's goals ----------------------------------------------------------------------------


@dataclass
class Goal:
    goal: str
    figure: float | None = None  # the figure's median
    beside: float | None = None  # its floor's or peer's
    beside_name: str = ""
    limit: float | None = None  # the goal: ratio <= limit (or, without `beside`, figure <= limit)
    unit: str = "ms"
    where: str = ""  # why there is no figure: the script that measures it

    @property
    def measured(self) -> bool:
        """The figure, and for a goal judged beside a floor or peer (`beside_name`), that too."""
        return self.figure is not None and (self.beside is not None or not self.beside_name)

    @property
    def ratio(self) -> float | None:
        if self.figure is None or self.beside is None:
            return None
        return self.figure / self.beside

    @property
    def met(self) -> bool | None:
        if self.limit is None or not self.measured:
            return None
        return (self.ratio if self.beside is not None else self.figure) <= self.limit  # type: ignore[operator]


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return ""
    return f"{value * 1000:.0f} ms" if unit == "s" else f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms"


def goal_rows(figures: Sequence[bench.Figure]) -> list[Goal]:
    """Issue 32's goals, each with what this run measured of it (or where it is measured)."""

    def peer(op: str, size: int) -> float | None:
        for fig in figures:
            if fig.extra.get("peer_op") == op and fig.extra.get("size") == size:
                return fig.median
        return None

    def named(name: str) -> float | None:
        return next((fig.median for fig in figures if fig.name == name), None)

    goals = [
        Goal("hydration + ranking ≤ 2 ms at 10k", peer(MS_RANK, 10000), limit=2.0, where="peers at 10k"),
    ]
    for size in (10000, 100000):
        goals.append(
            Goal(
                f"in-process hybrid ≤ 1.5× the stop-word floor at {bench.label(size)}",
                peer(MS_HYBRID, size),
                peer(FLOOR, size),
                "stop-word floor",
                1.5,
                where=f"peers at {bench.label(size)}",
            )
        )
    goals.append(
        Goal("in-process hybrid ≤ 1.5× the stop-word floor at 1M", where="bench/fixed_cost.py --sizes 1000000")
    )
    goals.append(
        Goal(
            "vector mode at 100k within 2× Chroma's HNSW",
            peer(MS_VECTOR, 100000),
            peer(CHROMA, 100000),
            "Chroma HNSW",
            2.0,
            where="peers at 100k (chromadb installed)",
        )
    )
    for size in (10000, 100000):
        vector, lexical = peer(MS_VECTOR, size), peer(MS_LEXICAL, size)
        goals.append(
            Goal(
                f"hybrid within 1.5× of its vector and lexical legs' sum at {bench.label(size)}",
                peer(MS_HYBRID, size),
                None if vector is None or lexical is None else vector + lexical,
                "vector mode + lexical mode",
                1.5,
                where=f"peers at {bench.label(size)}",
            )
        )
    for size, peer_op in ((s, p) for s in (10000, 100000) for p in (SQLITE_VEC_HYBRID, LANCE_HYBRID)):
        goals.append(
            Goal(
                f"hybrid at {bench.label(size)} beside {peer_op.split(' (')[0]} (information)",
                peer(MS_HYBRID, size),
                peer(peer_op, size),
                peer_op,
                where=f"peers at {bench.label(size)}",
            )
        )
    goals.append(
        Goal(
            "approximate index recall@10 ≥ 0.98 against exact (LoCoMo-like text)",
            where="bench/ann_scale.py --text 100000",
        )
    )
    goals.append(Goal("recording accesses never slows another connection", where="bench/shared_store.py"))
    goals.append(Goal("a delete with secure removal ≤ 20 ms at 100k", where="bench/sqlite_driver.py"))
    million = next(
        (fig for fig in figures if fig.name.startswith("API search hybrid k=10") and "generated" in fig.name), None
    )
    goals.append(
        Goal(
            "hybrid p50 ≤ 40 ms in-process at 1M",
            None if million is None else million.median,
            limit=40.0,
            where="bench.py --million",
        )
    )
    goals.append(Goal("lexical p50 ≤ 40 ms in-process at 1M", where="bench/lexical_scale.py --size 1000000 --api"))
    numpy_floor = named(bench.NUMPY_FLOOR)
    hybrid = "CLI search --mode hybrid in-process, 10k (process)"  # --no-server (bench.py's startup part)
    served = "CLI search through the autoserved `memsearch serve`, 10k (process)"
    for name, what, limit in (
        (
            hybrid if named(hybrid) is not None else "CLI search --mode hybrid, 10k (process)",
            "fresh `memsearch search`, hybrid ≤ 1.5× `import numpy`",
            1.5,
        ),
        ("CLI search --mode lexical, 10k (process)", "fresh `memsearch search`, lexical ≤ 1.2× `import numpy`", 1.2),
        (
            served if named(served) is not None else "CLI search through `memsearch serve`, 10k (process)",
            "a search kept warm (serve) ≤ 1× `import numpy`",
            1.0,
        ),
    ):
        goals.append(
            Goal(
                what, named(name), numpy_floor, "python -c 'import numpy'", limit, "s", "bench.py (startup, cli-search)"
            )
        )
    return goals


def render_goals(goals: Sequence[Goal]) -> str:
    lines = [
        "issue 32's goals (medians of this run; ratio = figure / floor or peer):",
        "",
        "| goal | figure | floor or peer | ratio | goal | met |",
        "|---|---|---|---|---|---|",
    ]
    for goal in goals:
        if not goal.measured:
            lines.append(f"| {goal.goal} | not measured here: {goal.where} | | | | |")
            continue
        beside = f"{goal.beside_name} {_fmt(goal.beside, goal.unit)}" if goal.beside is not None else ""
        ratio = "" if goal.ratio is None else f"{goal.ratio:.2f}×"
        limit = (
            "" if goal.limit is None else (f"≤ {goal.limit:g}×" if goal.beside is not None else f"≤ {goal.limit:g} ms")
        )
        met = {None: "info", True: "met", False: "not met"}[goal.met]
        lines.append(f"| {goal.goal} | {_fmt(goal.figure, goal.unit)} | {beside} | {ratio} | {limit} | {met} |")
    return "\n".join(lines)


def goals_json(goals: Sequence[Goal]) -> list[dict[str, Any]]:
    return [
        {
            "goal": g.goal,
            "figure": g.figure,
            "beside": g.beside,
            "beside_name": g.beside_name,
            "ratio": g.ratio,
            "limit": g.limit,
            "unit": g.unit,
            "met": g.met,
            "where": None if g.figure is not None else g.where,
        }
        for g in goals
    ]


def quiet_peers() -> None:
    """The peers' own chatter off: Chroma's telemetry, Lance's warnings on stderr."""
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("LANCE_LOG", "error")
    os.environ.setdefault("LANCEDB_LOG", "error")  # lancedb's scanner warns on every search otherwise
    warnings.filterwarnings("ignore", category=DeprecationWarning, module="lancedb")
