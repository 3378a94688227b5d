"""The fixed cost of a search (issue 32): in-process search beside its stop-word floor.

One run, taking turns query by query, on generated stores (the 10k corpus's texts, clustered
random vectors, as `bench.py --million` builds them) of each `--sizes`:

- the floor: one numpy product over the store's vectors (and the top pool of it) plus one FTS5
  bm25 query of the query's words with stop words dropped, the query vector given;
- in-process hybrid, lexical and vector-mode searches (`Memsearch.search`, the default profile,
  k=10, `touch=False`: no access is written), the query vector given (an encoder that returns a
  fixed vector per query text, so no embedding is timed), each mode through its own store object
  (a store keeps its last vector and lexical answers: the modes must not share them); and hybrid
  over the lexical and vector-mode searches' sum (issue 32: within 1.5×);
- the hydration and ranking time of each hybrid search: the time spent building the candidates
  from the legs' hits (reading their rows, without the cosines' product), fusing, scoring and
  selecting them and reading the shown rows (the pipeline's functions timed from outside, so the
  same bench measures older code: run it with PYTHONPATH pointing at another checkout).

Each figure is a p50 in ms and its ratio to the floor measured in the same run; `cat
/proc/loadavg` is printed before and after.

    .venv/bin/python bench/fixed_cost.py --sizes 10000,100000 --queries 200 --json bench/results/x.json
    PYTHONPATH=/work/wt/speed-rank-before .venv/bin/python bench/fixed_cost.py ...   # older code
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench.py's corpus and stores (memsearch itself: the installed one or PYTHONPATH's)

import bench  # noqa: E402

NOW = datetime(2026, 6, 1, tzinfo=UTC)


class GivenVectors:
    """An encoder that embeds nothing: a fixed unit vector per text (drawn near the corpus's
    cluster centres, from the text's CRC), so the searches time everything but the embedding."""

    def __init__(self, info: Any) -> None:
        self.info = info
        self._centres = np.random.default_rng(7).normal(size=(1000, info.dim)).astype(np.float32)
        self._known: dict[str, np.ndarray] = {}

    def vector(self, text: str) -> np.ndarray:
        known = self._known.get(text)
        if known is None:  # made once a text (the bench asks before it times), then given
            rng = np.random.default_rng(zlib.crc32(text.encode()))
            row = self._centres[rng.integers(0, 1000)] + 0.6 * rng.normal(size=self.info.dim).astype(np.float32)
            known = self._known[text] = (row / np.linalg.norm(row)).astype(np.float32)
        return known

    def encode(self, texts: Sequence[str], *, progress: Any = None) -> np.ndarray:
        return np.stack([self.vector(text) for text in texts]) if texts else np.zeros((0, self.info.dim), np.float32)


class Timed:
    """Wall time spent in some functions (patched by name where they are looked up), summed per
    search; a call inside another timed one counts once, and the `inner` ones (the cosines'
    product inside the candidates' building) are taken off the time of the call they are in."""

    def __init__(self) -> None:
        self.total = 0.0  # wall seconds
        self.cpu = 0.0  # this thread's CPU seconds
        self.depth = 0

    def wrap(self, owner: Any, name: str, *, inner: bool = False) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return

        def timed(*args: Any, **kwargs: Any) -> Any:
            if inner and not self.depth:
                return original(*args, **kwargs)
            started, cpu = time.perf_counter(), time.thread_time()
            self.depth += 1
            try:
                return original(*args, **kwargs)
            finally:
                self.depth -= 1
                spent, spent_cpu = time.perf_counter() - started, time.thread_time() - cpu
                if inner:
                    self.total -= spent
                    self.cpu -= spent_cpu
                elif not self.depth:
                    self.total += spent
                    self.cpu += spent_cpu

        setattr(owner, name, timed)


STOP_WORD_FLOOR = "floor: numpy product + FTS5 bm25 (stop words dropped)"


def floor_search(matrix: np.ndarray, db: Any, vector: np.ndarray, query: str, pool: int) -> None:
    from memsearch.text import STOPWORDS, WORD

    scores = matrix @ vector
    top = np.argpartition(-scores, pool)[:pool]
    top[np.argsort(-scores[top])]
    words = [w for w in dict.fromkeys(WORD.findall(query.lower())) if w not in STOPWORDS]
    if words:
        match = "{text tags} : (" + " OR ".join('"' + w.replace('"', '""') + '"' for w in words) + ")"
        sql = (
            "SELECT rowid, -bm25(memories_fts) FROM memories_fts WHERE memories_fts MATCH ? "
            "ORDER BY bm25(memories_fts) LIMIT ?"
        )
        db.execute(sql, (match, pool)).fetchall()


def run_size(size: int, queries: Sequence[str], out: Path, warm: int) -> dict[str, Any]:
    import memsearch.retrieval.pipeline as pipeline
    from memsearch.api import Memsearch
    from memsearch.embedding import encode_queries
    from memsearch.profiles import load_profile
    from memsearch.retrieval.request import SearchRequest

    path, _ = bench.build_generated_store(size, 42, out, NOW)
    pool = load_profile("default").pool.size(10)
    with Memsearch(path) as probe:
        info = probe.store().embedding_model()
    encoder = GivenVectors(info)
    # One Memsearch (one store object) per mode: a store keeps its last vector and lexical
    # answers for the next leg that asks the same, which would otherwise hand the lexical and
    # vector-mode searches the hybrid search's answers to the same query.
    searchers = {mode: Memsearch(path, encoder=encoder) for mode in ("hybrid", "lexical", "vector")}
    store = searchers["hybrid"].store()
    matrix = np.ascontiguousarray(store.vector_index().matrix)
    db = store._db  # the floor is raw SQL, by design
    # Hydration + ranking, the pipeline's functions timed from outside: before, the candidates'
    # building (their rows), fusion, the query facts and selection; after, the ranking on columns
    # and the building of the shown records. The cosines' product is vector work, not counted.
    ranking = Timed()
    for name in ("build_candidates", "fuse", "select"):
        ranking.wrap(pipeline, name)
    ranking.wrap(pipeline.SearchRun, "query_facts")
    columns = getattr(pipeline, "ranking", None)  # the code that ranks on columns
    if columns is not None:
        ranking.wrap(columns, "rank_columns")
        ranking.wrap(columns.LazyRanked, "_upto")
    ranking.wrap(store, "cosines", inner=True)

    def search(query: str, mode: str) -> None:
        outcome = searchers[mode].search(SearchRequest(query, k=10, mode=mode, touch=False, as_of=NOW))
        if not outcome.results and mode != "lexical":  # the shown rows are read (a lexical one may find none)
            raise RuntimeError(f"no results for {query!r} ({mode})")

    for query in queries[:warm]:  # reads the vector cache, warms the page cache
        for mode in ("hybrid", "lexical", "vector"):
            search(query, mode)
    names = (STOP_WORD_FLOOR, "hybrid", "lexical", "vector", "rank")
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}  # this thread's CPU time: steadier on a busy machine
    for query in queries:  # taking turns, query by query
        vector = encoder.vector(query)
        encode_queries(encoder, [query])  # the vector the searches embed (with the model's query prefix), made now
        started, used = time.perf_counter(), time.thread_time()
        floor_search(matrix, db, vector, query, pool)
        times[STOP_WORD_FLOOR].append(time.perf_counter() - started)
        cpu[STOP_WORD_FLOOR].append(time.thread_time() - used)
        for mode in ("hybrid", "lexical", "vector"):
            ranking.total = ranking.cpu = 0.0
            started, used = time.perf_counter(), time.thread_time()
            search(query, mode)
            times[mode].append(time.perf_counter() - started)
            cpu[mode].append(time.thread_time() - used)
            if mode == "hybrid":
                times["rank"].append(ranking.total)
                cpu["rank"].append(ranking.cpu)
    for searcher in searchers.values():
        searcher.close()
    floor = statistics.median(times[STOP_WORD_FLOOR])
    floor_cpu = statistics.median(cpu[STOP_WORD_FLOOR])
    legs, legs_cpu = (
        statistics.median(found["hybrid"]) / (statistics.median(found["lexical"]) + statistics.median(found["vector"]))
        for found in (times, cpu)
    )
    return {
        "size": size,
        "pool": pool,
        "legs_ratio": legs,  # hybrid over the lexical and the vector-mode searches' sum
        "legs_cpu_ratio": legs_cpu,
        "figures": {
            name: {
                "p50_ms": statistics.median(times[name]) * 1000,
                "p90_ms": float(np.percentile(times[name], 90)) * 1000,
                "floor_ratio": statistics.median(times[name]) / floor,
                "cpu_p50_ms": statistics.median(cpu[name]) * 1000,
                "cpu_floor_ratio": statistics.median(cpu[name]) / floor_cpu,
            }
            for name in names
        },
    }


