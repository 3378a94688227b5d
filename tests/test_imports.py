"""Commands that need no model never import torch (its import alone takes seconds)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memsearch.api import Memsearch
from memsearch.models import NewMemory

PROBE = """
import sys
from memsearch.cli.app import app
sys.argv = ["memsearch", *sys.argv[1:]]
try:
    app()
except SystemExit as stop:
    code = stop.code
print(json.dumps({"code": code, "torch": "torch" in sys.modules, "onnxruntime": "onnxruntime" in sys.modules,
                  "eval": any(name.startswith("memsearch.eval") for name in sys.modules)}))
"""


def probe(*args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + PROBE, *args], capture_output=True, text=True, check=False, timeout=120
    )
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.fixture
def store(db_path: Path, ms: Memsearch) -> Path:
    ms.add(NewMemory("the deploy key is in the vault", key="deploy"))
    ms.close()
    return db_path


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["path"],
        ["list"],
        ["get", "1"],
        ["get", "deploy"],
        ["stats"],
        ["search", "deploy key", "--mode", "lexical"],
    ],
)
def test_no_torch_and_no_model(store: Path, args: list[str]) -> None:
    needs_db = args[0] not in ("--help",)
    seen = probe(*args, *(["--db", str(store)] if needs_db else []))
    assert seen == {"code": 0, "torch": False, "onnxruntime": False, "eval": False}


def test_the_console_entry_point_exits_with_the_commands_code(store: Path) -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "memsearch", "get", "deploy", "--db", str(store), "-f", "json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["key"] == "deploy"
    missing = subprocess.run(
        [sys.executable, "-m", "memsearch", "get", "nope", "--db", str(store)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert missing.returncode == 1 and missing.stderr.startswith("memsearch: no memory with key")
    usage = subprocess.run(
        [sys.executable, "-m", "memsearch", "search"], capture_output=True, text=True, check=False, timeout=120
    )
    assert usage.returncode == 2


def test_vector_search_uses_the_fast_route_without_torch(store: Path) -> None:
    seen = probe("search", "where is the deploy key", "--mode", "hybrid", "--db", str(store))
    assert seen == {"code": 0, "torch": False, "onnxruntime": True, "eval": False}
