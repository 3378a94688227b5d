"""What reaches the terminal (issue 8, items 7 and 8): stored text shown literally with control
characters visible, tables that keep id, rank, score and text at 80 and 120 columns, and plain
tab-separated lines when stdout is not a terminal."""

from __future__ import annotations

import io
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from memsearch.cli.grid import COLUMN_OVERHEAD, EDGE, TEXT_MIN, Role, fit_widths
from memsearch.cli.literal import literal, one_line, visible
from tests.test_cli import run, terminal, unstyled

MARKUP_LIKE = [
    "config in [/usr/local/etc]",
    "${arr[@]}",
    "list[int]",
    "[x] done",
    "matrix[i][j]",
    "[link=http://x]click[/link]",
    "[bold red]not styled[/]",
    "emoji code :smile: stays",
]
CONTROL = "clear \x1b[2J title \x1b]0;x\x07 c1\x9b del\x7f bidi\u202eevil nul\x00 end"
CONTROL_SHOWN = "clear \\x1b[2J title \\x1b]0;x\\x07 c1\\x9b del\\x7f bidi\\u202eevil nul\\x00 end"


# -- the helper ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", MARKUP_LIKE)
def test_literal_text_is_never_markup(text: str) -> None:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(literal(text))
    assert out.getvalue() == text + "\n"


def test_control_characters_are_made_visible() -> None:
    assert visible(CONTROL) == CONTROL_SHOWN
    assert one_line("two\nlines\r\n\tand a tab") == "two lines and a tab"
    assert one_line("x" * 10, limit=5) == "xxxx…"
    assert literal("a\nb\x1b", lines=True).plain == "a\nb\\x1b"
    assert visible("ünïcode, emoji 🙂, CJK 密钥, joiner 👩\u200d💻") == "ünïcode, emoji 🙂, CJK 密钥, joiner 👩\u200d💻"


@given(st.text())
def test_nothing_that_drives_a_terminal_survives(text: str) -> None:
    for shown in (visible(text), one_line(text), literal(text, lines=True).plain):
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]", shown)


# -- fitting columns -------------------------------------------------------------------------------


def test_key_columns_keep_their_width_and_metadata_is_cut_then_dropped() -> None:
    roles: list[Role] = ["key", "meta", "meta", "meta", "meta", "text"]
    naturals = [3, 16, 80, 40, 60, 160]
    minimums = [6, 16, 6, 7, 6, 6]
    wide = fit_widths(roles, naturals, 120, minimums)
    assert wide == [3, 16, 11, 11, 11, 49]  # every column; the text gets half of what the keys leave
    narrow = fit_widths(roles, naturals, 80, minimums)
    assert narrow == [3, 16, 7, 8, 0, 30]  # tags, the rightmost metadata, dropped first
    tiny = fit_widths(roles, naturals, 50, minimums)
    assert tiny == [3, 0, 0, 0, 0, 50 - EDGE - 2 * COLUMN_OVERHEAD - 3]  # id and text only


