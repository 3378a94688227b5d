"""Stores that share a machine: does a search that records accesses slow another connection?

Two processes search one store at once (as `memsearch serve` and a CLI or a second agent do):
A searches in a loop, recording the accesses of what it returns (`touch`, the default) or not;
B searches in a loop without recording. The figure is B's searches per second while A records,
over B's while A does not (1.00: recording costs the other connection nothing), taken in turns,
round after round; the floor is B alone in the same round. Both use one fixed query vector per
query (no model runs), so the figure is the store's, not the encoder's.

A separate figure times a delete of one memory (with its text removed from the full-text index,
as every delete does) at each size.

The store is bench.py's generated store (its 10k corpus's texts, clustered vectors; cached under
--out). Run: python bench/shared_store.py [--sizes 10000,100000] [--rounds 5] [--seconds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

NOW = datetime(2026, 6, 1, tzinfo=UTC)  # the generated store's "now", fixed so it is cached once


class FixedEncoder:
    """One vector per query text, near one of the generated store's centres (no model runs)."""

    def __init__(self, info: Any) -> None:
        self.info = info
        self._centres = np.random.default_rng(7).normal(size=(1000, info.dim)).astype(np.float32)

    def encode(self, texts: Sequence[str], *, progress: Any = None) -> np.ndarray:
        out = np.empty((len(texts), self.info.dim), np.float32)
        for n, text in enumerate(texts):
            rng = np.random.default_rng(zlib.crc32(text.encode()))
            row = self._centres[rng.integers(0, 1000)] + 0.6 * rng.normal(size=self.info.dim).astype(np.float32)
            out[n] = row / np.linalg.norm(row)
        return out


def worker(db: str, seconds: float, touch: bool, queries_file: str, mode: str) -> None:
    """Search `db` in a loop for `seconds` once told to go (a line on stdin); print the times."""
    from memsearch.api import Memsearch
    from memsearch.retrieval.pipeline import SearchRequest

    qs = json.loads(Path(queries_file).read_text())
    with Memsearch(db, encoder_factory=lambda: FixedEncoder(ms.store().embedding_model())) as ms:
        for query in qs[:3]:  # warm: the vector matrix loaded, the statements prepared
            ms.search(SearchRequest(query, k=10, mode=mode, touch=False))
        print("ready", flush=True)
        sys.stdin.readline()
        times, cpu = [], []
        started = time.perf_counter()
        n = 0
        while time.perf_counter() - started < seconds:
            t, c = time.perf_counter(), time.process_time()
            ms.search(SearchRequest(qs[n % len(qs)], k=10, mode=mode, touch=touch))
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            n += 1
        elapsed = time.perf_counter() - started
        print(json.dumps({"count": n, "elapsed": elapsed, "times": times, "cpu": cpu}), flush=True)


