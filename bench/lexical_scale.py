"""The lexical leg at 100k and 1M memories: FTS5's bm25 top-k against engines that stop early,
to choose how a large SQLite store answers a lexical query (memsearch/store/lexical_index.py).

The store: a full-text table exactly as the SQLite store's (memsearch.store.fts: its columns,
its tokenizer, each row made by fts_row), of bench.py's 10k generated memories repeated to the
size as bench.py's generated million store does (`(#i)` serial appended), each copy with every
word dropped with probability 0.1 (copies then differ in their words and lengths, so a top 10 is
not a hundred-way tie). Built once into bench/out/stores (`nice -n 10` it: it takes minutes).

Queries: bench.queries (60% natural language, 40% with an exact identifier), as LexicalQuery.of
reads them (stop words dropped). Each engine answers the top 10 of every query over everything;
figures are medians (p50) and p95 in ms, one engine after the other on the same queries, with
the load before and after. Agreement: the share of FTS5's top 10 each engine returns (ids), and
the share of queries whose ten scores equal FTS5's to 1e-9 relative (ties between equal scores
may order ids differently: FTS5 does not say which of two equal scores comes first).

Engines:
- fts5: the store's query (bm25 with its column weights, ORDER BY rank LIMIT k);
- fts5-match: the same MATCH counting rows, no ranking (what matching alone costs);
- impact: memsearch.store.lexical_index (numpy, FTS5's bm25 exactly, MaxScore early stop);
- bm25s: bm25s's precomputed sparse score matrix over the same tokens (its own BM25 formula:
  document length is text + tags only; robertson idf like FTS5's);
- tantivy: tantivy's block-max WAND over the same tokens joined by spaces (one field, its own
  BM25: Lucene idf, lengths quantized to a byte).

Run: nice -n 10 python bench/lexical_scale.py --size 100000 [--engines fts5,impact,bm25s,tantivy]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

STORE_VERSION = 1  # bump when the generated texts change


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def store_path(size: int, out: Path) -> Path:
    return out / "stores" / f"lexical-v{STORE_VERSION}-s42-n{size}.db"


def varied_records(size: int) -> Iterator[dict[str, Any]]:
    """The memories of both stores, in order: bench.py's 10k corpus repeated, every copy past the
    first with about a tenth of its words dropped, each text ending in its serial number (a key
    too, so keys stay unique)."""
    from shared_store import NOW

    import bench

    base = bench.corpus(10_000, 42, NOW)
    rng = random.Random(5)
    for i in range(size):
        record = dict(base[i % len(base)])
        words = record["text"].split(" ")
        if i >= len(base):
            words = [w for w in words if rng.random() >= 0.1] or words[:1]
        record["text"] = f"{' '.join(words)} (#{i})"
        if record.get("key"):
            record["key"] = f"{record['key']}-{i}"
        yield record


def build_lexical_store(size: int, out: Path) -> Path:
    """The cached full-text store of `size` memories (see the module's doc)."""
    from memsearch.store.fts import FTS_COLUMNS, TOKENIZER, fts_row

    path = store_path(size, out)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_suffix(".building.db")
    staging.unlink(missing_ok=True)
    log(f"building {path.name}")
    started = time.perf_counter()
    records = varied_records(size)
    db = sqlite3.connect(staging, isolation_level=None)
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    db.execute(f"CREATE VIRTUAL TABLE memories_fts USING fts5 ({', '.join(FTS_COLUMNS)}, tokenize = '{TOKENIZER}')")
    marks = ", ".join("?" * (len(FTS_COLUMNS) + 1))
    insert = f"INSERT INTO memories_fts (rowid, {', '.join(FTS_COLUMNS)}) VALUES ({marks})"
    batch = 20_000
    for start in range(0, size, batch):
        rows = [
            (i + 1, *fts_row(record["text"], record.get("tags", []), "note", {}))
            for i, record in enumerate(islice(records, batch), start)
        ]
        db.execute("BEGIN")
        db.executemany(insert, rows)
        db.execute("COMMIT")
        if (start // batch) % 10 == 9:
            log(f"  {start + batch}/{size}")
    db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
    db.close()
    staging.replace(path)
    log(f"built {path.name} in {time.perf_counter() - started:.0f} s ({path.stat().st_size / 2**20:.0f} MB)")
    return path


def api_store_path(size: int, out: Path) -> Path:
    from bench import schema_key

    return out / "stores" / f"lexical-api-v{STORE_VERSION}-s42-n{size}-{schema_key()}.db"


def build_api_store(size: int, out: Path) -> Path:
    """A memsearch store of the same memories (no vectors: lexical search needs none), cached."""
    from shared_store import NOW

    from memsearch.models import NewMemory
    from memsearch.store.sqlite import SQLiteStore

    path = api_store_path(size, out)
    if path.is_file():
        return path
    staging = path.with_suffix(".building.db")
    for leftover in (staging, Path(f"{staging}-wal"), Path(f"{staging}-shm")):
        leftover.unlink(missing_ok=True)
    log(f"building {path.name}")
    started = time.perf_counter()
    records = varied_records(size)
    store = SQLiteStore.open(staging, create=True)
    batch = 20_000
    for start in range(0, size, batch):
        memories = [NewMemory.from_json(record) for record in islice(records, batch)]
        store.insert(memories, None, None, NOW)
        if (start // batch) % 10 == 9:
            log(f"  {start + batch}/{size}")
    store.close()
    staging.replace(path)
    for suffix in ("-wal", "-shm"):
        Path(f"{staging}{suffix}").unlink(missing_ok=True)
    log(f"built {path.name} in {time.perf_counter() - started:.0f} s")
    return path


def bench_api(size: int, out: Path, count: int, adds: int = 1000, deletes: int = 100) -> dict[str, Any]:
    """In-process lexical search through the API (Memsearch.search, mode lexical, k=10) on a copy
    of the memsearch store of `size` memories, in one run: FTS5's bm25 (the threshold above the
    size: the floor), the index from a fresh file (made by prepare_search_indexes, timed apart),
    then after `adds` single adds (one transaction each, as `memsearch add` makes them, with a
    search after each of the last 20: what a search after one add pays) and one delete of
    `deletes` memories, the index with those rows beside the file, and FTS5 again; each answer
    compared with FTS5's on the same state (ids and scores, ties aside)."""
    import shutil

    from shared_store import NOW

    import bench
    from memsearch.api import Memsearch
    from memsearch.models import NewMemory
    from memsearch.retrieval.pipeline import SearchRequest
    from memsearch.store.base import EVERYTHING as EVERYTHING_SCOPE
    from memsearch.store.sqlite import SQLiteStore
    from memsearch.text import LexicalQuery

    cached = build_api_store(size, out)
    path = out / "scratch" / f"lexical-api-{size}.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    for leftover in path.parent.glob(f"{path.name}*"):
        shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
    shutil.copyfile(cached, path)
    corpus = bench.corpus(10_000, 42, NOW)
    texts = bench.queries(count, 42, corpus)
    report: dict[str, Any] = {"size": size, "queries": len(texts), "adds": adds, "deletes": deletes}
    report["load_before"] = load()

    def run(name: str, threshold: int) -> list[list[tuple[int, float]]]:
        os.environ["MEMSEARCH_LEXICAL_THRESHOLD"] = str(threshold)
        with Memsearch(path) as ms:
            started = time.perf_counter()
            ms.search(SearchRequest("warm-up: where is the deploy config", k=10, mode="lexical"))
            first = time.perf_counter() - started
            times = []
            for text in texts:
                started = time.perf_counter()
                ms.search(SearchRequest(text, k=10, mode="lexical"))
                times.append((time.perf_counter() - started) * 1000)
            store = ms.store()
            assert isinstance(store, SQLiteStore)
            legs = [store.lexical_search(LexicalQuery.of(t), EVERYTHING_SCOPE, 10) for t in texts]
        report[name] = {"p50_ms": statistics.median(times), "p95_ms": float(np.percentile(times, 95)), "first_s": first}
        log(f"API lexical {name}: {json.dumps(report[name])} load {load()}")
        return [list(leg) for leg in legs]

    floor = run("fts5", 10 * size)
    os.environ["MEMSEARCH_LEXICAL_THRESHOLD"] = "1"
    store = SQLiteStore.open(path)
    started = time.perf_counter()
    store.prepare_search_indexes()
    report["file_build_s"] = time.perf_counter() - started
    store.close()
    fresh = run("index_fresh_file", 1)
    report["index_fresh_file"].update(agreement(floor, fresh))
    # The writes: single adds (a generation each), a search after each of the last 20, one delete.
    rng = random.Random(9)
    writer = SQLiteStore.open(path)
    reader = SQLiteStore.open(path)
    reader.lexical_threshold = 1
    query = LexicalQuery.of(texts[0])
    reader.lexical_search(query, EVERYTHING_SCOPE, 10)
    add_times, after_add = [], []
    for i in range(adds):
        record = corpus[rng.randrange(len(corpus))]
        words = [w for w in record["text"].split(" ") if rng.random() >= 0.2] or ["added"]
        started = time.perf_counter()
        memory = NewMemory(f"{' '.join(words)} (added #{i})", tags=tuple(record.get("tags", [])))
        writer.insert([memory], None, None, NOW)
        add_times.append((time.perf_counter() - started) * 1000)
        if i >= adds - 20:
            started = time.perf_counter()
            reader.lexical_search(LexicalQuery.of(texts[i % len(texts)]), EVERYTHING_SCOPE, 10)
            after_add.append((time.perf_counter() - started) * 1000)
    (highest,) = writer._db.execute("SELECT max(id) FROM memories").fetchone()
    doomed = rng.sample(range(1, highest + 1), deletes)
    started = time.perf_counter()
    writer.delete(doomed)
    report["delete_s"] = time.perf_counter() - started
    started = time.perf_counter()
    reader.lexical_search(query, EVERYTHING_SCOPE, 10)
    report["first_search_after_delete_ms"] = (time.perf_counter() - started) * 1000
    report["add_p50_ms"] = statistics.median(add_times)
    report["search_after_one_add_p50_ms"] = statistics.median(after_add)
    report["search_after_one_add_max_ms"] = max(after_add)
    (changed,) = writer._db.execute("SELECT count(*) FROM lexical_changes").fetchone()
    report["changed_rows"] = changed
    writer.close()
    reader.close()
    log(f"writes: {json.dumps({k: v for k, v in report.items() if not isinstance(v, dict)})}")
    changed_floor = run("fts5_after_writes", 10 * size)
    after = run("index_after_writes", 1)
    report["index_after_writes"].update(agreement(changed_floor, after))
    report["load_after"] = load()
    return report


def bench_queries(count: int) -> list[Any]:
    from shared_store import NOW

    import bench
    from memsearch.text import LexicalQuery

    return [LexicalQuery.of(q) for q in bench.queries(count, 42, bench.corpus(10_000, 42, NOW))]


Hits = list[tuple[int, float]]


def fts5_engine(db: sqlite3.Connection) -> Callable[[Any, int], Hits]:
    from memsearch.store.fts import FTS_COLUMNS, match_expression

    weights = ", ".join("1.0" if name in ("text", "tags", "grams") else "0.0" for name in FTS_COLUMNS)
    rank = f"bm25(memories_fts, {weights})"
    sql = f"SELECT rowid, -{rank} FROM memories_fts WHERE memories_fts MATCH ? ORDER BY {rank} LIMIT ?"

    def search(query: Any, k: int) -> Hits:
        expression = f"{{text tags}} : ({match_expression(query)})"
        return [(int(r), float(s)) for r, s in db.execute(sql, (expression, k))]

    return search


def fts5_match_engine(db: sqlite3.Connection) -> Callable[[Any, int], Hits]:
    from memsearch.store.fts import match_expression

    def search(query: Any, k: int) -> Hits:
        expression = f"{{text tags}} : ({match_expression(query)})"
        db.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?", (expression,)).fetchone()
        return []

    return search


def query_tokens(query: Any) -> list[str]:
    """The query's tokens as FTS5 reads its phrases (each phrase's tokens, in order)."""
    from memsearch.store.fts import FTS_TOKENIZER

    return [token for phrase in FTS_TOKENIZER.phrases(list(query.match_phrases)) for token in phrase]


def token_corpus(db: sqlite3.Connection) -> tuple[np.ndarray, list[list[str]]]:
    """Each row's tokens of text and tags (in FTS5's tokens), by rowid: what bm25s and tantivy index."""
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.v USING fts5vocab(main, memories_fts, instance)")
    rows: dict[int, list[str]] = {}
    for term, doc in db.execute("SELECT term, doc FROM temp.v WHERE col IN ('text', 'tags')"):
        rows.setdefault(doc, []).append(term)
    ids = np.array(sorted(rows), np.int64)
    return ids, [rows[int(i)] for i in ids]


def bm25s_engine(ids: np.ndarray, docs: list[list[str]]) -> tuple[Callable[[Any, int], Hits], dict[str, Any]]:
    import bm25s

    started = time.perf_counter()
    vocab: dict[str, int] = {}
    encoded = [[vocab.setdefault(t, len(vocab)) for t in doc] for doc in docs]
    retriever = bm25s.BM25(method="robertson", k1=1.2, b=0.75)
    retriever.index(bm25s.tokenization.Tokenized(ids=encoded, vocab=vocab), show_progress=False)
    built = time.perf_counter() - started
    matrix = retriever.scores
    size = sum(np.asarray(matrix[key]).nbytes for key in ("data", "indices", "indptr"))

    def search(query: Any, k: int) -> Hits:
        wanted = [vocab[t] for t in dict.fromkeys(query_tokens(query)) if t in vocab]
        if not wanted:
            return []
        scores = retriever.get_scores(wanted)
        top = np.argpartition(-scores, k)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(ids[i]), float(scores[i])) for i in top if scores[i] > 0]

    return search, {"build_s": built, "size_mb": size / 2**20}


def tantivy_engine(
    ids: np.ndarray, docs: list[list[str]], folder: Path
) -> tuple[Callable[[Any, int], Hits], dict[str, Any]]:
    import shutil

    import tantivy

    started = time.perf_counter()
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("body", stored=False, tokenizer_name="whitespace")
    builder.add_integer_field("id", stored=True, indexed=False)
    schema = builder.build()
    index = tantivy.Index(schema, path=str(folder))
    writer = index.writer(heap_size=200_000_000, num_threads=1)
    for memory_id, doc in zip(ids.tolist(), docs, strict=True):
        writer.add_document(tantivy.Document(body=" ".join(doc), id=memory_id))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    built = time.perf_counter() - started
    searcher = index.searcher()
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())

    def search(query: Any, k: int) -> Hits:
        tokens = list(dict.fromkeys(query_tokens(query)))
        if not tokens:
            return []
        terms = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", t)) for t in tokens]
        found = searcher.search(tantivy.Query.boolean_query(terms), k)
        out = []
        for score, address in found.hits:
            out.append((int(searcher.doc(address)["id"][0]), float(score)))
        return out

    return search, {"build_s": built, "size_mb": size / 2**20}


