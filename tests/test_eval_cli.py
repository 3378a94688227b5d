"""`memsearch eval` as a user runs it: plain lines in a pipe, help at 80 columns, -o FILE, --plot FILE."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from memsearch.choices import BENCHMARK_FORMATS, GRANULARITIES, MODES
from tests.test_cli import run

TINY = Path(__file__).parent / "data" / "locomo_tiny.json"
# One profile in lexical mode: the quickest run that still has a baseline, both granularities and
# every category of the file.
QUICK = ("eval", str(TINY), "-d", "locomo", "-p", "default", "-m", "lexical")


def blocks(out: str) -> list[list[list[str]]]:
    """Plain output as blocks (split at blank lines) of lines split at tabs."""
    return [[line.split("\t") for line in block.splitlines()] for block in out.strip("\n").split("\n\n")]


def test_in_a_pipe_each_table_is_a_header_and_a_line_per_row() -> None:
    result = run(*QUICK)
    overall, categories = blocks(result.stdout)
    assert overall[0] == ["granularity", "profile", "mode", "n", "R@5", "R@10", "R@25", "R@50", "NDCG@10", "p50 ms",
                          "p95 ms"]  # fmt: skip
    assert categories[0] == ["granularity", "profile", "mode", "category", "n", "R@5", "R@10"]
    for block in (overall, categories):
        assert all(len(line) == len(block[0]) for line in block), block  # no cell wrapped onto a line of its own
    assert {line[0] for line in overall[1:]} == {"turn", "session"}
    assert overall[1][:3] == ["turn", "default", "lexical"]
    assert {line[3] for line in categories[1:]} == {"multi-hop", "temporal", "single-hop", "adversarial"}
    assert " / " not in result.stdout and "─" not in result.stdout
    # the titles and timing are not data: they go to stderr
    assert "locomo-evidence-recall" in result.stderr and "total" in result.stderr


def test_help_fits_80_columns() -> None:
    shown = run("eval", "--help", env={"COLUMNS": "80"}).stdout
    assert max(len(line) for line in shown.splitlines()) <= 80
    assert "…" not in shown  # no option name, default or help word cut
    words = set(re.findall(r"[\w-]+", shown))
    for choice in (*BENCHMARK_FORMATS, *MODES, *GRANULARITIES, "table", "json"):
        assert choice in words, choice  # whole, not folded mid-word ("longmeme" / "val")
    assert "[default: table]" in shown
    assert re.search(r"--output\s+-o\s+FILE", shown) and re.search(r"--format\s+-f\s+table\|json", shown)
    assert "--no-baseline" in shown and "--plot" in shown


@pytest.mark.slow  # an evaluation with the model: out of the quick tier
def test_o_writes_the_report_to_a_file_and_plot_draws_an_svg(tmp_path: Path) -> None:
    report, picture = tmp_path / "report.json", tmp_path / "recall.svg"
    result = run(*QUICK, "-f", "json", "-o", str(report), "--plot", str(picture))
    assert result.stdout == ""
    assert f"wrote the report to {report}" in result.stderr and f"wrote the plot to {picture}" in result.stderr
    document = json.loads(report.read_text(encoding="utf-8"))
    rows = document["rows"]
    bars = 2 * sum(1 for row in rows for group in row["by_category"].values() if group.get("recall@5") is not None)
    ids = [element.get("id", "") for element in ElementTree.parse(picture).iter()]
    assert sum(i.startswith("recall-curve-") for i in ids) == len(rows) == 3  # default/lexical × 2 + the baseline
    assert sum(i.startswith("category-bar-") for i in ids) == bars == 2 * 4 * 3
    text = "".join(ElementTree.parse(picture).getroot().itertext())
    assert "Recall@k" in text and "turn level" in text and "multi-hop" in text


def test_plot_png_and_a_plain_report_file(tmp_path: Path) -> None:
    report, picture = tmp_path / "report.tsv", tmp_path / "recall.png"
    run(*QUICK, "--no-baseline", "-g", "turn", "-o", str(report), "--plot", str(picture))
    overall, categories = blocks(report.read_text(encoding="utf-8"))  # a file gets the plain lines
    assert len(overall) == 2 and len(categories) == 1 + 4
    data = picture.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert 800 <= width <= 2000 and 600 <= height <= 2000 and len(data) > 20_000


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--plot", "{tmp}/recall.pdf"], "must end in .svg or .png"),
        (["--plot", "{tmp}/missing/recall.svg"], "there is no folder"),
        (["-o", "json"], "for the json format use -f json"),
    ],
)
def test_bad_targets_fail_before_the_run(tmp_path: Path, arguments: list[str], message: str) -> None:
    error = run(*QUICK, *(a.replace("{tmp}", str(tmp_path)) for a in arguments), code=2).stderr
    assert message in error and len(error.strip().splitlines()) == 1 and "eval " not in error


def test_plot_without_matplotlib_names_the_extra(tmp_path: Path) -> None:
    """As on a machine without the plot extra: importing matplotlib fails (a None in sys.modules)."""
    script = "import sys; sys.modules['matplotlib'] = None; from memsearch.cli.app import main; main()"
    argv = [sys.executable, "-c", script, *QUICK, "--plot", str(tmp_path / "recall.svg")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (
        'memsearch: plotting needs matplotlib, the plot extra: pip install "memsearch[plot]"'
    )
    assert done.stdout == "" and not (tmp_path / "recall.svg").exists()


def test_matplotlib_is_imported_only_for_a_plot() -> None:
    modules = "memsearch.cli.app, memsearch.cli.evaluation, memsearch.eval.report, memsearch.eval.plot"
    code = f"import sys, {modules}; print('matplotlib' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"
