"""Static shell-completion scripts for `memsearch`, generated from the Typer command tree.

The scripts are committed under completions/ and never call back into Python at tab time, so
completing stays instant (no torch import). Regenerate them after changing the CLI:

    python -m memsearch.cli.completions           # rewrite completions/*
    python -m memsearch.cli.completions --check   # exit 1 if any is stale
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memsearch.cli import shells
from memsearch.cli.app import app
from memsearch.cli.shells import FILES, SHELLS

__all__ = ["FILES", "SHELLS", "generate", "main"]


def generate(shell: str) -> str:
    """The completion script of `memsearch` for `shell` (one of SHELLS)."""
    return shells.generate(shell, app)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memsearch.cli.completions", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed script is stale; write nothing")
    args = parser.parse_args(argv)
    directory = Path(__file__).resolve().parents[2] / "completions"  # memsearch/cli/completions.py -> repo root
    stale = []
    for shell in SHELLS:
        target, script = directory / FILES[shell], generate(shell)
        if target.exists() and target.read_text(encoding="utf-8") == script:
            continue
        stale.append(target)
        if not args.check:
            directory.mkdir(exist_ok=True)
            target.write_text(script, encoding="utf-8", newline="\n")
            print(f"wrote {target}")
    if args.check and stale:
        print("stale completion scripts (run `python -m memsearch.cli.completions`):", file=sys.stderr)
        print("\n".join(f"  {path}" for path in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
