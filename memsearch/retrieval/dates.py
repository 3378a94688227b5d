"""Absolute dates named in a query, as day, month or year ranges (for the `time` leg)."""

from __future__ import annotations

import calendar
import re
from datetime import UTC, date, datetime, time, timedelta

from memsearch.timeutil import MONTHS

_MONTHS = MONTHS | {name[:3]: number for name, number in MONTHS.items()}  # and their abbreviations
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"

# Most specific first; a later pattern never reuses text an earlier one matched.
_PATTERNS = (
    ("iso", re.compile(r"\b((?:19|20)\d\d)-(\d{2})-(\d{2})\b")),
    ("day month year", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s*{_YEAR}\b", re.IGNORECASE)),
    ("month day year", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s*{_YEAR}\b", re.IGNORECASE)),
    ("month year", re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE)),
    ("year", re.compile(rf"\b{_YEAR}\b")),
)


def _day_range(day: date) -> tuple[date, date]:
    return day, day


def _range(kind: str, groups: tuple[str, ...]) -> tuple[date, date]:
    match kind:
        case "iso":
            return _day_range(date(int(groups[0]), int(groups[1]), int(groups[2])))
        case "day month year":
            return _day_range(date(int(groups[2]), _MONTHS[groups[1].lower()], int(groups[0])))
        case "month day year":
            return _day_range(date(int(groups[2]), _MONTHS[groups[0].lower()], int(groups[1])))
        case "month year":
            year, month = int(groups[1]), _MONTHS[groups[0].lower()]
            return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])
    year = int(groups[0])
    return date(year, 1, 1), date(year, 12, 31)


def date_ranges(query: str) -> list[tuple[date, date]]:
    """Each absolute date in the query as an inclusive (first day, last day) range."""
    ranges: list[tuple[date, date]] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(query):
            if any(start < match.end() and match.start() < end for start, end in taken):
                continue
            try:
                ranges.append(_range(kind, match.groups()))
            except ValueError:  # 31 February and the like: not a date
                continue
            taken.append(match.span())
    return ranges


def as_datetimes(day_range: tuple[date, date]) -> tuple[datetime, datetime]:
    """The range from the first day's start to the last day's end, in UTC."""
    first, last = day_range
    return datetime.combine(first, time(), UTC), datetime.combine(last + timedelta(days=1), time(), UTC) - timedelta(
        microseconds=1
    )
