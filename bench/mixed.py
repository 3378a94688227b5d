"""Mixed stores: do notes and conversation turns get a fair ranking? (shared/benchdata/README.md)

For every ordered pair (A, B) of LoCoMo dev conversations, A's questions are asked of
- notes(A) alone and notes(A) + turns(B) (B imported as a conversation, session chunks included);
- turns(A) alone and turns(A) + notes(B),
where notes are a conversation's `observation` facts, each citing the turn it came from. An
evidence id is found at k when its turn, or a note citing it, is in the top k. B answers none of
A's questions, so a fair ranker keeps R@5(with B) / R@5(alone) at 1; the target is >= 0.97.

Each distinct text is embedded once and cached under --cache (vectors are the model's own), so a
rerun only builds stores and searches. Run: python bench/mixed.py [--profile default] [--pairs N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memsearch.api import Memsearch
from memsearch.embedding import Encoder, load_encoder, resolve_model
from memsearch.eval.datasets import load_locomo
from memsearch.eval.scoring import last_date
from memsearch.ingest.conversations import conversation_memories
from memsearch.ingest.readers import parse_locomo_date
from memsearch.models import NewMemory
from memsearch.retrieval.pipeline import SearchRequest

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "benchdata" / "locomo_dev.json"
K = 5


class CachingEncoder:
    """The real encoder, with every text it has embedded kept (and saved) by its text."""

    def __init__(self, encoder: Encoder, path: Path) -> None:
        self.encoder, self.path, self.info = encoder, path, encoder.info
        self.cache: dict[str, np.ndarray] = {}
        if path.exists():
            saved = np.load(path, allow_pickle=False)
            self.cache = dict(zip(json.loads(str(saved["texts"])), saved["vectors"], strict=True))
        self.dirty = False

    def encode(self, texts: Sequence[str], progress: Any = None) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            self.cache.update(zip(missing, self.encoder.encode(missing), strict=True))
            self.dirty = True
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, self.info.dim), np.float32)

    def save(self) -> None:
        if self.dirty:
            texts = list(self.cache)
            np.savez(self.path, texts=json.dumps(texts), vectors=np.stack([self.cache[t] for t in texts]))


def observation_notes(raw: dict[str, Any]) -> list[NewMemory]:
    """A conversation's observation facts as notes citing their turn (metadata `evidence`)."""
    conversation = raw["conversation"]
    notes = []
    for name, by_speaker in raw["observation"].items():
        session = name.removesuffix("_observation")
        date = parse_locomo_date(conversation[f"{session}_date_time"])
        for facts in by_speaker.values():
            for text, evidence in facts:
                if isinstance(evidence, str) and text.strip():
                    notes.append(NewMemory(text, created_at=date, metadata={"evidence": evidence}))
    return [
        NewMemory(n.text, key=f"{raw['sample_id']}/obs/{i}", created_at=n.created_at, metadata=n.metadata)
        for i, n in enumerate(notes)
    ]


def found_evidence(outcome: Any, conversation_id: str) -> set[str]:
    found = set()
    for candidate in outcome.results[:K]:
        memory = candidate.memory
        if memory.key is None or not memory.key.startswith(f"{conversation_id}/"):
            continue
        if memory.kind == "turn":
            found.add(memory.key.removeprefix(f"{conversation_id}/"))
        elif memory.kind == "note" and "evidence" in memory.metadata:
            found.add(memory.metadata["evidence"])
    return found


def recall(ms: Memsearch, conversation: Any, questions: Sequence[Any], profile: str) -> float:
    as_of = last_date(conversation)
    scores = []
    for question in questions:
        gold = set(question.evidence_keys)
        if not question.is_scored or not gold:
            continue
        outcome = ms.search(SearchRequest(question.text, k=K, as_of=as_of, touch=False, profile=profile))
        scores.append(len(found_evidence(outcome, conversation.id) & gold) / len(gold))
    return statistics.fmean(scores)


def build(folder: Path, name: str, encoder: CachingEncoder, parts: Sequence[list[NewMemory]]) -> Memsearch:
    ms = Memsearch(folder / f"{name}.db", encoder=encoder)  # type: ignore[arg-type]
    for memories in parts:
        ms.add_many(memories)
    return ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--profile", default="default")
    parser.add_argument("--pairs", type=int, default=None, help="only the first N ordered pairs")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "memsearch-mixed-vectors.npz")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    raw = {sample["sample_id"]: sample for sample in json.loads(args.data.read_text(encoding="utf-8"))}
    data = {conversation.id: (conversation, questions) for conversation, questions in load_locomo(args.data)}
    encoder = CachingEncoder(load_encoder(resolve_model()), args.cache)
    turns = {cid: conversation_memories(conversation) for cid, (conversation, _) in data.items()}
    notes = {cid: observation_notes(raw[cid]) for cid in data}
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        alone: dict[tuple[str, str], float] = {}
        for cid, (conversation, questions) in data.items():
            for kind, memories in (("notes", notes[cid]), ("turns", turns[cid])):
                with build(folder, f"{kind}-{cid}", encoder, [memories]) as ms:
                    alone[kind, cid] = recall(ms, conversation, questions, args.profile)
        encoder.save()
        pairs = list(itertools.permutations(data, 2))[: args.pairs]
        for a, b in pairs:
            conversation, questions = data[a]
            for kind, parts in (("notes", [notes[a], turns[b]]), ("turns", [turns[a], notes[b]])):
                with build(folder, f"{kind}-{a}-{b}", encoder, parts) as ms:
                    mixed = recall(ms, conversation, questions, args.profile)
                rows.append({"a": a, "b": b, "a_kind": kind, "alone": alone[kind, a], "mixed": mixed,
                             "ratio": mixed / alone[kind, a]})  # fmt: skip
    summary = {
        kind: {
            "min": min(r["ratio"] for r in rows if r["a_kind"] == kind),
            "mean": statistics.fmean(r["ratio"] for r in rows if r["a_kind"] == kind),
        }
        for kind in ("notes", "turns")
    }
    if args.json:
        print(json.dumps({"profile": args.profile, "rows": rows, "summary": summary, "alone": {
            f"{kind}/{cid}": value for (kind, cid), value in alone.items()}}, indent=1))  # fmt: skip
        return
    print(f"profile {args.profile}; R@{K}; {len(rows)} stores in {time.perf_counter() - started:.0f} s")
    print(f"{'A':8} {'B':8} {'A is':6} {'alone':>7} {'with B':>7} {'ratio':>7}")
    for r in rows:
        print(f"{r['a']:8} {r['b']:8} {r['a_kind']:6} {r['alone']:7.3f} {r['mixed']:7.3f} {r['ratio']:7.3f}")
    for kind, figures in summary.items():
        print(f"A as {kind}: min ratio {figures['min']:.3f}, mean {figures['mean']:.3f}")


if __name__ == "__main__":
    main()
