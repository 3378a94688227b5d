"""Dates named in a query, as day, month or year ranges (for the `time` leg), and the signs that a
question asks *when* and that a memory says when (for the `when` adjustment)."""

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
# A month without a year ("camping in June") is the latest such month up to today.
_BARE_MONTH = re.compile(
    rf"\b(?:in|during|of|since|early|late|mid|end of|beginning of|start of)\s+(?:the\s+)?{_MONTH}(?!\w)",
    re.IGNORECASE,
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


def date_ranges(query: str, today: date | None = None) -> list[tuple[date, date]]:
    """Each date in the query as an inclusive (first day, last day) range: absolute dates, and with
    `today` also months named without a year."""
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
    if today is not None:
        for match in _BARE_MONTH.finditer(query):
            if not any(start < match.end() and match.start() < end for start, end in taken):
                month = _MONTHS[match.group(1).lower()]
                year = today.year if month <= today.month else today.year - 1
                ranges.append((date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])))
    return ranges


def as_datetimes(day_range: tuple[date, date]) -> tuple[datetime, datetime]:
    """The range from the first day's start to the last day's end, in UTC."""
    first, last = day_range
    return datetime.combine(first, time(), UTC), datetime.combine(last + timedelta(days=1), time(), UTC) - timedelta(
        microseconds=1
    )


# A question asks when; a memory says when (relative or absolute). Most memories that answer a
# "when" question date the event themselves ("last Saturday", "two weeks ago", "in May").
_ASKS_WHEN = re.compile(
    r"\b(?:when|what (?:date|day|time|year|month)|which (?:year|month|day|date)|how long)\b", re.IGNORECASE
)
_UNIT = r"(?:days?|nights?|weeks?|weekends?|months?|years?|hours?)"
_COUNT = r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|couple of|several|\d+)"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_SEASON = r"(?:spring|summer|fall|autumn|winter)"
_SAYS_WHEN = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|recently|the other day"
    rf"|(?:last|this|next|past|coming) (?:{_UNIT}|{_WEEKDAY}|{_SEASON}|morning|evening|night)"
    rf"|{_COUNT} {_UNIT} (?:ago|back|before|later|earlier)"
    rf"|(?:for|since|in) (?:the (?:last|past) )?{_COUNT} {_UNIT}"
    rf"|on {_WEEKDAY}|on the \d{{1,2}}(?:st|nd|rd|th)|(?:19|20)\d\d"
    rf"|(?:in|since|early|late|mid|last|this|next) {_MONTH})(?!\w)",
    re.IGNORECASE,
)


def asks_when(query: str) -> bool:
    """Whether the query asks when something happened or how long it lasted."""
    return _ASKS_WHEN.search(query) is not None


def says_when(text: str) -> bool:
    """Whether the text dates something: a date, a month, a weekday, "last week", "two days ago"."""
    return _SAYS_WHEN.search(text) is not None
