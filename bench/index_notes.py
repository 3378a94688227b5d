"""How long `memsearch index` takes on a folder of notes, and what a re-index costs.

A synthetic folder of markdown notes (deterministic from --seed: front matter with tags on some,
a title, two to five sections of one to three paragraphs, some lists and code blocks; ~2 KB a
file) is indexed into a new SQLite store three times:

1. first index: every file read, chunked and embedded;
2. re-index after editing --edit-percent of the files (one paragraph each): only their changed
   chunks are embedded; every other file is a stat and no read;
3. re-index with nothing changed: the walk and the stats only, nothing written (and the check
   of the store against the recorded sections: their keys and text hashes, one query).

It reports each run's wall time with the walk's time alone (measured separately, the floor of
any re-index) and checks that run 2 costs about (edited share × run 1) + the walk. The encoder is
wrapped to count the texts it embeds, which must be exactly the edited chunks.

It also measures the encoder's floor (bench/encoder_floor.py: sentences per CPU-second of the
encoder's own session) on the chunks of --floor-files notes, before and after the runs, and
reports the first index's embedding rate (texts per CPU-second of the encode calls) against it.

Run: python bench/index_notes.py [--files 1000] [--edit-percent 1] [--walk-files 10000] [--json]
     [--output FILE.json] [--floor-files 100]

Embedding is nearly all of a first index (99 %), about 63 ms a chunk (4.5 chunks, 280 ms a file)
with two busy cores: 1,000 files take ~5 minutes there, 2,000 ~10, and 10,000 (~45 minutes) are
left to `--files 10000`. `--walk-files` measures what is not embedding (the walk,
reading and chunking every file, the re-plans, the state document) on a folder that large.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memsearch.api import Memsearch
from memsearch.embedding import Encoder, Progress, load_encoder, resolve_model
from memsearch.ingest.indexing import IndexState
from memsearch.ingest.note_files import plan, walk, walked_reader
from memsearch.ingest.note_memories import checked_records
from memsearch.models import EmbeddingModelInfo, NewMemory
from memsearch.sections import NOTE_KEY_PREFIX
from memsearch.store import open_store
from memsearch.timeutil import utc_now

_WORD_TEXT = (
    "deploy release rollback service cluster node cache index query latency budget owner review incident "
    "postmortem migration schema table column backup restore secret vault token rotate certificate expiry "
    "garden tomato basil watering compost recipe risotto stock oven bread dough proof travel train ticket "
    "hotel passport meeting agenda decision follow-up roadmap quarter hiring interview feedback design "
    "prototype sketch user research survey metric dashboard alert pager weekend family birthday gift book "
    "chapter notes idea draft outline essay reading list podcast episode guitar chord practice run route"
)
WORDS = tuple(_WORD_TEXT.split())
TITLES = ("Runbook", "Meeting", "Project", "Recipe", "Journal", "Reading", "Trip", "Design", "Checklist", "Idea")
SECTIONS = ("Context", "Steps", "Decision", "Open questions", "Notes", "Links", "Follow-up", "Details", "Summary")
TAGS = ("work", "home", "ops", "cooking", "travel", "reading", "ideas", "people")


class CountingEncoder:
    """The real encoder, counting the texts it embeds and the time it takes (wall, and the process's
    CPU time while it embeds: the indexer does nothing else meanwhile)."""

    def __init__(self, encoder: Encoder) -> None:
        self.inner, self.info, self.texts, self.seconds, self.cpu_seconds = encoder, encoder.info, 0, 0.0, 0.0

    def encode(self, texts: Sequence[str], *, progress: Progress | None = None) -> np.ndarray:
        start, cpu = time.perf_counter(), time.process_time()
        try:
            return self.inner.encode(texts, progress=progress)
        finally:
            self.texts += len(texts)
            self.seconds += time.perf_counter() - start
            self.cpu_seconds += time.process_time() - cpu


def paragraph(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(2, 5)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(6, 16))]
        sentences.append(" ".join(words).capitalize() + ".")
    return " ".join(sentences)


def note(rng: random.Random, number: int) -> str:
    lines = []
    if rng.random() < 0.4:
        lines += ["---", f"tags: [{', '.join(rng.sample(TAGS, rng.randint(1, 3)))}]", "---"]
    lines += [f"# {rng.choice(TITLES)} {number}", "", paragraph(rng), ""]
    for section in rng.sample(SECTIONS, rng.randint(2, 5)):
        lines += [f"## {section}", ""]
        for _ in range(rng.randint(1, 3)):
            kind = rng.random()
            if kind < 0.15:
                lines += [f"- {rng.choice(WORDS)} {rng.choice(WORDS)}" for _ in range(rng.randint(2, 5))]
            elif kind < 0.22:
                lines += ["```sh", f"make {rng.choice(WORDS)} TARGET={rng.choice(WORDS)}", "```"]
            else:
                lines.append(paragraph(rng))
            lines.append("")
    return "\n".join(lines)


def make_folder(root: Path, files: int, seed: int) -> int:
    """The notes, 100 to a folder in two levels; returns their total size in bytes."""
    rng = random.Random(seed)
    size = 0
    for number in range(files):
        path = root / f"area{number // 1000:02d}" / f"topic{number // 100 % 10}" / f"note{number:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = note(rng, number)
        path.write_text(text, encoding="utf-8")
        size += len(text.encode("utf-8"))
    return size


def edit(root: Path, share: float, seed: int) -> int:
    """Append a sentence to the last paragraph of a share of the files (their mtime moved on); how many."""
    paths = sorted(root.rglob("*.md"))
    chosen = random.Random(seed + 1).sample(paths, max(1, round(len(paths) * share)))
    for path in chosen:
        text = path.read_text(encoding="utf-8").rstrip("\n")
        path.write_text(text + " Edited later with one more sentence.\n", encoding="utf-8")
        mtime = path.stat().st_mtime_ns + 1_000_000_000
        os.utime(path, ns=(mtime, mtime))
    return len(chosen)


def timed(ms: Memsearch, root: Path, encoder: CountingEncoder, interrupt_at: float | None = None) -> dict[str, Any]:
    """One index run; `interrupt_at`: a Ctrl-C (KeyboardInterrupt from the progress callback) once
    that share of the vectors is made."""
    before, embedding_before, cpu_before = encoder.texts, encoder.seconds, encoder.cpu_seconds
    load = Path("/proc/loadavg").read_text().split()[:3]
    start, cpu = time.perf_counter(), time.process_time()
    searchable: list[float] = []

    def on_progress(event: Any) -> None:  # the files are all stored (searchable by their words)
        if event.phase != "store" and not searchable:
            searchable.append(time.perf_counter() - start)
        if (
            interrupt_at is not None
            and event.phase == "vectors"
            and event.vectors_done >= interrupt_at * event.vectors_total
        ):
            raise KeyboardInterrupt

    interrupted = False
    try:
        outcome = ms.index([root], on_progress=on_progress) if PROGRESS else ms.index([root])
    except KeyboardInterrupt:
        interrupted, outcome = True, None
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    texts, embedding_cpu = encoder.texts - before, encoder.cpu_seconds - cpu_before
    return {
        "seconds": round(seconds, 3),
        "cpu_seconds": round(cpu, 3),
        "load_before": load,
        "load_after": Path("/proc/loadavg").read_text().split()[:3],
        "searchable_seconds": round(searchable[0], 3) if searchable else round(seconds, 3),
        "interrupted": interrupted,
        "vectors_pending_after": ms.store().pending_count() if PROGRESS else 0,
        "summary": outcome.summary if outcome else "interrupted",
        "files_read": outcome.reads if outcome else None,
        "chunks_stored": outcome.chunks_added if outcome else None,
        "texts_embedded": encoder.texts - before,
        "embedding_seconds": round(encoder.seconds - embedding_before, 3),
        "embedding_cpu_seconds": round(embedding_cpu, 3),
        "texts_per_embedding_cpu_s": round(texts / embedding_cpu, 2) if embedding_cpu else None,
    }


# The indexer reports progress (and stores files before their vectors) from this version on; the
# script also measures older code, where the files are searchable only once all vectors are made.
PROGRESS = "on_progress" in inspect.signature(Memsearch.index).parameters


def floor_rate(encoder: Encoder, texts: list[str], runs: int = 3) -> dict[str, Any]:
    """The encoder floor (bench/encoder_floor.py) on a sample of the folder's own chunks: sentences
    per CPU-second of the encoder's session, tokenised beforehand, length-sorted, batch after batch."""
    from encoder_floor import Feeds, floor_config, measure

    from memsearch.embedding import onnx
    from memsearch.embedding.onnx import OnnxEncoder

    if not isinstance(encoder, OnnxEncoder):
        return {}
    work = floor_config(encoder, Feeds(encoder, texts), onnx.BATCH_SIZE)
    return measure({"floor": work}, runs)["floor"]


