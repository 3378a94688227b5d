"""Vectors at 100k: what the approximate index (memsearch/store/ann.py's usearch HNSW) costs and
finds against exact search, to choose where it starts paying (ann.DEFAULT_THRESHOLD) and its
parameters.

On the vectors of bench.py's generated store (clustered, 384-d; `--size`), with FixedEncoder's
query vectors (bench/shared_store.py): the index's build time for each connectivity, then for each
search beam (expansion) the time of one index search beside the exact product (numpy, one BLAS
thread: the floor), and recall@10 of the candidates re-scored exactly as store.vectors'
approximate_top does (the index asked for 1.5 x 10 + 10 of them) against the exact top 10.
Run: python bench/ann_scale.py [--size 100000] [--queries 200]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--connectivity", default="16")
    parser.add_argument("--expansion", default="64,128,256,768")
    parser.add_argument("--out", type=Path, default=HERE / "out")
    args = parser.parse_args()
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
    print(f"load before: {Path('/proc/loadavg').read_text().split()[:3]}", flush=True)
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
    print(f"load after: {Path('/proc/loadavg').read_text().split()[:3]}", flush=True)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
