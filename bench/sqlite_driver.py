"""Which SQLite memsearch's store runs on (memsearch/store/sqlite_driver.py): what each candidate
driver costs a fresh process, and what a delete costs with it.

Drivers, each that is installed: Python's own `sqlite3` (this machine's SQLite), `sqlean` (sqlean.py,
memsearch's dependency) and `pysqlite3` (pysqlite3-binary). Taking turns, round after round:

1. start: a fresh process that imports the driver, opens an in-memory database and runs one FTS5
   query (the library's code is paged in as a store's first search does), beside the floor
   `python -c pass` and beside `import sqlite3` the same way.
2. delete: memsearch's own delete of one memory (SQLiteStore.delete: the words out of the
   full-text index, the WAL emptied) on a copy of bench.py's generated store, in a process per
   driver (MEMSEARCH_SQLITE): FTS5's secure-delete where the driver's SQLite has it (3.42 on), the
   merge of the whole index otherwise. Also the index's segment count before and after the deletes
   (a merge leaves 1) and whether the table stays readable by this machine's `sqlite3` module.

3. bulk (--bulk 0.25,0.5,1,2,5: percent of the store): one SQLiteStore.delete of that many
   memories (commit and WAL checkpoint included) on a fresh copy, on the driver this process runs
   on, two ways taking turns: FTS5's secure-delete for every row, or secure-delete off for the
   transaction and one merge ('optimize') at its end (what memsearch does past
   sqlite_fts.BULK_DELETE_SHARE). The crossover says where that share belongs.

Run: python bench/sqlite_driver.py [--sizes 10000,100000] [--rounds 21] [--deletes 7] [--bulk 1,2]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

DRIVERS = {"sqlite3": "sqlite3", "sqlean": "sqlean", "pysqlite3": "pysqlite3.dbapi2"}
_START = (
    "import {module} as d; c = d.connect(':memory:'); "
    "c.execute(\"CREATE VIRTUAL TABLE f USING fts5(t, tokenize = 'porter unicode61 remove_diacritics 2')\"); "
    "c.execute(\"SELECT rowid FROM f WHERE f MATCH 'word'\").fetchall()"
)


def installed() -> list[str]:
    return [name for name, module in DRIVERS.items() if importlib.util.find_spec(module.split(".")[0])]


def start_times(drivers: Sequence[str], rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Milliseconds of a fresh process per driver (and of `python -c pass`), taking turns: wall
    clock, and the process's CPU time (user + system; less moved by the load)."""
    wall: dict[str, list[float]] = {"floor": [], **{name: [] for name in drivers}}
    cpu: dict[str, list[float]] = {name: [] for name in wall}
    for n in range(rounds):
        order = ["floor", *drivers]
        if n % 2:
            order.reverse()
        for name in order:
            code = "pass" if name == "floor" else _START.format(module=DRIVERS[name])
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
            wall[name].append((time.perf_counter() - started) * 1000)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
    return wall, cpu


def durable(path: Path) -> None:
    """Write the copy out before timing: else the first delete's checkpoint (an fsync) pays for the
    whole copied file (0.2 s at 100k)."""
    with path.open("rb+") as file:
        os.fsync(file.fileno())


def on_pysqlite3() -> None:
    """memsearch runs on sqlean.py or Python's sqlite3 (MEMSEARCH_SQLITE knows no other); to
    measure its store on pysqlite3-binary too, put that module in the driver module's place before
    any store module imports it."""
    os.environ.pop("MEMSEARCH_SQLITE")
    from pysqlite3 import dbapi2  # type: ignore[import-not-found]

    import memsearch.store.sqlite_driver as driver

    driver.sqlite3, driver.DRIVER = dbapi2, "pysqlite3"
    driver.SECURE_DELETE = dbapi2.sqlite_version_info >= (3, 42, 0)


