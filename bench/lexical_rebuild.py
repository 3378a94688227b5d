"""What a search pays when the rows changed since a large store's impact index file cross the
share over which a new file is due (memsearch/store/lexical_cache.py: SEARCH_REBUILD_SHARE),
in a long-lived process (a server, a library user) and in a one-shot one (a CLI command).

On a copy of bench/lexical_scale.py's API store of `--size` memories (built there and cached):
a fresh file (prepare_search_indexes, timed), a long-lived reader (`Memsearch`, lexical mode,
k = 10) warmed on it, then another store object adds `--share` of the store (6 % by default:
over the 5 %) in transactions of 500, as a library user or `serve` would without a bulk write's
end. Then the reader's first search (the one that finds the share crossed), its searches while
a new file is being made (none, before: that search made it), the time until the new file is
in use, and its searches after. Then a one-shot process's view of the same state: a fresh
`Memsearch` (CLI setting, background_work off, where the code has it) answering one search, and
closing after a write.

Each answer is compared with FTS5's on the same state (ids and scores). Runs against whatever
memsearch is on the path, so the code before the change can be measured the same way:
MEMSEARCH_BENCH_CODE=/path/to/old/checkout python bench/lexical_rebuild.py --size 100000

With --first-search: a warm process's first lexical searches on a store between WARM_THRESHOLD
and the default threshold that has no file yet (`--size 20000`): what the search that finds no
file pays (before: it made the file).

Run: nice -n 10 python bench/lexical_rebuild.py --size 100000 (--first-search --size 20000)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--share", type=float, default=0.06)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--first-search", action="store_true", help="a warm process's first lexical searches on a store without a file"
    )
    args = parser.parse_args()
    if args.first_search:
        return first_search(args)
    os.environ["MEMSEARCH_LEXICAL_THRESHOLD"] = "1"

    import lexical_scale
    from shared_store import NOW

    if os.environ.get("MEMSEARCH_BENCH_CODE"):  # another checkout's memsearch (the code before a change)
        assert not any(name.startswith("memsearch") for name in sys.modules)
        sys.path.insert(0, os.environ["MEMSEARCH_BENCH_CODE"])

    import bench
    import memsearch
    from memsearch.api import Memsearch
    from memsearch.models import NewMemory
    from memsearch.retrieval.pipeline import SearchRequest
    from memsearch.store.base import EVERYTHING
    from memsearch.store.sqlite import SQLiteStore
    from memsearch.text import LexicalQuery

    cached = lexical_scale.build_api_store(args.size, args.out)
    path = args.out / "scratch" / f"lexical-rebuild-{args.size}.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    for leftover in path.parent.glob(f"{path.name}*"):
        shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
    shutil.copyfile(cached, path)
    corpus = bench.corpus(10_000, 42, NOW)
    texts = bench.queries(args.queries, 42, corpus)
    code = str(Path(memsearch.__file__).parent.parent)
    report: dict[str, Any] = {"size": args.size, "share": args.share, "code": code, "load_before": load()}
    log(f"memsearch from {code}, load {load()}")

    store = SQLiteStore.open(path)
    started = time.perf_counter()
    store.prepare_search_indexes()
    report["file_build_s"] = time.perf_counter() - started
    store.close()

    def search(ms: Memsearch, text: str) -> float:
        started = time.perf_counter()
        ms.search(SearchRequest(text, k=10, mode="lexical"))
        return (time.perf_counter() - started) * 1000

    def agrees(ms: Memsearch) -> float:
        """The share of queries whose lexical leg is FTS5's (ids and scores)."""
        store = ms.store()
        assert isinstance(store, SQLiteStore)
        same = 0
        for text in texts:
            query = LexicalQuery.of(text)
            got = list(store.lexical_search(query, EVERYTHING, 10))
            want = store.lexical._fts5_query(query, EVERYTHING, 10, None)
            same += [i for i, _ in got] == [i for i, _ in want] and all(
                a == b for (_, a), (_, b) in zip(got, want, strict=True)
            )
        return same / len(texts)

    reader = Memsearch(path)
    warm = [search(reader, text) for text in texts]
    report["before_crossing_p50_ms"] = statistics.median(warm)
    # The writes: the share of the store added in transactions of 500, by another store object.
    rng = random.Random(9)
    writer = SQLiteStore.open(path)
    count = int(args.share * args.size)
    started = time.perf_counter()
    for start in range(0, count, 500):
        batch = []
        for i in range(start, min(count, start + 500)):
            record = corpus[rng.randrange(len(corpus))]
            words = [w for w in record["text"].split(" ") if rng.random() >= 0.2] or ["added"]
            batch.append(NewMemory(f"{' '.join(words)} (added #{i})", tags=tuple(record.get("tags", []))))
        writer.insert(batch, None, None, NOW)
    report["writes_s"] = time.perf_counter() - started
    writer.close()
    log(f"{count} memories added in {report['writes_s']:.1f} s, load {load()}")
    # The long-lived reader: the search that finds the share crossed, then searches until the new
    # file is in use (where the code makes it in the background), then after.
    crossed = time.perf_counter()
    report["first_search_after_crossing_ms"] = search(reader, texts[0])
    rstore = reader.store()
    waiting = getattr(rstore, "wait_for_impact_builds", None)
    during: list[float] = []
    if waiting is not None:
        position = 1
        while not waiting(0):
            during.append(search(reader, texts[position % len(texts)]))
            position += 1
    report["new_file_in_use_after_s"] = time.perf_counter() - crossed
    report["searches_while_made"] = len(during)
    if during:
        report["while_made_p50_ms"] = statistics.median(during)
        report["while_made_max_ms"] = max(during)
    after = [search(reader, text) for text in texts]
    report["after_p50_ms"] = statistics.median(after)
    report["after_agreement"] = agrees(reader)
    reader.close()
    log(json.dumps(report))
    # A one-shot process on the same state (a new file already made above: add the share again).
    writer = SQLiteStore.open(path)
    for start in range(0, count, 500):
        batch = [NewMemory(f"one-shot {i} {corpus[i % len(corpus)]['text']}") for i in range(start, start + 500)]
        writer.insert(batch[: count - start], None, None, NOW)
    writer.close()
    one_shot = Memsearch(path)
    one_shot.background_work = False
    started = time.perf_counter()
    report["one_shot_first_search_ms"] = search(one_shot, texts[0])
    report["one_shot_agreement"] = agrees(one_shot)
    store = one_shot.store()
    assert isinstance(store, SQLiteStore)
    store.insert([NewMemory("one-shot write")], None, None, NOW)
    started = time.perf_counter()
    one_shot.close()
    report["one_shot_close_after_write_s"] = time.perf_counter() - started
    again = Memsearch(path)
    again.background_work = False
    report["one_shot_next_search_ms"] = search(again, texts[1])
    again.close()
    report["load_after"] = load()
    log(json.dumps(report))
    target = args.json or (HERE / "results" / f"lexical-rebuild-{args.size}.json")
    target.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def first_search(args: argparse.Namespace, rounds: int = 3) -> int:
    """A store under the default threshold but over WARM_THRESHOLD (`--size`, e.g. 20000), with no
    file, in a process that has numpy loaded (a server, a library user doing hybrid searches):
    its first lexical search, its second, the wait until the file is in use, and 20 searches
    after (ms; the default threshold kept)."""
    import lexical_scale

    if os.environ.get("MEMSEARCH_BENCH_CODE"):
        assert not any(name.startswith("memsearch") for name in sys.modules)
        sys.path.insert(0, os.environ["MEMSEARCH_BENCH_CODE"])
    import numpy  # noqa: F401 - a warm process: the index is wanted from WARM_THRESHOLD

    import memsearch
    from memsearch.api import Memsearch
    from memsearch.retrieval.pipeline import SearchRequest

    os.environ.pop("MEMSEARCH_LEXICAL_THRESHOLD", None)
    cached = lexical_scale.build_api_store(args.size, args.out)
    report: dict[str, Any] = {"size": args.size, "code": str(Path(memsearch.__file__).parent.parent), "load": load()}
    queries = ["deploy config", "billing auth token", "redis cache timeout", "memory leak", "kubernetes pod node"]

    def search(ms: Memsearch, text: str) -> float:
        started = time.perf_counter()
        ms.search(SearchRequest(text, k=10, mode="lexical"))
        return (time.perf_counter() - started) * 1000

    runs = []
    for round_number in range(rounds):
        path = args.out / "scratch" / f"lexical-first-{args.size}-{round_number}.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        for leftover in path.parent.glob(f"{path.name}*"):
            shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
        shutil.copyfile(cached, path)
        with Memsearch(path) as ms:
            first = search(ms, "where is the deploy config")
            second = search(ms, "retry queue worker timeout")
            started = time.perf_counter()
            waiting = getattr(ms.store(), "wait_for_impact_builds", None)
            if waiting is not None:
                waiting(60)
            waited = time.perf_counter() - started
            after = statistics.median(search(ms, text) for text in queries * 4)
        runs.append({"first_ms": first, "second_ms": second, "file_in_use_after_s": waited, "after_p50_ms": after})
    report["runs"] = runs
    report["load_after"] = load()
    log(json.dumps(report))
    target = args.json or (HERE / "results" / f"lexical-first-search-{args.size}.json")
    target.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    raise SystemExit(main())