def walk_and_plan(root: Path, files: int, share: float, seed: int) -> dict[str, Any]:
    """The part of an index run that is not embedding, on a larger folder: the walk, the plan of a
    first index (every file read, hashed and chunked), and the re-plans after an edit and unchanged."""
    make_folder(root, files, seed)
    figures: dict[str, Any] = {"files": files}
    start = time.perf_counter()
    states = walk([root])
    figures["walk_seconds"] = round(time.perf_counter() - start, 3)
    start = time.perf_counter()
    first = plan({}, states, walked_reader(states))
    figures["first_plan_seconds"] = round(time.perf_counter() - start, 3)
    figures["chunks"] = len(first.add_chunks)
    records = {file.path: file.record for file in first.files if file.record is not None}
    edited = edit(root, share, seed)
    start = time.perf_counter()
    states = walk([root])
    again = plan(records, states, walked_reader(states))
    figures["after_edit_walk_and_plan_seconds"] = round(time.perf_counter() - start, 3)
    figures["after_edit_reads"], figures["edited_files"] = again.reads, edited
    figures["after_edit_chunks_to_embed"] = len(again.add_chunks)
    for file in again.files:
        if file.record is not None:
            records[file.path] = file.record
    start = time.perf_counter()
    states = walk([root])
    unchanged = plan(records, states, walked_reader(states))
    figures["unchanged_walk_and_plan_seconds"] = round(time.perf_counter() - start, 3)
    figures["unchanged_reads"] = unchanged.reads
    start = time.perf_counter()
    document = IndexState({}, records).dump()
    figures["state_dump_seconds"] = round(time.perf_counter() - start, 3)
    start = time.perf_counter()
    IndexState.load(document)
    figures["state_load_seconds"] = round(time.perf_counter() - start, 3)
    figures["state_bytes"] = len(document.encode("utf-8"))
    figures["store_check_seconds"] = _store_check(root.parent / "check.db", first, records, str(root))
    return figures


