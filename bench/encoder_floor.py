"""The encoder's own floor, and what the embedding path makes of it.

The floor is sentences per CPU-second of the encoder's own onnxruntime session on realistic texts,
already tokenised, sorted by length and padded per batch, run one batch after another: the model's
arithmetic and nothing else. Against it:

- `path`: `encoder.encode(texts)` as indexing calls it (tokenising, batching, the batches side by
  side on the usable CPUs), sentences per CPU-second and per wall second;
- `sweep`: the knobs of the floor itself, one after another on the same texts: sorting by length or
  not, the batch size, onnxruntime's intra-op / inter-op threads against batches side by side,
  spinning, the execution mode; and the int8 model's session.

The texts: the chunks of the synthetic notes of bench/index_notes.py (what `memsearch index`
embeds: `titled_text` of the plan's chunks), and LoCoMo dev's turns (`speaker: text`).

Run: python bench/encoder_floor.py [--notes 400] [--turns 1500] [--repeat 3] [--sweep] [--json FILE]

Every figure is a median of --repeat runs, taken in turns (one round of every configuration, then
the next round), with the load average beside it: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdata import LOCOMO_DEV

from memsearch.embedding import batching, load_encoder, resolve_model
from memsearch.embedding.batching import length_batches, usable_cpus
from memsearch.embedding.onnx import BATCH_SIZE, OnnxEncoder, ensure_export, ensure_quantized


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def note_chunks(files: int, seed: int = 42) -> list[str]:
    """The texts `memsearch index` embeds for `files` synthetic notes of bench/index_notes.py."""
    from index_notes import make_folder

    from memsearch.ingest.note_files import plan, walk, walked_reader

    with tempfile.TemporaryDirectory(prefix="ms-floor-") as folder:
        root = Path(folder) / "notes"
        make_folder(root, files, seed)
        states = walk([root])
        chunks = plan({}, states, walked_reader(states)).add_chunks
    return list(dict.fromkeys(chunk.titled_text for chunk in chunks))


def locomo_turns(limit: int) -> list[str]:
    """LoCoMo dev's turns as memsearch imports them (`speaker: text`, the image's caption after)."""
    texts = []
    for sample in json.loads(LOCOMO_DEV.read_text(encoding="utf-8")):
        conversation = sample["conversation"]
        for number in range(1, 100):
            for turn in conversation.get(f"session_{number}", []):
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [image: {turn['blip_caption']}]"
                texts.append(text)
    return texts[:limit]


class Feeds:
    """The texts tokenised once by the encoder's own tokenizer (the floor does not tokenise)."""

    def __init__(self, encoder: OnnxEncoder, texts: Sequence[str]) -> None:
        self.encoder = encoder
        self.encodings = encoder._tokenizer.encode_batch([t.lower() if encoder._lower else t for t in texts])
        self.lengths = [len(e.ids) for e in self.encodings]

    def batches(self, size: int, *, by_length: bool) -> list[list[Any]]:
        order = length_batches(self.lengths, size) if by_length else _in_order(len(self.lengths), size)
        return [[self.encodings[i] for i in rows] for rows in order]


def _in_order(n: int, size: int) -> list[list[int]]:
    return [list(range(start, min(start + size, n))) for start in range(0, n, size)]


def session(model_file: Path, *, intra: int = 1, inter: int = 1, spinning: bool = True, parallel: bool = False) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = intra
    options.inter_op_num_threads = inter
    if parallel:
        options.execution_mode = onnxruntime.ExecutionMode.ORT_PARALLEL
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])


def run_batches(encoder: OnnxEncoder, sess: Any, batches: list[list[Any]], workers: int) -> None:
    """Each batch through `sess` (the encoder's own padding), `workers` batches side by side."""
    from memsearch.embedding.batching import run_side_by_side

    def one(batch: list[Any]) -> np.ndarray:
        original = encoder._session
        return _run_on(encoder, sess, batch) if sess is not original else encoder._run(batch)

    for _ in run_side_by_side(one, batches, workers):
        pass


def _run_on(encoder: OnnxEncoder, sess: Any, batch: list[Any]) -> np.ndarray:
    width = max(len(e.ids) for e in batch)
    ids = np.full((len(batch), width), encoder._pad_id, dtype=np.int64)
    mask = np.zeros((len(batch), width), dtype=np.int64)
    for row, e in enumerate(batch):
        ids[row, : len(e.ids)] = e.ids
        mask[row, : len(e.ids)] = e.attention_mask
    arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    out: np.ndarray = sess.run(None, {name: arrays[name] for name in encoder._inputs})[0]
    return out


