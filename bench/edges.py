"""Edges of the contract: what an over-long MCP line costs the server, and what a long query costs.

1. `mcp-line`: `memsearch mcp` on stdio gets a request line of --line-mb megabytes (a `mem_search`
   whose query is that long, with an id). Figures: the server's peak resident memory (VmHWM)
   before and after the line, the time to its answer, what the answer was, and whether a
   `mem_stats` right after is answered (the server stays up).
2. `long-query`: in-process searches (auto mode, no access recorded) on bench/serve.py's store of
   --size synthetic memories, with queries made of the corpus's own text cut to 4,000, 10,000,
   100,000 and 1,000,000 characters, against a short query, taking turns. Figures: p50 and p95 per length, and
   each p50 as a ratio to the short query's in the same run.

    python bench/edges.py mcp-line --line-mb 100
    python bench/edges.py long-query --size 10000 --runs 15
"""

from __future__ import annotations

import argparse
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serve as serve_bench  # bench/serve.py: its synthetic store with random vectors

ROOT = Path(__file__).resolve().parents[1]


def log(message: str) -> None:
    print(f"[edges-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in KiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields


class Stdio:
    """`memsearch mcp` on a store, spoken to in JSON-RPC lines."""

    def __init__(self, db: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memsearch", "mcp", "--db", str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.buffer = b""
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        self.send(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": init}).encode())
        self.answer("init", 180)
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode())

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def answer(self, request_id: Any, timeout: float) -> dict[str, Any]:
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\n", 1)
                message = json.loads(raw)
                if message.get("id") == request_id:
                    return dict(message)
            ready, _, _ = select.select([self.process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(f"no answer to {request_id!r} in {timeout} s")
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                raise EOFError(f"the server closed stdout before answering {request_id!r}")
            self.buffer += chunk

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()


def bench_mcp_line(megabytes: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memsearch-edges-") as folder:
        db = Path(folder) / "memsearch.db"
        server = Stdio(db)
        try:
            pid = server.process.pid
            before = memory_kib(pid)
            head = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"mem_search","arguments":{"query":"'
            line = head + b"x" * (megabytes * 1_000_000) + b'"}}}'
            started = time.perf_counter()
            writer = threading.Thread(target=server.send, args=(line,), daemon=True)
            writer.start()
            try:
                answer = server.answer(7, 600)
            except (TimeoutError, EOFError) as error:
                answer = {"failed": str(error)}
            seconds = time.perf_counter() - started
            writer.join(timeout=60)
            after = memory_kib(pid) if server.process.poll() is None else {}
            server.send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                                    "params": {"name": "mem_stats", "arguments": {}}}).encode())  # fmt: skip
            alive = "result" in server.answer(8, 60)
        finally:
            server.close()
    shown = json.dumps(answer)[:300]
    return {
        "line_mb": megabytes,
        "rss_before_mib": round(before["VmRSS"] / 1024, 1),
        "peak_before_mib": round(before["VmHWM"] / 1024, 1),
        "peak_after_mib": round(after.get("VmHWM", 0) / 1024, 1),
        "answer_s": round(seconds, 2),
        "answer": shown,
        "answers_after": alive,
        "load": load_average(),
    }


def query_of(texts: list[str], length: int) -> str:
    """The corpus's text, memory after memory, cut to `length` characters."""
    pieces, total = [], 0
    while total < length:
        text = texts[len(pieces) % len(texts)]
        pieces.append(text)
        total += len(text) + 1
    return " ".join(pieces)[:length]


def bench_long_query(size: int, runs: int, out: Path) -> dict[str, Any]:
    import bench as corpus_generator
    from memsearch.api import Memsearch
    from memsearch.retrieval.request import SearchRequest

    store = serve_bench.build_store(size, 7, out)
    texts = [record["text"] for record in corpus_generator.corpus(size, 7, serve_bench.NOW)]
    # Text of memories far from each other, as a pasted document is not one memory.
    texts = texts[::7]
    queries = {"short": "how do I rotate the deploy key"}
    queries |= {f"{length // 1000}k": query_of(texts, length) for length in (4_000, 10_000, 100_000, 1_000_000)}
    times: dict[str, list[float]] = {name: [] for name in queries}
    outcomes: dict[str, str] = {}
    with Memsearch(store) as ms:
        for name, text in queries.items():  # warm-up, and the outcome of each
            try:
                found = ms.search(SearchRequest(text, touch=False))
                outcomes[name] = f"{len(found.results)} results, {found.route.strategy}"
            except Exception as error:  # main refuses a query over its bound: say so
                outcomes[name] = f"{type(error).__name__}: {str(error)[:80]}"
        for _ in range(runs):
            for name, text in queries.items():
                if not outcomes[name][0].isdigit():
                    continue
                started = time.perf_counter()
                ms.search(SearchRequest(text, touch=False))
                times[name].append(time.perf_counter() - started)
    short = statistics.median(times["short"])
    figures = {}
    for name, values in times.items():
        if not values:
            figures[name] = {"outcome": outcomes[name]}
            continue
        ordered = sorted(values)
        p50 = statistics.median(ordered)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        figures[name] = {
            "chars": len(queries[name]),
            "p50_ms": round(p50 * 1000, 1),
            "p95_ms": round(p95 * 1000, 1),
            "x_short": round(p50 / short, 2),
            "outcome": outcomes[name],
        }
    return {"size": size, "runs": runs, "load": load_average(), "figures": figures}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("mcp-line", "long-query"))
    parser.add_argument("--line-mb", type=int, default=100)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--out", type=Path, default=Path("/tmp/memsearch-bench-serve"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.what == "mcp-line":
        result = bench_mcp_line(args.line_mb)
    else:
        result = bench_long_query(args.size, args.runs, args.out)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
