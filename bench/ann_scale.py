"""Vectors at 100k: what the approximate index (memsearch/store/ann.py's usearch HNSW) costs and
finds against exact search, to choose where it starts paying (ann.DEFAULT_THRESHOLD) and its
parameters.

On the vectors of bench.py's generated store (clustered, 384-d; `--size`), with FixedEncoder's
query vectors (bench/shared_store.py): the index's build time for each connectivity, then for each
search beam (expansion) the time of one index search beside the exact product (numpy, one BLAS
thread: the floor), and recall@10 of the candidates re-scored exactly as store.vectors'
approximate_top does (the index asked for 1.5 x 10 + 10 of them) against the exact top 10.
Run: python bench/ann_scale.py [--size 100000] [--queries 200]

`--text 20000,50000,100000`: instead, text vectors (LoCoMo-like sentences: bench.py's corpus
generator, embedded with the bundled model, cached in bench/out/ like bench.py's) at each size (a
prefix of the largest), with bench.py's queries embedded the same way: the vector leg as a store
runs it in process (memsearch.store.vectors: `vector_top` exactly, `approximate_top` through the
index as built by memsearch.store.ann, candidates re-scored exactly), its p50 and recall@10 against
exact for each search beam (by ids, and tie-aware: a memory scored as the 10th counts as found, the
corpus repeats texts whose equal scores exact search orders by id), and the index's build time.
Every timing with one BLAS thread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))


def loadavg() -> list[str]:
    """The load averages over 1, 5 and 15 minutes."""
    return Path("/proc/loadavg").read_text().split()[:3]


def finish(report: dict[str, object]) -> int:
    """Print the load after a `--text` run and its whole report as JSON."""
    report["load_after"] = loadavg()
    print(f"load after: {report['load_after']}", flush=True)
    print(json.dumps(report))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--connectivity", default="16")
    parser.add_argument("--expansion", default="64,128,256,768")
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--text", default="", help="sizes (comma-separated): text vectors, see above")
    parser.add_argument("--expansion-add", type=int, default=0, help="with --text: the build beam (default ann's)")
    parser.add_argument("--search", action="store_true", help="with --text: in-process vector-mode searches")
    args = parser.parse_args()
    if args.text and args.search:
        return text_searches([int(n) for n in args.text.split(",")], args)
    if args.text:
        return text_sizes([int(n) for n in args.text.split(",")], args)
    from shared_store import NOW, FixedEncoder
    from threadpoolctl import threadpool_limits
    from usearch.index import Index

    import bench
    from memsearch.store.sqlite import SQLiteStore

    db, _ = bench.build_generated_store(args.size, 42, args.out, NOW)
    store = SQLiteStore.open(db)
    ids, matrix = store.all_vectors()
    matrix = np.ascontiguousarray(matrix, np.float32)
    encoder = FixedEncoder(store.embedding_model())
    store.close()
    qs = bench.queries(args.queries, 42, bench.corpus(10_000, 42, NOW))
    queries = encoder.encode(qs)
    print(f"load before: {loadavg()}", flush=True)
    exact_ms, truth = [], []
    with threadpool_limits(1):
        for q in queries:
            started = time.perf_counter()
            scores = matrix @ q
            top = np.argpartition(-scores, 10)[:10]
            exact_ms.append((time.perf_counter() - started) * 1000)
            truth.append(set(ids[top].tolist()))
    report: dict[str, object] = {"size": int(ids.size), "exact_ms": statistics.median(exact_ms)}
    for connectivity in (int(c) for c in args.connectivity.split(",")):
        index = Index(ndim=matrix.shape[1], metric="ip", dtype="f16", connectivity=connectivity, expansion_add=64)
        started = time.perf_counter()
        index.add(ids.astype(np.uint64), matrix, threads=2)
        build_s = time.perf_counter() - started
        rows = {int(i): n for n, i in enumerate(ids.tolist())}
        for expansion in (int(e) for e in args.expansion.split(",")):
            index.expansion_search = expansion
            ann_ms, recalls = [], []
            for q, want in zip(queries, truth, strict=True):
                started = time.perf_counter()
                found = np.asarray(index.search(q, 25, threads=1).keys, np.int64)
                ann_ms.append((time.perf_counter() - started) * 1000)
                picked = [rows[int(i)] for i in found]
                rescored = matrix[picked] @ q
                best = {int(found[j]) for j in np.argsort(-rescored)[:10]}
                recalls.append(len(best & want) / 10)
            key = f"M{connectivity}_ef{expansion}"
            report[key] = {
                "build_s": build_s,
                "ann_ms": statistics.median(ann_ms),
                "recall_at_10": statistics.mean(recalls),
                "exact_over_ann": statistics.median(exact_ms) / statistics.median(ann_ms),
            }
            print(key, json.dumps(report[key]), flush=True)
    print(f"load after: {loadavg()}", flush=True)
    print(json.dumps(report))
    return 0


def text_sizes(sizes: list[int], args: argparse.Namespace) -> int:
    import re

    from shared_store import NOW
    from threadpoolctl import threadpool_limits

    import bench
    from memsearch.embedding import load_encoder, resolve_model
    from memsearch.store import ann
    from memsearch.store.vectors import VectorIndex, approximate_top, vector_top

    ann.CONNECTIVITY = int(args.connectivity.split(",")[0])
    ann.EXPANSION_ADD = args.expansion_add or ann.EXPANSION_ADD
    records = bench.corpus(max(sizes), 42, NOW)
    encoder = load_encoder(resolve_model())
    model = re.sub(r"[^\w.-]+", "_", encoder.info.name.rsplit("/", 1)[-1])
    every = bench.embeddings(
        [r["text"] for r in records], args.out / f"embeddings-g{bench.GENERATOR_VERSION}-s42-{model}", encoder
    )
    queries = encoder.encode(bench.queries(args.queries, 42, records[:10_000]))
    report: dict[str, object] = {"load_before": loadavg()}
    report["graph"] = {"connectivity": ann.CONNECTIVITY, "expansion_add": ann.EXPANSION_ADD}
    print(f"load before: {report['load_before']}; graph {report['graph']}", flush=True)
    for size in sizes:
        index = VectorIndex(ids=np.arange(1, size + 1, dtype=np.int64), matrix=np.ascontiguousarray(every[:size]))
        exact_ms, truth = [], []
        with threadpool_limits(1):
            for q in queries:
                started = time.perf_counter()
                top = vector_top(index, q, 10)
                exact_ms.append((time.perf_counter() - started) * 1000)
                truth.append(({i for i, _ in top}, top[-1][1]))
            folder = args.out / "ann-text"
            folder.mkdir(parents=True, exist_ok=True)
            started = time.perf_counter()
            built = ann.build_index(folder / f"n{size}.hnsw", index)
            build_s = time.perf_counter() - started
            row: dict[str, object] = {"exact_ms": statistics.median(exact_ms), "build_s": build_s}
            for expansion in (int(e) for e in args.expansion.split(",")):
                ann.EXPANSION_SEARCH = expansion
                ann_ms, recalls, tied = [], [], []
                for q, want in zip(queries, truth, strict=True):
                    started = time.perf_counter()
                    found = approximate_top(index, built, q, 10)
                    ann_ms.append((time.perf_counter() - started) * 1000)
                    ids_found = {i for i, _ in found or []}
                    recalls.append(len(ids_found & want[0]) / 10)
                    # Tie-aware: a memory whose exact score equals the 10th's (a repeated text) is as right.
                    tied.append(sum(1 for _, score in found or [] if score >= want[1] - 1e-6) / 10)
                row[f"ef{expansion}"] = {
                    "ann_ms": statistics.median(ann_ms),
                    "ratio_to_exact": statistics.median(ann_ms) / statistics.median(exact_ms),
                    "recall_at_10": statistics.mean(recalls),
                    "min_recall": min(recalls),
                    "recall_at_10_ties": statistics.mean(tied),
                    "min_recall_ties": min(tied),
                }
        report[str(size)] = row
        print(size, json.dumps(row), flush=True)
    return finish(report)


def text_searches(sizes: list[int], args: argparse.Namespace) -> int:
    """`--text N --search`: bench.py's store of N memories (the same text vectors), searched in
    process in vector mode (k=10) through `Memsearch.search`, exactly and through the index in
    turns (the store's threshold moved between them), after the index is made as a bulk write
    makes it (`Store.prepare_search_indexes`, timed)."""
    from shared_store import NOW

    import bench
    from memsearch.api import Memsearch
    from memsearch.embedding import load_encoder, resolve_model
    from memsearch.retrieval.pipeline import SearchRequest
    from memsearch.store.sqlite import SQLiteStore

    encoder = load_encoder(resolve_model())
    texts = bench.queries(args.queries, 42, bench.corpus(10_000, 42, NOW))
    precomputed = bench.Precomputed(encoder, texts, encoder.encode(texts))
    report: dict[str, object] = {"load_before": loadavg()}
    print(f"load before: {report['load_before']}", flush=True)
    for size in sizes:
        path, _ = bench.build_store(size, 42, args.out, NOW)
        with Memsearch(path, encoder=precomputed) as ms:
            store = ms.store()
            assert isinstance(store, SQLiteStore)
            store.ann_threshold = 1
            started = time.perf_counter()
            store.prepare_search_indexes()
            build_s = time.perf_counter() - started
            times: dict[str, list[float]] = {"exact": [], "index": []}
            for turn in range(2):  # a warm-up round, then the measured one
                for query in texts:
                    for engine, threshold in (("exact", size + 1), ("index", 1)):
                        store.ann_threshold = threshold
                        started = time.perf_counter()
                        outcome = ms.search(SearchRequest(query, k=10, mode="vector", touch=False))
                        if turn:
                            times[engine].append((time.perf_counter() - started) * 1000)
                        assert set(outcome.vector_engines.values()) == {engine}, outcome.vector_engines
        row = {
            "prepare_s": build_s,
            "exact_p50_ms": statistics.median(times["exact"]),
            "index_p50_ms": statistics.median(times["index"]),
            "index_over_exact": statistics.median(times["index"]) / statistics.median(times["exact"]),
        }
        report[str(size)] = row
        print(size, json.dumps(row), flush=True)
    return finish(report)


if __name__ == "__main__":
    sys.exit(main())
