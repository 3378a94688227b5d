"""Vector cache load time: a fresh process opens a store and reads its vectors from the cache
(written once by a first process), then scores one query against every row. Medians of --runs
processes, each timed inside the process (no interpreter start), with the page cache warm.

    python bench/cache_load.py STORE.db --runs 9

Run it with the code to measure first on PYTHONPATH (a checkout of main for the "before" figure).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, sys, time
from pathlib import Path
import numpy as np
from memsearch.store.sqlite import SQLiteStore
store = SQLiteStore.open(Path(sys.argv[1]))
start = time.perf_counter()
index = store.vector_index()
loaded = time.perf_counter()
scores = index.matrix @ np.ones(index.matrix.shape[1], np.float32)
scored = time.perf_counter()
print(json.dumps({"load_ms": (loaded - start) * 1000, "first_scoring_ms": (scored - loaded) * 1000,
                  "rows": int(index.ids.size), "mapped": type(index.matrix).__name__}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", type=Path)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-c", CHILD, str(args.store)], check=True, capture_output=True)  # writes it
    runs = [
        json.loads(subprocess.run([sys.executable, "-c", CHILD, str(args.store)], check=True, capture_output=True,
                                  text=True).stdout)
        for _ in range(args.runs)
    ]  # fmt: skip
    load = statistics.median(run["load_ms"] for run in runs)
    scoring = statistics.median(run["first_scoring_ms"] for run in runs)
    print(f"{runs[0]['rows']} rows ({runs[0]['mapped']}): load {load:.1f} ms, first scoring {scoring:.1f} ms, "
          f"together {statistics.median(r['load_ms'] + r['first_scoring_ms'] for r in runs):.1f} ms "
          f"(medians of {args.runs})")  # fmt: skip


if __name__ == "__main__":
    main()