def timed(work: Callable[[], None], n: int) -> dict[str, float]:
    """Sentences per CPU-second (this process's, all threads) and per wall second of one `work()`."""
    load = loadavg()
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"per_cpu_s": n / cpu, "per_wall_s": n / wall, "cpu_s": cpu, "wall_s": wall, "load": load}


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = runs[0].keys()
    return {key: round(statistics.median(run[key] for run in runs), 3) for key in keys} | {"runs": len(runs)}


def measure(configs: dict[str, tuple[Callable[[], None], int]], repeat: int) -> dict[str, dict[str, float]]:
    """Every configuration once per round, `repeat` rounds (turns), medians."""
    results: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    next(iter(configs.values()))[0]()  # warm-up, untimed
    for _ in range(repeat):
        for name, (work, n) in configs.items():
            results[name].append(timed(work, n))
    return {name: median_of(runs) for name, runs in results.items()}


def floor_config(encoder: OnnxEncoder, feeds: Feeds, size: int) -> tuple[Callable[[], None], int]:
    batches = feeds.batches(size, by_length=True)
    return (lambda: run_batches(encoder, encoder._session, batches, 1)), len(feeds.lengths)


def path_config(encoder: OnnxEncoder, texts: list[str]) -> tuple[Callable[[], None], int]:
    def work() -> None:
        encoder.encode(texts)

    return work, len(texts)


def sweep_configs(encoder: OnnxEncoder, feeds: Feeds, int8: Path | None) -> dict[str, tuple[Callable[[], None], int]]:
    model = ensure_export(resolve_model()) / "model.onnx"
    n = len(feeds.lengths)
    cpus = usable_cpus()
    configs: dict[str, tuple[Callable[[], None], int]] = {}

    def add(name: str, sess: Any, size: int, *, by_length: bool = True, workers: int = 1) -> None:
        batches = feeds.batches(size, by_length=by_length)
        configs[name] = ((lambda: run_batches(encoder, sess, batches, workers)), n)

    own = encoder._session
    for size in (4, 16, 32, 64, 128):  # 8 is the floor's own (the encoder's BATCH_SIZE)
        add(f"sorted, batch {size}, 1 thread", own, size)
    add("unsorted, batch 8, 1 thread", own, 8, by_length=False)
    add("unsorted, batch 32, 1 thread", own, 32, by_length=False)
    threaded = session(model, intra=cpus)
    add(f"sorted, batch 8, intra_op {cpus}", threaded, 8)
    add(f"sorted, batch 8, intra_op {cpus}, no spinning", session(model, intra=cpus, spinning=False), 8)
    add(f"sorted, batch 8, 1 thread x {cpus} side by side", own, 8, workers=cpus)
    add(f"sorted, batch 32, 1 thread x {cpus} side by side", own, 32, workers=cpus)
    if int8 is not None:
        quantized = session(int8)
        add("int8: sorted, batch 8, 1 thread", quantized, 8)
        add(f"int8: sorted, batch 8, 1 thread x {cpus} side by side", quantized, 8, workers=cpus)
    return configs


def uniform(encoder: OnnxEncoder, texts: list[str], repeat: int, output: Path | None) -> int:
    """The batch size's own cost: every text cut to the same number of tokens, so no batch pads."""
    width = 64
    feeds = Feeds(encoder, texts)
    feeds.encodings = [e for e in feeds.encodings if len(e.ids) >= width]
    for e in feeds.encodings:
        e.truncate(width)
    feeds.lengths = [len(e.ids) for e in feeds.encodings]
    texts = texts[: len(feeds.lengths)]
    configs = {}
    for size in (1, 4, 8, 16, 32, 64, 128):
        batches = feeds.batches(size, by_length=True)
        configs[f"uniform {width} tokens, batch {size}"] = (
            (lambda b=batches: run_batches(encoder, encoder._session, b, 1)),
            len(texts),
        )
    figures = measure(configs, repeat)
    for name, f in figures.items():
        print(f"  {name:<36} {f['per_cpu_s']:7.1f} /CPU-s  {f['per_wall_s']:7.1f} /wall-s  load {f['load']:.2f}")
    if output:
        output.write_text(json.dumps({"texts": len(texts), "tokens": width, "figures": figures}, indent=2) + "\n")
    return 0