def run_together(db: Path, seconds: float, a_touch: bool | None, queries_file: Path, mode: str) -> dict[str, Any]:
    """B's (and A's) searches while A records accesses (a_touch), or not, or A is not running (None)."""
    command = [sys.executable, __file__, "--worker", str(db), str(seconds), mode]
    procs = {
        "B": subprocess.Popen(
            [*command, "off", str(queries_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
    }
    if a_touch is not None:
        procs["A"] = subprocess.Popen(
            [*command, "on" if a_touch else "off", str(queries_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
    try:
        for proc in procs.values():
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = {}
        for name, proc in procs.items():
            out, _ = proc.communicate(timeout=seconds * 10 + 120)
            results[name] = json.loads(out.strip().splitlines()[-1])
        return results
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()


def rate(result: dict[str, Any]) -> float:
    return float(result["count"] / result["elapsed"])


def cpu_ms(result: dict[str, Any]) -> float:
    """The median CPU time of a search (ms): what a dropped page cache costs, far less moved by
    other processes on the machine than the rate."""
    return float(statistics.median(result["cpu"]) * 1000)


def interleaved(db: Path, queries_file: Path, mode: str, rounds: int) -> dict[str, float]:
    """Two connections in one process taking turns (no CPU contention between them): B's search
    (recording nothing) timed right after A recorded an access, or after A did nothing: each query
    run once untimed (so its pages are in B's cache), then both ways, which first alternating.
    Medians in ms, their ratio, the median of each query's pair's ratio, and the read system calls
    of B's search (pages it had to read again)."""
    from memsearch.api import Memsearch
    from memsearch.retrieval.pipeline import SearchRequest
    from memsearch.store.sqlite import SQLiteStore

    qs = json.loads(Path(queries_file).read_text())
    a = SQLiteStore.open(db)
    after_touch, after_nothing = [], []
    reads_touch: list[int] = []
    reads_nothing: list[int] = []
    with Memsearch(db, encoder_factory=lambda: FixedEncoder(b.store().embedding_model())) as b:
        for query in qs[:3]:
            b.search(SearchRequest(query, k=10, mode=mode, touch=False))
        for n in range(2 * rounds * len(qs)):  # each query twice: after A recorded, after nothing
            query = qs[(n // 2) % len(qs)]
            touch = (n + n // 2) % 2 == 0  # which comes first alternates
            if n % 2 == 0:  # first run untimed: both timed runs find what the query reads in B's cache
                b.search(SearchRequest(query, k=10, mode=mode, touch=False))
            if touch:
                a.touch([1 + n % 1000, 2 + n % 1000], NOW)
            reads = read_calls()
            started = time.perf_counter()
            b.search(SearchRequest(query, k=10, mode=mode, touch=False))
            (after_touch if touch else after_nothing).append((time.perf_counter() - started) * 1000)
            (reads_touch if touch else reads_nothing).append(read_calls() - reads)
    a.close()
    touched, untouched = statistics.median(after_touch), statistics.median(after_nothing)
    paired = [t / u for t, u in zip(after_touch, after_nothing, strict=True)]  # the same query each
    return {
        "paired_ratio": statistics.median(paired),
        "B_ms_after_A_recorded": touched,
        "B_ms_after_A_did_nothing": untouched,
        "ratio": touched / untouched,
        "B_reads_after_A_recorded": statistics.median(reads_touch),
        "B_reads_after_A_did_nothing": statistics.median(reads_nothing),
    }


def read_calls() -> int:
    """This process's read system calls so far (/proc/self/io syscr): SQLite reads a page it does
    not hold in its cache with one, so it counts the pages a search had to read again."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("syscr:"):
            return int(line.split()[1])
    return 0


def delete_times(db: Path, runs: int) -> tuple[list[float], dict[str, Any]]:
    """Milliseconds of deleting one memory (each time another, from a copy of the store), and how:
    the SQLite driver, and whether FTS5's secure-delete removed the words in place or the whole
    index was merged (bench/sqlite_driver.py compares the drivers)."""
    from memsearch.store.sqlite import SQLiteStore
    from memsearch.store.sqlite_driver import DRIVER, SECURE_DELETE, sqlite3

    copy = db.with_name(db.stem + "-deletes.db")
    shutil.copyfile(db, copy)
    with copy.open("rb+") as file:  # written out first: else the first delete's checkpoint (fsync) pays for the copy
        os.fsync(file.fileno())
    for suffix in ("-wal", "-shm", "-access"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    times = []
    with SQLiteStore.open(copy) as store:
        in_place = store._db.execute("SELECT v FROM memories_fts_config WHERE k = 'secure-delete'").fetchone()
        for n in range(runs):  # the generated store's ids are 1..size
            started = time.perf_counter()
            store.delete([7 * n + 2])
            times.append((time.perf_counter() - started) * 1000)
    for suffix in ("", "-wal", "-shm", "-access"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    how = {"driver": f"{DRIVER} (SQLite {sqlite3.sqlite_version})",
           "words_removed_by": "secure-delete" if in_place == (1,) and SECURE_DELETE else "merge"}  # fmt: skip
    return times, how


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--deletes", type=int, default=7)
    parser.add_argument("--mode", default="hybrid", help="the searches' mode (hybrid, lexical, vector)")
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--skip", default="", help="comma-separated: sharing, interleaved, delete")
    args = parser.parse_args(argv)
    import bench

    skip = set(filter(None, args.skip.split(",")))
    print(f"load before: {Path('/proc/loadavg').read_text().split()[:3]}", flush=True)
    report: dict[str, Any] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        db, _ = bench.build_generated_store(size, 42, args.out, NOW)
        work = args.out / "stores" / f"shared-{size}.db"
        for suffix in ("", "-wal", "-shm", "-access"):
            Path(f"{work}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(db, work)
        memories = bench.corpus(10_000, 42, NOW)
        queries_file = args.out / "shared-queries.json"
        queries_file.write_text(json.dumps(bench.queries(200, 42, memories)))
        figures: dict[str, Any] = {}
        if "sharing" not in skip:
            alone, off, on, a_off, a_on = [], [], [], [], []
            cpu_alone, cpu_off, cpu_on = [], [], []
            for n in range(args.rounds):
                order = (False, True) if n % 2 == 0 else (True, False)
                result = run_together(work, args.seconds, None, queries_file, args.mode)
                alone.append(rate(result["B"]))
                cpu_alone.append(cpu_ms(result["B"]))
                for touch in order:
                    result = run_together(work, args.seconds, touch, queries_file, args.mode)
                    (on if touch else off).append(rate(result["B"]))
                    (cpu_on if touch else cpu_off).append(cpu_ms(result["B"]))
                    (a_on if touch else a_off).append(rate(result["A"]))
                print(f"  {size}: round {n + 1}: B alone {alone[-1]:.1f}/s ({cpu_alone[-1]:.1f} ms CPU a search), "
                      f"beside A not recording {off[-1]:.1f}/s ({cpu_off[-1]:.1f} ms), "
                      f"beside A recording {on[-1]:.1f}/s ({cpu_on[-1]:.1f} ms); "
                      f"load {Path('/proc/loadavg').read_text().split()[0]}", flush=True)  # fmt: skip
            figures["sharing"] = {
                "B_alone_per_s": statistics.median(alone),
                "B_beside_A_not_recording_per_s": statistics.median(off),
                "B_beside_A_recording_per_s": statistics.median(on),
                "A_not_recording_per_s": statistics.median(a_off),
                "A_recording_per_s": statistics.median(a_on),
                "B_cpu_ms_alone": statistics.median(cpu_alone),
                "B_cpu_ms_beside_A_not_recording": statistics.median(cpu_off),
                "B_cpu_ms_beside_A_recording": statistics.median(cpu_on),
                "cpu_slowdown_of_B": statistics.median(r / o for o, r in zip(cpu_off, cpu_on, strict=True)),
                "rate_slowdown_of_B": statistics.median(o / r for o, r in zip(off, on, strict=True)),
            }
        if "interleaved" not in skip:
            figures["interleaved"] = interleaved(work, queries_file, args.mode, 2)
            print(f"  {size}: interleaved {figures['interleaved']}", flush=True)
        if "delete" not in skip:
            times, how = delete_times(work, args.deletes)
            figures["delete_ms"] = {"median": statistics.median(times), "min": min(times), "max": max(times), **how}
        report[str(size)] = figures
        print(json.dumps({size: figures}, indent=1), flush=True)
        for suffix in ("", "-wal", "-shm", "-access"):
            Path(f"{work}{suffix}").unlink(missing_ok=True)
    print(f"load after: {Path('/proc/loadavg').read_text().split()[:3]}", flush=True)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], float(sys.argv[3]), sys.argv[5] == "on", sys.argv[6], sys.argv[4])
    else:
        sys.exit(main())
