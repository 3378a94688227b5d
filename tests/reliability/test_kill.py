"""`kill -9` of an import at random moments (the suite's all-or-nothing check): after each kill
the store holds all of the import or none of it, and stays consistent."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memsearch.embedding import Encoder
from tests.reliability.helpers import check_consistent, child_env, run_cli


def kill_imports_at_random(tmp_path: Path, rounds: int, seed: int, batch: int = 40) -> dict[str, float]:
    """Start `rounds` imports of `batch` memories each, killing each after a random delay that
    covers start-up, embedding and the commit. Returns how many were killed before any write,
    how many were cut off, and how many finished."""
    rng = random.Random(seed)
    db = tmp_path / "store" / "memsearch.db"
    assert run_cli("add", "seed memory", "--db", str(db)).returncode == 0
    expected = 1
    outcome: dict[str, float] = {"killed": 0, "finished": 0}
    full_run: float | None = None  # how long an import takes when left alone, measured by the first round
    for round_number in range(rounds):
        source = tmp_path / f"import-{round_number}.jsonl"
        source.write_text(
            "".join(
                json.dumps({"text": f"round {round_number} note {i} about the deploy", "key": f"r{round_number}-{i}"})
                + "\n"
                for i in range(batch)
            ),
            encoding="utf-8",
        )
        child = subprocess.Popen(
            [sys.executable, "-m", "memsearch", "import", str(source), "--db", str(db)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=child_env(),
        )
        started = time.monotonic()
        if full_run is None:
            child.wait(timeout=300)
            full_run = time.monotonic() - started
        else:  # anywhere from start-up to just past the commit
            time.sleep(rng.uniform(0.1, 1.1) * full_run)
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)  # may land just after the child exited on its own
        child.wait(timeout=300)
        # the exit code, not whether we sent the signal, tells which happened
        assert child.stderr is not None
        assert child.returncode in (0, -signal.SIGKILL), (round_number, child.returncode, child.stderr.read())
        outcome["finished" if child.returncode == 0 else "killed"] += 1
        count = check_consistent(db)
        assert count in (expected, expected + batch), (round_number, count, expected)  # all or nothing
        expected = count
    outcome["memories"] = expected
    outcome["seconds_per_import"] = round(full_run or 0, 1)
    return outcome


@pytest.mark.timeout(900)  # six imports in child processes, each allowed 300 s
def test_kill_9_of_imports_at_random_moments_is_all_or_nothing(tmp_path: Path, encoder: Encoder) -> None:
    seed = int(os.environ.get("MEMSEARCH_KILL_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    outcome = kill_imports_at_random(tmp_path, rounds=6, seed=seed)
    assert outcome["killed"] + outcome["finished"] == 6


@pytest.mark.soak
@pytest.mark.timeout(3600)  # minutes of load by design
def test_soak_kill_9_of_imports(tmp_path: Path, encoder: Encoder) -> None:
    outcome = kill_imports_at_random(tmp_path, rounds=40, seed=9)
    print(f"soak kills: {outcome}")
    assert outcome["killed"] >= 10 and outcome["finished"] >= 5