def delete_worker(db: str, runs: int) -> None:
    """In a process of its own (the driver chosen by MEMSEARCH_SQLITE): delete `runs` memories one
    by one from a copy of `db`; print the times and what the full-text table looked like."""
    if os.environ.get("MEMSEARCH_SQLITE") == "pysqlite3":
        on_pysqlite3()
    from memsearch.store.sqlite import SQLiteStore
    from memsearch.store.sqlite_driver import DRIVER, sqlite3

    source = Path(db)
    copy = source.with_name(f"{source.stem}-{DRIVER}-deletes.db")
    shutil.copyfile(source, copy)
    durable(copy)
    for suffix in ("-wal", "-shm", "-access"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    segments = "SELECT count(DISTINCT segid) FROM memories_fts_idx"
    times: list[float] = []
    checkpoints: list[float] = []  # of each delete's time, the WAL checkpoint's after the commit (an fsync)
    with SQLiteStore.open(copy) as store:
        checkpoint = store._checkpoint_if_due

        def timed_checkpoint() -> None:
            started = time.perf_counter()
            checkpoint()
            checkpoints.append((time.perf_counter() - started) * 1000)

        store._checkpoint_if_due = timed_checkpoint  # type: ignore[method-assign]
        before = store._db.execute(segments).fetchone()[0]
        config = dict(store._db.execute("SELECT k, v FROM memories_fts_config").fetchall())
        for n in range(runs):  # the generated store's ids are 1..size
            started = time.perf_counter()
            store.delete([7 * n + 2])
            times.append((time.perf_counter() - started) * 1000)
        after = store._db.execute(segments).fetchone()[0]
        config_after = dict(store._db.execute("SELECT k, v FROM memories_fts_config").fetchall())
    probe = f"import sqlite3; sqlite3.connect({str(copy)!r}).execute('SELECT count(*) FROM memories_fts')"
    readable = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    for suffix in ("", "-wal", "-shm", "-access"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.rmtree(Path(f"{copy}.vectors"), ignore_errors=True)
    print(json.dumps({
        "driver": DRIVER, "sqlite": sqlite3.sqlite_version, "times_ms": times, "checkpoint_ms": checkpoints,
        "segments_before": before, "segments_after": after, "config_at_open": config, "config_after": config_after,
        "stdlib_reads_fts": readable.returncode == 0 or readable.stderr.strip().splitlines()[-1],
    }))  # fmt: skip


def delete_times(db: Path, driver: str, runs: int) -> dict[str, Any]:
    env = {**os.environ, "MEMSEARCH_SQLITE": driver}
    done = subprocess.run(
        [sys.executable, __file__, "--delete-worker", str(db), str(runs)],
        env=env, capture_output=True, text=True, check=True, timeout=1800,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def summary(times: Sequence[float]) -> dict[str, float]:
    return {"median": round(statistics.median(times), 2), "min": round(min(times), 2), "max": round(max(times), 2)}


def bulk_time(db: Path, count: int, merge: bool) -> float:
    """Seconds of one delete of `count` memories from a fresh copy of `db`: by secure-delete, or by
    secure-delete off and one merge (`merge`)."""
    import memsearch.store.sqlite_fts as fts
    from memsearch.store.sqlite import SQLiteStore

    copy = db.with_name(f"{db.stem}-bulk.db")
    shutil.copyfile(db, copy)
    durable(copy)
    for suffix in ("-wal", "-shm", "-access"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    share, floor = fts.BULK_DELETE_SHARE, fts._BULK_FLOOR
    fts.BULK_DELETE_SHARE, fts._BULK_FLOOR = (0.0, 0) if merge else (2.0, 1 << 62)
    try:
        with SQLiteStore.open(copy) as store:
            store.delete([1])  # the table at format 5 with secure-delete on, as in use
            started = time.perf_counter()
            store.delete(list(range(2, count + 2)))
            return time.perf_counter() - started
    finally:
        fts.BULK_DELETE_SHARE, fts._BULK_FLOOR = share, floor
        for suffix in ("", "-wal", "-shm", "-access"):
            Path(f"{copy}{suffix}").unlink(missing_ok=True)
        shutil.rmtree(Path(f"{copy}.vectors"), ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=21, help="fresh processes per driver")
    parser.add_argument("--deletes", type=int, default=7, help="deletes per driver and size")
    parser.add_argument("--delete-rounds", type=int, default=2, help="processes per driver and size, taking turns")
    parser.add_argument("--out", type=Path, default=HERE / "out")
    parser.add_argument("--skip", default="", help="comma-separated: start, delete")
    parser.add_argument("--bulk", default="", help="comma-separated percents of the store for one delete")
    parser.add_argument("--bulk-rounds", type=int, default=2)
    args = parser.parse_args(argv)
    from shared_store import NOW

    import bench

    skip = set(filter(None, args.skip.split(",")))
    drivers = installed()
    print(f"drivers: {drivers}; load before: {Path('/proc/loadavg').read_text().split()[:3]}", flush=True)
    report: dict[str, Any] = {"drivers": drivers}
    if "start" not in skip:
        for kind, times in zip(("start_ms", "start_cpu_ms"), start_times(drivers, args.rounds), strict=True):
            floor = statistics.median(times["floor"])
            stdlib = statistics.median(times["sqlite3"])
            report[kind] = {
                name: {**summary(values), "over_floor": round(statistics.median(values) - floor, 2),
                       "ratio_to_sqlite3": round(statistics.median(values) / stdlib, 3)}
                for name, values in times.items()
            }  # fmt: skip
            print(json.dumps({kind: report[kind]}, indent=1), flush=True)
    if "delete" not in skip:
        for size in (int(s) for s in args.sizes.split(",")):
            db, _ = bench.build_generated_store(size, 42, args.out, NOW)
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in drivers}
            for n in range(args.delete_rounds):
                for name in drivers if n % 2 == 0 else list(reversed(drivers)):
                    runs[name].append(delete_times(db, name, args.deletes))
            figures = {}
            for name, results in runs.items():
                times = [t for result in results for t in result["times_ms"]]
                checkpoints = [t for result in results for t in result["checkpoint_ms"]]
                last = results[-1]
                figures[name] = {
                    "sqlite": last["sqlite"], **summary(times),
                    "checkpoint_median": round(statistics.median(checkpoints), 2),
                    "segments": f"{last['segments_before']} -> {last['segments_after']}",
                    "secure_delete": last["config_after"].get("secure-delete", 0),
                    "fts5_format": last["config_after"].get("version"),
                    "this_machines_sqlite3_reads_the_table": last["stdlib_reads_fts"],
                }  # fmt: skip
            floor = figures.get("sqlite3", {}).get("median")
            for entry in figures.values():
                entry["ratio_to_sqlite3"] = round(entry["median"] / floor, 4) if floor else None
            report[f"delete_ms_{size}"] = figures
            print(json.dumps({size: figures}, indent=1), flush=True)
    for size in (int(s) for s in args.sizes.split(",")) if args.bulk else ():
        db, _ = bench.build_generated_store(size, 42, args.out, NOW)
        for percent in (float(p) for p in args.bulk.split(",")):
            count = round(size * percent / 100)
            times: dict[str, list[float]] = {"secure_delete": [], "merge": []}
            for n in range(args.bulk_rounds):
                for way in ("secure_delete", "merge") if n % 2 == 0 else ("merge", "secure_delete"):
                    times[way].append(bulk_time(db, count, way == "merge"))
            secure, merged = statistics.median(times["secure_delete"]), statistics.median(times["merge"])
            row = {"size": size, "percent": percent, "rows": count, "secure_delete_s": round(secure, 3),
                   "merge_s": round(merged, 3), "merge_over_secure": round(merged / secure, 3),
                   "load": Path("/proc/loadavg").read_text().split()[0]}  # fmt: skip
            report.setdefault("bulk", []).append(row)
            print(json.dumps(row), flush=True)
    report["load_after"] = Path("/proc/loadavg").read_text().split()[:3]
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--delete-worker":
        delete_worker(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(main())