LABELS = {
    STOP_WORD_FLOOR: "stop-word floor",
    "hybrid": "hybrid (in-process, vector given)",
    "lexical": "lexical",
    "vector": "vector mode",
    "rank": "  hydration + ranking of a hybrid search",
}


def render(results: list[dict[str, Any]], load: tuple[str, str], code: str) -> str:
    lines = [f"memsearch: {code}", f"load before: {load[0]}", f"load after:  {load[1]}", ""]
    heads = [f"{r['size']:,}: p50 ms (× floor) | CPU ms (× floor's CPU)" for r in results]
    lines.append(f"| figure | {' | '.join(heads)} |")
    lines.append("|---|" + "---|---|" * len(results))
    for key, label in LABELS.items():
        cells = []
        for r in results:
            figure = r["figures"][key]
            cells.append(f"{figure['p50_ms']:.2f} ({figure['floor_ratio']:.2f}×)")
            cells.append(f"{figure['cpu_p50_ms']:.2f} ({figure['cpu_floor_ratio']:.2f}×)")
        lines.append(f"| {label} | {' | '.join(cells)} |")
    cells = [f"{r['legs_ratio']:.2f}× | {r['legs_cpu_ratio']:.2f}×" for r in results]
    lines.append(f"| hybrid ÷ (lexical + vector mode) | {' | '.join(cells)} |")
    return "\n".join(lines)


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warm", type=int, default=10)
    parser.add_argument("--out", type=Path, default=bench.DEFAULT_OUT)
    parser.add_argument("--json", type=Path, help="write the results here too")
    parser.add_argument("--label", default="", help="a name for the code measured (before, after)")
    args = parser.parse_args(argv)
    import memsearch

    code = f"{args.label} {Path(memsearch.__file__).parent}".strip()
    load_before = loadavg()
    base = bench.corpus(10_000, 42, NOW)
    queries = bench.queries(args.queries, 42, base)
    results = [run_size(int(size), queries, args.out, args.warm) for size in args.sizes.split(",")]
    load = (load_before, loadavg())
    text = render(results, load, code)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        document = {"code": code, "label": args.label, "load": list(load), "queries": args.queries, "results": results}
        args.json.write_text(json.dumps(document, indent=1) + "\n")
        args.json.with_suffix(".md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