@given(
    st.lists(
        st.tuples(st.sampled_from(["key", "meta", "text"]), st.integers(1, 200), st.integers(1, 20)),
        min_size=1,
        max_size=8,
    ),
    st.integers(40, 300),
)
def test_fitted_widths_never_squeeze_key_columns(columns: list[tuple[str, int, int]], width: int) -> None:
    roles = [role for role, _, _ in columns]
    naturals = [natural for _, natural, _ in columns]
    widths = fit_widths(roles, naturals, width, [minimum for _, _, minimum in columns])  # type: ignore[arg-type]
    shown = [w for w in widths if w > 0]
    texts = roles.count("text")
    keys = roles.count("key")
    for role, natural, width_given in zip(roles, naturals, widths, strict=True):
        assert width_given <= natural
        if role == "key":
            assert width_given == natural
    fixed = sum(n for r, n in zip(roles, naturals, strict=True) if r == "key")
    text_floor = sum(min(n, TEXT_MIN // texts) for r, n in zip(roles, naturals, strict=True) if r == "text")
    if fixed + text_floor + COLUMN_OVERHEAD * (keys + texts) + EDGE <= width:  # the essentials fit
        assert sum(shown) + COLUMN_OVERHEAD * len(shown) + EDGE <= width
        for role, natural, width_given in zip(roles, naturals, widths, strict=True):
            if role == "text":
                assert width_given >= min(natural, TEXT_MIN // texts)


# -- the commands ----------------------------------------------------------------------------------

LONG_KEY = "deployment-configuration-of-the-payment-service-in-the-eu-west-region-" * 2
TAGS = ["infrastructure", "deployment", "payments", "europe", "on-call", "runbook", "kubernetes"]
PROJECT = "a-really-long-project-name-for-the-platform-team"


@pytest.fixture
def crowded() -> list[str]:
    """Notes with long keys, many tags and long project names, and markup-like texts."""
    texts = [f"Runbook step {n}: restart the payment worker pool number {n} after the deploy" for n in range(6)]
    for n, text in enumerate(texts):
        run("add", text, "--key", f"{LONG_KEY}{n}", "--project", PROJECT, *[a for t in TAGS for a in ("-t", t)])
    for text in MARKUP_LIKE:
        run("add", text, "--key", f"[key]{text}", "-t", "[red]tag", "--project", "[/p]", "--meta", "src=[b]x[/b]")
    return [*texts, *MARKUP_LIKE]


def _table_rows(out: str) -> list[list[str]]:
    """The cells of each line of a boxed table (continuation lines included)."""
    return [[c.strip() for c in line.strip("│").split("│")] for line in out.splitlines() if line.startswith("│")]


@pytest.mark.parametrize("columns", [80, 120])
def test_list_keeps_ids_and_text_at_any_width(crowded: list[str], columns: int) -> None:
    out = unstyled(run("list", "-n", "0", env=terminal(columns)).stdout)
    assert all(len(line) <= columns for line in out.splitlines())
    rows = _table_rows(out)
    ids = {int(row[0]) for row in rows if row[0].isdigit()}
    assert ids == set(range(1, len(crowded) + 1))
    flat = " ".join(" ".join(cell for cell in row[1:]) for row in rows)
    for text in MARKUP_LIKE:  # every text whole (a wrapped cell continues on the next line)
        assert text.split()[0] in flat
    assert "restart the" in flat


@pytest.mark.parametrize("columns", [80, 120])
def test_search_keeps_rank_id_score_and_text(crowded: list[str], columns: int) -> None:
    out = unstyled(run("search", "restart the payment worker", "-k", "5", env=terminal(columns)).stdout)
    assert all(len(line) <= columns for line in out.splitlines())
    ranked = [row for row in _table_rows(out) if row[0].isdigit()]
    assert [int(row[0]) for row in ranked] == [1, 2, 3, 4, 5]
    assert all(row[1].isdigit() and re.fullmatch(r"0\.\d{4}", row[2]) for row in ranked)
    assert all(row[-1].startswith("Runbook step") for row in ranked)


def test_raw_is_readable_at_80_columns(crowded: list[str]) -> None:
    out = unstyled(run("search", "restart the payment worker", "-k", "2", "--raw", env=terminal(80)).stdout)
    assert all(len(line) <= 80 for line in out.splitlines())
    raw = out[out.index("candidates before filtering") :]
    rows = _table_rows(raw)
    assert not any(all(cell == "" for cell in row) for row in rows)  # no blank rows
    candidates = [row for row in rows if row[0].isdigit()]
    assert len(candidates) == len(crowded)
    assert {row[4] for row in candidates} == {"kept", "limit"}
    assert all(row[5] for row in candidates)  # the text is there


def test_markup_and_control_characters_are_shown_literally_everywhere(crowded: list[str]) -> None:
    escape = run("add", "-", "--key", "esc\x1bkey", "-t", "bel\x07", input=CONTROL).stdout.strip()
    for env in (terminal(200), None):
        listed = unstyled(run("list", "-n", "0", env=env).stdout)
        found = unstyled(run("search", "list int matrix config link", "-k", "20", "--raw", "--explain", env=env).stdout)
        shown = unstyled(run("get", escape, env=env).stdout)
        for out in (listed, found, shown):
            assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out
        for text in MARKUP_LIKE:
            assert text in listed and text in found
        assert CONTROL_SHOWN in listed and CONTROL_SHOWN in shown
        assert "esc\\x1bkey" in listed and "bel\\x07" in listed
        assert "[key]config in [/usr/local/etc]" in unstyled(run("get", "7", env=env).stdout)
        assert "[/p]" in listed and "[red]tag" in listed
        assert '{"src": "[b]x[/b]"}' in unstyled(run("get", "7", env=env).stdout)
    document = json.loads(run("get", escape, "-f", "json").stdout)
    assert document["text"] == CONTROL and document["key"] == "esc\x1bkey"  # JSON keeps the real text


def test_plain_output_in_a_pipe_is_one_line_per_row(crowded: list[str]) -> None:
    run("add", "a note\nover two lines\twith a tab", "-t", "multi")
    lines = run("list", "-n", "0").stdout.splitlines()
    assert lines[0].split("\t") == ["id", "created", "key", "project", "tags", "text"]
    rows = [line.split("\t") for line in lines[1:]]
    assert len(rows) == len(crowded) + 1 and all(len(row) == 6 for row in rows)
    assert rows[0][0] == str(len(crowded) + 1) and rows[0][5] == "a note over two lines with a tab"
    by_id = {row[0]: row for row in rows}
    assert by_id["1"][2] == f"{LONG_KEY}0" and by_id["1"][3] == PROJECT and by_id["1"][4] == ", ".join(TAGS)
    found = run("search", "restart the payment worker", "-k", "3").stdout.splitlines()
    assert found[0].split("\t") == ["#", "id", "score", "created", "tags", "text"]
    assert [line.split("\t")[0] for line in found[1:]] == ["1", "2", "3"]


def test_other_tables_in_a_pipe_are_plain_too(crowded: list[str]) -> None:
    stats = dict(line.split("\t") for line in run("stats").stdout.splitlines())
    assert stats["memories"] == str(len(crowded)) and "[/p]: 8" in stats["projects"]
    profiles = run("profiles").stdout.splitlines()
    assert profiles[0] == "profile\tfollows\tsummary" and any(line.startswith("default\t") for line in profiles)
    timeline = run("timeline", "3", "-B", "1", "-A", "1").stdout.splitlines()
    assert timeline[0].split("\t") == ["id", "when", "session", "#", "who", "text"] and len(timeline) == 4
