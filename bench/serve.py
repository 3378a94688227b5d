"""Serving benchmark: warm search over HTTP and MCP, and a CLI call through a running server.

Figures (medians unless said; p50/p95 over every request):

1. `GET /search?q=…&k=10` on loopback against `memsearch serve` (one warm process), with 1 and
   with 8 concurrent clients (each on its own keep-alive connection), at each --sizes store size;
   auto mode (a query embedding each) and lexical mode (no model: the server's own overhead).
   Targets: p50 <= 15 ms at 10k, <= 40 ms at 100k (1 client). The same searches through the
   library in the bench's own process are measured first: the difference is the server's cost.
2. an MCP `mem_search` round trip: the SDK's ClientSession over stdio to `memsearch mcp`.
3. 401 answers for a wrong token that differs from the real one only in its last character, one
   that differs in its first, and no token, taking turns: the bearer check's timing.
4. `memsearch search QUERY --db STORE` as a fresh process, through the running server and
   in-process (no server), with `python -c pass` measured in the same run as the floor.
   Target: through the server <= 0.25 s wall.

The corpus is bench/bench.py's synthetic one (same seed). To save embedding time its vectors are
random but normalised (the vector leg's ranking is meaningless; its cost is real), stored under
the bundled model's name so queries embed with the real model. Stores are built under --out
(default /tmp/memsearch-bench-serve) and reused. Searches record accesses, so they write.

    python bench/serve.py --sizes 10000 100000
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench as corpus_generator  # bench/bench.py: the synthetic corpus and queries

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2025, 6, 1, tzinfo=UTC)


def log(message: str) -> None:
    print(f"[serve-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load_average() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def build_store(size: int, seed: int, out: Path) -> Path:
    """A store of `size` synthetic memories with random normalised vectors (cached by size and seed)."""
    import numpy as np

    from memsearch.api import Memsearch
    from memsearch.models import NewMemory

    path = out / f"serve-{size}-{seed}.db"
    if path.exists():
        return path
    log(f"building a {size}-memory store at {path}")
    records = corpus_generator.corpus(size, seed, NOW)
    memories = [NewMemory.from_json(record) for record in records]
    rng = np.random.default_rng(seed)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    with Memsearch(partial) as ms:
        info = ms.encoder().info
        store = ms.store(create=True)
        for start in range(0, size, 5000):
            batch = memories[start : start + 5000]
            vectors = rng.standard_normal((len(batch), info.dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            store.insert(batch, vectors, info, NOW)
    partial.rename(path)
    return path


def env() -> dict[str, str]:
    environment = {name: value for name, value in os.environ.items() if name != "MEMSEARCH_API_KEY"}
    environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), environment.get("PYTHONPATH", "")])
    return environment


def start_server(db: Path, token: str | None = None) -> tuple[subprocess.Popen[bytes], str, str]:
    from memsearch.discovery import discovery_path

    discovery = discovery_path(db)
    discovery.unlink(missing_ok=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "memsearch", "serve", "--db", str(db), "--port", "0"],
        env=env() | ({"MEMSEARCH_API_KEY": token} if token else {}),
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if discovery.exists():  # the URL, and the token: the one given, else the one the server made
            document = json.loads(discovery.read_text())
            return process, document["url"], token or document["token"]
        if process.poll() is not None:
            raise SystemExit(f"serve exited with {process.returncode}")
        time.sleep(0.05)
    process.kill()
    raise SystemExit("serve did not start")


def http_latencies(url: str, token: str, queries: list[str], clients: int, per_client: int, mode: str) -> list[float]:
    parts = urlsplit(url)
    latencies: list[float] = []
    lock = threading.Lock()
    failures: list[str] = []

    def client(number: int) -> None:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        mine = []
        for n in range(per_client):
            query = queries[(number * per_client + n) % len(queries)]
            start = time.perf_counter()
            connection.request(
                "GET", f"/search?q={quote(query)}&k=10&mode={mode}", headers={"Authorization": f"Bearer {token}"}
            )
            response = connection.getresponse()
            response.read()
            mine.append(time.perf_counter() - start)
            if response.status != 200:
                failures.append(f"{response.status} for {query!r}")
        connection.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise SystemExit(f"{len(failures)} failed requests, first: {failures[0]}")
    return latencies


def token_timing(db: Path, rounds: int) -> dict[str, list[float]]:
    """401 times for wrong tokens that share all but the last character with the real one, that
    differ from its first, and for no token, taking turns request by request: a token compared
    byte by byte would answer the near miss measurably later."""
    token = "k" * 43
    wrong = {"near miss (last char differs)": token[:-1] + "x", "far miss (first char differs)": "x" + token[1:]}
    process, url, _ = start_server(db, token)
    parts = urlsplit(url)
    times: dict[str, list[float]] = {name: [] for name in [*wrong, "no token"]}
    try:
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        for _ in range(rounds):
            for name in times:
                headers = {"Authorization": f"Bearer {wrong[name]}"} if name in wrong else {}
                start = time.perf_counter()
                connection.request("GET", "/stats", headers=headers)
                response = connection.getresponse()
                response.read()
                times[name].append(time.perf_counter() - start)
                if response.status != 401:
                    raise SystemExit(f"{name}: expected 401, got {response.status}")
        connection.close()
    finally:
        process.terminate()
        process.wait(timeout=60)
    return times


def mcp_latencies(db: Path, queries: list[str], calls: int) -> list[float]:
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "memsearch", "mcp", "--db", str(db)], env=env())

    async def run() -> list[float]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("mem_search", {"query": "warm up", "k": 10})
            times = []
            for n in range(calls):
                start = time.perf_counter()
                result = await session.call_tool("mem_search", {"query": queries[n % len(queries)], "k": 10})
                times.append(time.perf_counter() - start)
                assert not result.is_error, result.content
            return times

    return anyio.run(run)


def in_process_latencies(db: Path, queries: list[str], calls: int, mode: str) -> list[float]:
    """The same searches through the library in this process: the floor the server adds to."""
    from memsearch.api import Memsearch
    from memsearch.retrieval.pipeline import SearchRequest

    with Memsearch(db) as library:
        library.search(SearchRequest("warm up", k=10, mode="hybrid"))
        times = []
        for n in range(calls):
            start = time.perf_counter()
            library.search(SearchRequest(queries[n % len(queries)], k=10, mode=mode))
            times.append(time.perf_counter() - start)
    return times


def wall(argv: list[str], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return times


def ms(value: float) -> str:
    return f"{value * 1000:.1f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--requests", type=int, default=200, help="requests per figure (split across clients)")
    parser.add_argument("--cli-runs", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path("/tmp/memsearch-bench-serve"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    rows: list[tuple[str, str, str, str]] = []
    report: dict[str, Any] = {"load_average_start": load_average(), "figures": {}}
    for size in args.sizes:
        db = build_store(size, args.seed, args.out)
        qs = corpus_generator.queries(100, args.seed, corpus_generator.corpus(min(size, 2000), args.seed, NOW))
        for mode in ("auto", "lexical"):
            latencies = in_process_latencies(db, qs, 50, mode)
            name = f"in-process API search {size // 1000}k, {mode}"
            p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
            rows.append((name, ms(p50), ms(p95), f"{len(latencies)} searches, load {load_average()}"))
            report["figures"][name] = {"p50_s": p50, "p95_s": p95, "n": len(latencies)}
            log(f"{name}: p50 {ms(p50)}, p95 {ms(p95)}")
        process, url, token = start_server(db)
        try:
            http_latencies(url, token, qs, 1, 20, "auto")  # warm every worker path once
            for mode in ("auto", "lexical"):
                for clients in (1, 8):
                    latencies = http_latencies(url, token, qs, clients, max(1, args.requests // clients), mode)
                    name = f"HTTP search {size // 1000}k, {mode}, {clients} client{'s' * (clients > 1)}"
                    p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
                    rows.append((name, ms(p50), ms(p95), f"{len(latencies)} requests, load {load_average()}"))
                    report["figures"][name] = {"p50_s": p50, "p95_s": p95, "n": len(latencies)}
                    log(f"{name}: p50 {ms(p50)}, p95 {ms(p95)}")
            if size == args.sizes[0]:
                query = qs[0]
                through = wall([sys.executable, "-m", "memsearch", "search", query, "--db", str(db)], args.cli_runs)
        finally:
            process.terminate()
            process.wait(timeout=60)
        if size == args.sizes[0]:
            for name, times in token_timing(db, 500).items():
                p50, p95 = percentile(times, 0.5), percentile(times, 0.95)
                rows.append((f"401 for a wrong token: {name}", ms(p50), ms(p95), f"{len(times)} requests"))
                report["figures"][f"401 {name}"] = {"p50_s": p50, "p95_s": p95, "n": len(times)}
            mcp = mcp_latencies(db, qs, 50)
            rows.append(("MCP mem_search round trip", ms(percentile(mcp, 0.5)), ms(percentile(mcp, 0.95)), "stdio"))
            report["figures"]["mcp_mem_search"] = {"p50_s": percentile(mcp, 0.5), "p95_s": percentile(mcp, 0.95)}
            alone = wall([sys.executable, "-m", "memsearch", "search", query, "--db", str(db)], args.cli_runs)
            floor = wall([sys.executable, "-c", "pass"], args.cli_runs)
            for name, times in (
                ("CLI search through the server", through),
                ("CLI search in-process", alone),
                ("python -c pass", floor),
            ):
                median = statistics.median(times)
                rows.append((name, f"{median:.3f} s", f"max {max(times):.3f} s", f"{len(times)} runs, wall"))
                report["figures"][name] = {"median_s": median, "runs": times}
                log(f"{name}: {median:.3f} s")
    report["load_average_end"] = load_average()
    width = max(len(row[0]) for row in rows)
    print(f"{'figure':<{width}}  {'p50/median':>12}  {'p95/max':>14}  note")
    for name, first, second, note in rows:
        print(f"{name:<{width}}  {first:>12}  {second:>14}  {note}")
    print(f"load average {report['load_average_start']} at start, {report['load_average_end']} at end (2 cores)")
    (args.out / "serve-report.json").write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