def _store_check(location: Path, first: Any, records: dict[str, Any], root: str) -> float:
    """The check every index run makes of the store against the recorded sections (`checked_records`
    over `key_hashes`), on a store holding the first plan's chunks (random vectors: no embedding);
    the median of 5."""
    rng = np.random.default_rng(0)
    memories = [NewMemory(chunk.titled_text, key=chunk.key) for chunk in first.add_chunks]
    vectors = rng.standard_normal((len(memories), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = open_store(location, create=True)
    try:
        store.insert(memories, vectors, EmbeddingModelInfo("bench", 384), utc_now())
        times = []
        for _ in range(5):
            start = time.perf_counter()
            checked_records(records, store.key_hashes(NOTE_KEY_PREFIX), records, [root])
            times.append(time.perf_counter() - start)
    finally:
        store.close()
    return round(sorted(times)[2], 3)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--edit-percent", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--walk-files", type=int, default=10_000, help="files of the walk-and-plan figures (no embedding); 0: none"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--output", type=Path, help="also write the JSON figures to this file")
    parser.add_argument("--floor-files", type=int, default=100, help="files whose chunks measure the encoder floor")
    parser.add_argument(
        "--interrupt",
        type=float,
        default=0.5,
        help="Ctrl-C a second first index at this share of its vectors, then resume it; 0: not",
    )
    args = parser.parse_args(argv)
    encoder = CountingEncoder(load_encoder(resolve_model()))
    encoder.encode(["warm up"])
    from encoder_floor import note_chunks

    sample = note_chunks(args.floor_files, args.seed) if args.floor_files else []
    floors = [floor_rate(encoder.inner, sample)] if sample else []
    with tempfile.TemporaryDirectory(prefix="ms-index-bench-") as folder:
        root = Path(folder) / "notes"
        size = make_folder(root, args.files, args.seed)
        with Memsearch(Path(folder) / "store.db", encoder=encoder) as ms:
            first = timed(ms, root, encoder)
            edited = edit(root, args.edit_percent / 100, args.seed)
            second = timed(ms, root, encoder)
            third = timed(ms, root, encoder)
        resumed: dict[str, Any] = {}
        if args.interrupt and PROGRESS:  # a first index again, Ctrl-C'd part way, then the run that finishes it
            with Memsearch(Path(folder) / "again.db", encoder=encoder) as ms:
                resumed["interrupted"] = timed(ms, root, encoder, args.interrupt)
                resumed["resumed"] = timed(ms, root, encoder)
        if sample:
            floors.append(floor_rate(encoder.inner, sample))
            walks = []
            for _ in range(3):
                start = time.perf_counter()
                walk([root])
                walks.append(time.perf_counter() - start)
            chunks = len(ms.list())
        walked = (
            walk_and_plan(Path(folder) / "walked", args.walk_files, args.edit_percent / 100, args.seed)
            if args.walk_files
            else {}
        )
    walk_s = min(walks)
    share = edited / args.files
    expected = share * first["seconds"] + walk_s
    report = {
        "files": args.files,
        "bytes": size,
        "chunks": chunks,
        "edited_files": edited,
        "first_index": first,
        "after_edit": second,
        "unchanged": third,
        "interrupted_and_resumed": resumed,
        "walk_seconds": round(walk_s, 3),
        "first_ms_per_file": round(1000 * first["seconds"] / args.files, 2),
        "first_ms_per_chunk": round(1000 * first["seconds"] / max(1, chunks), 2),
        "expected_after_edit_seconds": round(expected, 3),
        "after_edit_over_expected": round(second["seconds"] / expected, 2),
        "after_edit_over_first": round(second["seconds"] / first["seconds"], 4),
        "embedding_share_of_first": round(first["embedding_seconds"] / first["seconds"], 3),
        "walk_and_plan": walked if args.walk_files else None,
        "floor_before_and_after": floors,
    }
    floor = statistics.median(f["per_cpu_s"] for f in floors if f) if any(floors) else None
    rate = first["texts_per_embedding_cpu_s"]
    report["floor_per_cpu_s"] = round(floor, 2) if floor else None
    report["first_embedding_rate_over_floor"] = round(rate / floor, 3) if floor and rate else None
    report["first_texts_per_embedding_wall_s"] = round(first["texts_embedded"] / first["embedding_seconds"], 2)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.files:,} files ({size / 1e6:.1f} MB), {chunks:,} chunks; {edited} files edited ({share:.1%})")
    for name, run in (("first index", first), ("after the edit", second), ("unchanged", third)):
        print(
            f"{name:>15}: {run['seconds']:8.2f} s  read {run['files_read']:>6,}  embedded {run['texts_embedded']:>6,}"
            f"  | {run['summary']}"
        )
    print(f"{'walk alone':>15}: {walk_s:8.2f} s")
    print(
        f"first index: searchable by words after {first['searchable_seconds']:.2f} s,"
        f" all vectors after {first['seconds']:.2f} s"
    )
    for name, run in resumed.items():
        print(
            f"{name:>15}: {run['seconds']:8.2f} s  embedded {run['texts_embedded']:>6,}  "
            f"waiting after {run['vectors_pending_after']:,}  | {run['summary']}"
        )
    print(f"first index: {first['embedding_seconds']:.2f} s of its {first['seconds']:.2f} s embedding")
    if floor and rate:
        print(
            f"embedding rate {rate:.1f} texts per CPU-second ({report['first_texts_per_embedding_wall_s']:.1f} per"
            f" wall second) = {report['first_embedding_rate_over_floor']:.2f}x the encoder floor {floor:.1f}"
        )
    print(
        f"first index {report['first_ms_per_file']} ms/file, {report['first_ms_per_chunk']} ms/chunk; "
        f"after the edit {second['seconds']:.2f} s = {report['after_edit_over_first']:.2%} of the first, "
        f"{report['after_edit_over_expected']}x the expected {expected:.2f} s ({share:.1%} of the first + the walk)"
    )
    if args.walk_files:
        w = walked
        print(
            f"walk and plan, no embedding, {w['files']:,} files ({w['chunks']:,} chunks): "
            f"walk {w['walk_seconds']:.2f} s; "
            f"first plan (read, hash, chunk all) {w['first_plan_seconds']:.2f} s; after editing {w['edited_files']} "
            f"{w['after_edit_walk_and_plan_seconds']:.2f} s ({w['after_edit_reads']} read, "
            f"{w['after_edit_chunks_to_embed']} chunks to embed); "
            f"unchanged {w['unchanged_walk_and_plan_seconds']:.2f} s "
            f"({w['unchanged_reads']} read); state document {w['state_bytes'] / 1e6:.1f} MB, "
            f"load {w['state_load_seconds']:.2f} s, dump {w['state_dump_seconds']:.2f} s; "
            f"store check {w['store_check_seconds']:.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
