"""Which modules a real `memsearch` process imports: the check that a command stays lean."""

from __future__ import annotations

import json
import os
import subprocess
import sys

_PROBE = """
import json, sys
from memsearch.cli.app import command_app
sys.argv = ["memsearch", *sys.argv[1:]]
try:
    command_app(sys.argv[1:])()  # as the console entry point does
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


def modules_imported_by(*args: str, check: bool = False, env: dict[str, str] | None = None) -> set[str]:
    """Run `memsearch ARGS` in a fresh interpreter (with `env` added to the environment); the
    names of every module it had imported."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        check=check,
        timeout=120,
        env=None if env is None else {**os.environ, **env},
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr
    return set(json.loads(lines[-1]))


_AFTER = """
import sys
from memsearch.cli.app import command_app
code, sys.argv = sys.argv[1], ["memsearch", *sys.argv[2:]]
try:
    command_app(sys.argv[1:])()
except SystemExit:
    pass
print()
exec(code)  # prints its finding as the last line
"""


def run_then(code: str, *args: str) -> str:
    """Run `memsearch ARGS` in a fresh interpreter, then `code` in it: the last line `code` printed."""
    done = subprocess.run(
        [sys.executable, "-c", _AFTER, code, *args], capture_output=True, text=True, check=True, timeout=120
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr
    return lines[-1]
