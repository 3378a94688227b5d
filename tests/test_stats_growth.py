"""`memsearch stats` shows how the store grew: memories added per period, and the kinds and projects
as bars on a terminal, plain lines in a pipe, the counts in JSON; `added_per_period` itself."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsearch.api import Memsearch
from memsearch.cli.charts import bar, sparkline
from memsearch.embedding import Encoder
from memsearch.growth import MAX_PERIODS, added_per_period
from memsearch.models import NewMemory
from tests.test_cli import run, terminal, unstyled

# 2023-01 to 2024-06: 18 months, more than MAX_PERIODS weeks, so the store is shown by month.
DATES = ("2023-01-10", "2023-06-01", "2024-06-30")
MONTHS = [f"{year}-{month:02d}" for year in (2023, 2024) for month in range(1, 13)][:18]


def test_periods_follow_the_span() -> None:
    assert added_per_period({}) == {"period": "day", "counts": {}}
    assert added_per_period({"2024-05-01": 2, "2024-05-03": 1}) == {
        "period": "day",
        "counts": {"2024-05-01": 2, "2024-05-02": 0, "2024-05-03": 1},
    }
    weekly = added_per_period({"2024-05-01": 2, "2024-05-05": 1, "2024-08-01": 4})
    assert weekly["period"] == "week" and list(weekly["counts"])[:2] == ["2024-04-29", "2024-05-06"]
    assert weekly["counts"]["2024-04-29"] == 3 and weekly["counts"]["2024-07-29"] == 4
    assert added_per_period({"2023-01-10": 1, "2023-06-01": 1, "2024-06-30": 1})["counts"] == {
        month: int(month in ("2023-01", "2023-06", "2024-06")) for month in MONTHS
    }
    yearly = added_per_period({"2001-03-01": 1, "2024-12-31": 5})
    assert yearly["period"] == "year" and len(yearly["counts"]) == 24 and yearly["counts"]["2024"] == 5


@pytest.mark.slow  # many generated stores: out of the quick tier
@given(st.dictionaries(st.dates(date(1990, 1, 1), date(2040, 12, 31)), st.integers(0, 10_000), max_size=40))
def test_every_memory_is_counted_once_in_contiguous_periods(days: dict[date, int]) -> None:
    growth = added_per_period({day.isoformat(): n for day, n in days.items()})
    counts = growth["counts"]
    assert sum(counts.values()) == sum(days.values())
    assert list(counts) == sorted(counts) and len(set(counts)) == len(counts)
    if growth["period"] != "year":
        assert len(counts) <= MAX_PERIODS
    if growth["period"] == "day" and counts:  # contiguous: every day between the first and the last
        first, last = date.fromisoformat(min(counts)), date.fromisoformat(max(counts))
        assert len(counts) == (last - first).days + 1


def test_charts_are_drawn_in_blocks() -> None:
    assert sparkline([1, 0, 8, 4]) == "▁·█▄"
    assert sparkline([0, 0]) == "··"
    assert bar(10, 10, 4) == "████" and bar(1, 10, 4) == "▍" and bar(0, 10, 4) == ""


def add_dated_notes() -> None:
    for day in DATES:
        run("add", f"a note of {day}", "--at", day, "--project", "web" if day == DATES[0] else "cli")


def test_stats_json_has_the_counts_per_period_and_kind() -> None:
    add_dated_notes()
    stats = json.loads(run("stats", "-f", "json").stdout)
    assert stats["growth"] == {"period": "month", "counts": added_per_period(dict.fromkeys(DATES, 1))["counts"]}
    assert list(stats["growth"]["counts"]) == MONTHS
    assert stats["kinds"] == {"note": 3}


def test_stats_on_a_terminal_draws_the_growth_and_the_breakdowns() -> None:
    add_dated_notes()
    shown = unstyled(run("stats", env=terminal(80)).stdout)
    assert "added per month" in shown
    assert "█····█···········█" in shown  # 2023-01, 2023-06 and 2024-06 of 18 months
    assert "2023-01 … 2024-06, peak 1 in 2023-01" in shown
    assert "note " + "█" * 24 + " 3" in shown
    assert "cli " + "█" * 24 + " 2" in shown and "web " + "█" * 12 + " " * 13 + "1" in shown
    assert max(len(line) for line in shown.splitlines()) <= 80


def test_stats_in_a_pipe_is_a_name_and_a_value_a_line() -> None:
    add_dated_notes()
    lines = run("stats").stdout.splitlines()
    stats = dict(line.split("\t") for line in lines)
    assert stats["kinds"] == "note: 3" and stats["projects"] == "cli: 2, web: 1"
    assert stats["added per month"] == ", ".join(f"{m}: {int(m in ('2023-01', '2023-06', '2024-06'))}" for m in MONTHS)
    assert not any(c in "".join(lines) for c in "█▁·")


def test_both_stores_count_per_utc_day(store_location: Path | str, encoder: Encoder) -> None:
    # 23:30 at UTC-5 is the next day in UTC: the day a memory counts for is its UTC day
    late = datetime(2024, 5, 1, 23, 30, tzinfo=UTC) + timedelta(hours=5)
    with Memsearch(store_location, encoder=encoder) as ms:
        ms.add_many([NewMemory("one", created_at=late), NewMemory("two", created_at=datetime(2024, 5, 4, tzinfo=UTC))])
        stats = ms.stats()
    assert stats["growth"] == {"period": "day", "counts": {"2024-05-02": 1, "2024-05-03": 0, "2024-05-04": 1}}
    assert stats["kinds"] == {"note": 2}
