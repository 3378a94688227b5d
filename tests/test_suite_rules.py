"""Rules of the test suite itself: a test that starts a process gives it a deadline, so a hung
child fails one test instead of stalling the run."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
RUNS = {"run", "check_output", "check_call", "call"}  # subprocess's functions that wait for the child
WAITS = {"wait", "communicate"}  # a Popen's methods that do


def calls_without_timeout(source: str) -> list[tuple[int, str]]:
    """(line, call) for each call in `source` that waits for a child process with no timeout:
    subprocess.run/check_output/check_call/call, and any .wait() or .communicate() (a Popen's,
    or a thread's event: both need a deadline). A call that passes **keywords is let through."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        keywords = {keyword.arg for keyword in node.keywords}
        if "timeout" in keywords or None in keywords:
            continue
        target, name = node.func.value, node.func.attr
        waits_for_a_child = name in WAITS or (
            isinstance(target, ast.Name) and target.id == "subprocess" and name in RUNS
        )
        if waits_for_a_child and not (name == "wait" and node.args):  # wait(30): a positional timeout
            found.append((node.lineno, ast.unparse(node)[:80]))
    return found


def test_the_detector_sees_a_call_without_a_timeout() -> None:
    source = "subprocess.run(['x'], check=True)\nchild.wait()\nchild.communicate(input=b'')\n"
    source += "subprocess.run(['x'], timeout=5)\nchild.wait(timeout=5)\nsubprocess.Popen(['x'])\nsubprocess.run(**kw)\n"
    assert [line for line, _ in calls_without_timeout(source)] == [1, 2, 3]


def test_every_wait_for_a_child_process_has_a_timeout() -> None:
    missing = [
        f"{path.relative_to(TESTS.parent)}:{line}: {call}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, call in calls_without_timeout(path.read_text(encoding="utf-8"))
    ]
    assert missing == [], "\n".join(missing)