def impact_engine(db: sqlite3.Connection) -> tuple[Callable[[Any, int], Hits], dict[str, Any]]:
    from memsearch.store import lexical_index

    started = time.perf_counter()
    index = lexical_index.build_from_connection(db)
    built = time.perf_counter() - started

    fallback = fts5_engine(db)
    answered = [0, 0]

    def search(query: Any, k: int) -> Hits:
        hits = lexical_index.answer(index, db, query, k)
        answered[hits is None] += 1
        return fallback(query, k) if hits is None else hits

    return search, {"build_s": built, "size_mb": index.nbytes / 2**20, "answered": answered}


def measure(search: Callable[[Any, int], Hits], queries: Sequence[Any], k: int) -> tuple[list[float], list[Hits]]:
    search(queries[0], k)  # warm
    times, answers = [], []
    for query in queries:
        started = time.perf_counter()
        hits = search(query, k)
        times.append((time.perf_counter() - started) * 1000)
        answers.append(hits)
    return times, answers


def agreement(truth: Sequence[Hits], answers: Sequence[Hits]) -> dict[str, float]:
    overlap, same_scores = [], 0
    for want, got in zip(truth, answers, strict=True):
        if not want:
            continue
        overlap.append(len({i for i, _ in want} & {i for i, _ in got}) / len(want))
        a, b = [s for _, s in want], [s for _, s in got]
        if len(a) == len(b) and all(abs(x - y) <= 1e-9 * max(1.0, abs(x)) for x, y in zip(a, b, strict=True)):
            same_scores += 1
    return {"top10_overlap": statistics.mean(overlap), "same_scores": same_scores / max(1, len(overlap))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--engines", default="fts5,fts5-match,impact,bm25s,tantivy")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--api", action="store_true", help="in-process API lexical search on a memsearch store")
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    if args.api:
        if args.build_only:
            build_api_store(args.size, args.out)
            return 0
        api = bench_api(args.size, args.out, args.queries)
        target = args.json or (HERE / "results" / f"lexical-scale-api-{args.size}.json")
        target.write_text(json.dumps(api, indent=2) + "\n", encoding="utf-8")
        return 0
    path = build_lexical_store(args.size, args.out)
    if args.build_only:
        return 0
    engines = args.engines.split(",")
    queries = [q for q in bench_queries(args.queries) if q.match_phrases]
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    report: dict[str, Any] = {"size": args.size, "queries": len(queries), "k": args.k, "load_before": load()}
    log(f"{args.size} memories, {len(queries)} queries, load {load()}")
    truth_times, truth = measure(fts5_engine(db), queries, args.k)
    report["fts5"] = {"p50_ms": statistics.median(truth_times), "p95_ms": float(np.percentile(truth_times, 95))}
    log(f"fts5: p50 {report['fts5']['p50_ms']:.1f} ms")
    corpus: tuple[np.ndarray, list[list[str]]] | None = None
    for name in engines:
        if name == "fts5":
            continue
        extra: dict[str, Any] = {}
        rss_before = _rss()
        if name == "fts5-match":
            search = fts5_match_engine(db)
        elif name == "impact":
            search, extra = impact_engine(db)
        else:
            if corpus is None:
                started = time.perf_counter()
                corpus = token_corpus(db)
                report["token_corpus_s"] = time.perf_counter() - started
            if name == "bm25s":
                search, extra = bm25s_engine(*corpus)
            elif name == "tantivy":
                search, extra = tantivy_engine(*corpus, args.out / "scratch" / f"tantivy-{args.size}")
            else:
                raise SystemExit(f"no engine {name}")
        extra["rss_added_mb"] = (_rss() - rss_before) / 2**20
        times, answers = measure(search, queries, args.k)
        figure = {"p50_ms": statistics.median(times), "p95_ms": float(np.percentile(times, 95)), **extra}
        if name != "fts5-match":
            figure.update(agreement(truth, answers))
        report[name] = figure
        log(f"{name}: {json.dumps(figure)}")
        # the floor again, after each engine (the load moves)
    again, _ = measure(fts5_engine(db), queries, args.k)
    report["fts5_again_p50_ms"] = statistics.median(again)
    report["load_after"] = load()
    log(json.dumps(report))
    target = args.json or (HERE / "results" / f"lexical-scale-{args.size}.json")
    target.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
