"""What adding a second model to a conversation's store costs (issue 33: `reindex --add-model gemma`).

One LoCoMo dev conversation is imported as `memsearch eval` imports it (turns with their views and
session chunks) into a fresh store, then `Memsearch.add_model(NAME)` embeds every memory's text
with the model; the wall time and this process's CPU time of that call (the model's load
included) are reported, with the
memories by kind and their token counts. Run it alone: other processes on the cores slow it.

The model is found as memsearch finds it (MEMSEARCH_MODELS_DIR …); `bench/models.py --models gemma`
assembles EmbeddingGemma.

Run: python bench/add_model.py [--conversation conv-30] [--model gemma]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchdata import LOCOMO_DEV  # bench/ is on the path when a script of it runs

from memsearch.api import Memsearch
from memsearch.eval.datasets import load_locomo
from memsearch.ingest.conversations import conversation_memories

DATA = LOCOMO_DEV


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversation", default="conv-30")
    parser.add_argument("--model", default="gemma")
    args = parser.parse_args()
    conversation = next(c for c, _ in load_locomo(DATA) if c.id == args.conversation)
    memories = conversation_memories(conversation, sessions=True)
    kinds = {kind: sum(m.kind == kind for m in memories) for kind in ("turn", "session")}
    with tempfile.TemporaryDirectory(prefix="memsearch-add-model-") as folder, Memsearch(Path(folder) / "s.db") as ms:
        ms.add_many(memories)
        tick, cpu = time.perf_counter(), cpu_seconds()
        info = ms.add_model(args.model)
        wall, used = time.perf_counter() - tick, cpu_seconds() - cpu
    result = {
        "conversation": args.conversation,
        "model": info.name,
        "memories": kinds,
        "wall_s": round(wall, 1),
        "cpu_s": round(used, 1),
        "memories_per_s": round(len(memories) / wall, 2),
        "cpus": len(os.sched_getaffinity(0)),
        "load_average_1m_after": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
