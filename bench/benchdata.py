"""Where the benchmark data is: shared/benchdata beside the checkout (../shared from /work/main,
../../shared from a worktree in /work/wt), found by walking up from this folder."""

from __future__ import annotations

from pathlib import Path

LOCOMO_DEV = next(
    (
        folder / "shared" / "benchdata" / "locomo_dev.json"
        for folder in Path(__file__).resolve().parents
        if (folder / "shared" / "benchdata" / "locomo_dev.json").is_file()
    ),
    Path("shared/benchdata/locomo_dev.json"),
)
