"""Which modules of memsearch the quick tier leaves unexercised: `python -m tests.quick_coverage`
runs `pytest -m quick` (extra arguments go to pytest) while recording every function of
memsearch that a test (its setup, call or teardown, not collection) enters, then lists the modules
that define functions of which none ran. Exit status 1 if there are any."""

from __future__ import annotations

import ast
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "memsearch"


class Recorder:
    """A pytest plugin: the source files of the functions entered while tests run."""

    def __init__(self) -> None:
        self.files: set[str] = set()

    def _profile(self, frame: FrameType, event: str, _: Any) -> None:
        if event == "call":
            self.files.add(frame.f_code.co_filename)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self) -> Iterator[None]:
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        try:
            return (yield)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)


def _is_stub(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A body of only a docstring and `...` (a protocol's method): nothing there to run."""
    body = function.body[1:] if ast.get_docstring(function) is not None else function.body
    return all(isinstance(line, ast.Expr) and isinstance(line.value, ast.Constant) for line in body)


def defines_functions(path: Path) -> bool:
    """Whether the module defines a function with code to run (stubs do not count)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = (node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef))
    return any(not _is_stub(function) for function in functions)


def unexercised(files: set[str]) -> list[str]:
    """The modules of memsearch that define functions, none of them entered."""
    ran = {Path(file).resolve() for file in files}
    modules = sorted(path for path in PACKAGE.rglob("*.py") if defines_functions(path))
    return [str(path.relative_to(PACKAGE.parent)) for path in modules if path.resolve() not in ran]


def main(arguments: list[str]) -> int:
    recorder = Recorder()
    code = pytest.main(["-p", "no:cacheprovider", "-m", "quick", *arguments], plugins=[recorder])
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        return int(code)
    missing = unexercised(recorder.files)
    for module in missing:
        print(f"no quick test enters a function of {module}")
    print(f"{len(missing)} module(s) of memsearch without quick coverage")
    return 1 if missing or code != pytest.ExitCode.OK else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