def call_sizes(encoder: OnnxEncoder, texts: list[str], sizes: list[int], args: argparse.Namespace) -> int:
    """`encoder.encode` on the same texts given in calls of each size (in the notes' order: a call
    of 5 is about one file's chunks), against the floor on all of them."""
    feeds = Feeds(encoder, texts)
    configs = {"floor": floor_config(encoder, feeds, BATCH_SIZE)}
    for size in sizes:
        calls = [texts[start : start + size] for start in range(0, len(texts), size)]

        def work(calls: list[list[str]] = calls) -> None:
            for call in calls:
                encoder.encode(call)

        def unsplit(calls: list[list[str]] = calls) -> None:
            """As before batching.batch_size: batches of BATCH_SIZE however few texts a call has."""
            chosen = batching.batch_size
            batching.batch_size = lambda texts, workers, largest: largest
            try:
                work(calls)
            finally:
                batching.batch_size = chosen

        configs[f"path, calls of {size}"] = (work, len(texts))
        if size < 2 * BATCH_SIZE:
            configs[f"path, calls of {size}, unsplit"] = (unsplit, len(texts))
    figures = measure(configs, args.repeat)
    floor = figures["floor"]["per_cpu_s"]
    print(f"notes: {len(texts)} texts, {np.mean(feeds.lengths):.1f} tokens on average")
    for name, f in figures.items():
        f["cpu_ratio_to_floor"] = round(f["per_cpu_s"] / floor, 3)
        print(
            f"  {name:<32} {f['per_cpu_s']:7.1f} /CPU-s ({f['cpu_ratio_to_floor']:.2f}x floor)"
            f"  {f['per_wall_s']:7.1f} /wall-s  load {f['load']:.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"texts": len(texts), "figures": figures}, indent=2) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=400, help="synthetic note files whose chunks are embedded")
    parser.add_argument("--turns", type=int, default=1500, help="LoCoMo dev turns embedded")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=None, help="the floor's batch size (default: the encoder's)")
    parser.add_argument("--sweep", action="store_true", help="also the knobs: sorting, batch sizes, threads, int8")
    parser.add_argument("--json", type=Path, help="write the figures to this file too")
    parser.add_argument(
        "--uniform",
        type=int,
        default=0,
        help="instead: batch sizes alone, on this many note chunks cut to one length (no padding at all)",
    )
    parser.add_argument(
        "--call-sizes",
        default="",
        help="instead: the path's rate when the texts come in calls of these sizes (comma-separated), "
        "as an indexer that embeds file by file or in small commits calls it",
    )
    args = parser.parse_args(argv)
    from memsearch.embedding import onnx

    encoder = load_encoder(resolve_model(), "onnx")
    assert isinstance(encoder, OnnxEncoder)
    size = args.batch or onnx.BATCH_SIZE
    int8 = ensure_quantized(ensure_export(resolve_model())) if args.sweep else None
    if args.call_sizes:
        return call_sizes(encoder, note_chunks(args.notes), [int(n) for n in args.call_sizes.split(",")], args)
    if args.uniform:
        return uniform(encoder, note_chunks(args.notes)[: args.uniform], args.repeat, args.json)
    corpora = {"notes": note_chunks(args.notes), "locomo turns": locomo_turns(args.turns)}
    report: dict[str, Any] = {"cpus": usable_cpus(), "batch": size, "load_start": Path("/proc/loadavg").read_text()}
    for corpus, texts in corpora.items():
        feeds = Feeds(encoder, texts)
        configs = {"floor": floor_config(encoder, feeds, size), "path": path_config(encoder, texts)}
        if args.sweep:
            configs |= sweep_configs(encoder, feeds, int8)
        figures = measure(configs, args.repeat)
        floor = figures["floor"]["per_cpu_s"]
        for figure in figures.values():
            figure["cpu_ratio_to_floor"] = round(figure["per_cpu_s"] / floor, 3)
        report[corpus] = {
            "texts": len(texts),
            "mean_tokens": round(float(np.mean(feeds.lengths)), 1),
            "figures": figures,
        }
        print(f"{corpus}: {len(texts)} texts, {np.mean(feeds.lengths):.1f} tokens on average")
        for name, f in figures.items():
            print(
                f"  {name:<44} {f['per_cpu_s']:7.1f} /CPU-s ({f['cpu_ratio_to_floor']:.2f}x floor)"
                f"  {f['per_wall_s']:7.1f} /wall-s  load {f['load']:.2f}"
            )
    report["load_end"] = Path("/proc/loadavg").read_text()
    print(f"load: start {report['load_start'].split()[:3]}, end {report['load_end'].split()[:3]}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    sys.exit(main())
