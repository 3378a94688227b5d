"""How a store grew: memories added per day, week, month or year, from the store's per-day counts.

Pure and import-free, so a store's `stats()` can call it: the store counts its memories per UTC
day with one indexed GROUP BY (a few hundred rows for years of memories), and `added_per_period`
picks the finest period that gives at most MAX_PERIODS bars over the store's span (a new store
is shown by day, a year-old one by week, an older one by month) and fills the empty periods with
0 so a chart shows the gaps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import date, timedelta
from typing import Any

MAX_PERIODS = 60  # bars of a chart that fits an 80-column terminal beside its labels
PERIODS = ("day", "week", "month", "year")


def _day(start: date) -> str:
    return start.isoformat()


def _week(start: date) -> str:
    return (start - timedelta(days=start.weekday())).isoformat()  # the week's Monday


def _month(start: date) -> str:
    return f"{start.year:04d}-{start.month:02d}"


def _year(start: date) -> str:
    return f"{start.year:04d}"


LABEL: dict[str, Callable[[date], str]] = {"day": _day, "week": _week, "month": _month, "year": _year}


def _labels(first: date, last: date, period: str) -> list[str]:
    """Every period's label from the one holding `first` to the one holding `last`, in order."""
    label = LABEL[period]
    labels: list[str] = []
    day = first
    while day <= last:
        name = label(day)
        if not labels or labels[-1] != name:
            labels.append(name)
        if period == "day":
            day += timedelta(days=1)
        elif period == "week":
            day += timedelta(days=7 - day.weekday())
        elif period == "month":
            day = date(day.year + day.month // 12, day.month % 12 + 1, 1)
        else:
            day = date(day.year + 1, 1, 1)
    return labels


def added_per_period(per_day: Mapping[str, int], max_periods: int = MAX_PERIODS) -> dict[str, Any]:
    """`{"period": "day"|"week"|"month"|"year", "counts": {label: memories added}}` from counts per
    UTC day (`YYYY-MM-DD` → n). Labels: `2024-05-06` (a day, or the Monday of a week), `2024-05`,
    `2024`; every period from the first memory's to the last one's is present, in order. An empty
    store gives `{"period": "day", "counts": {}}`."""
    days = {date.fromisoformat(day): n for day, n in per_day.items() if n}
    if not days:
        return {"period": "day", "counts": {}}
    first, last = min(days), max(days)
    for period in PERIODS:
        labels = _labels(first, last, period)
        if len(labels) <= max_periods or period == PERIODS[-1]:
            break
    counts = dict.fromkeys(labels, 0)
    for day, n in days.items():
        counts[LABEL[period](day)] += n
    return {"period": period, "counts": counts}
