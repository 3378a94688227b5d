"""Dates named in a query, as day, month or year ranges (for the `time` leg), and the signs that a
question asks *when* and that a memory says when (for the `when` adjustment)."""

from __future__ import annotations

import calendar
import re
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import cache

from memsearch.timeutil import MONTHS, WEEKDAYS

_MONTHS = MONTHS | {name[:3]: number for name, number in MONTHS.items()}  # and their abbreviations
_MONTH = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"


# Compiled on first use, as the patterns below: a search that names no date (or a lexical one) does
# not pay for them at start-up.
@cache
def _date_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Most specific first; a later pattern never reuses text an earlier one matched."""
    return (
        # A span whose year is named once, at its end: "between August 11 and 15, 2023", "between 11
        # May and 2 June 2023" (the first month may be left out only when it is the second's).
        (
            "between month day",
            re.compile(rf"\bbetween\s+{_MONTH}\s+{_DAY}\s+and\s+(?:{_MONTH}\s+)?{_DAY},?\s*{_YEAR}\b", re.IGNORECASE),
        ),
        (
            "between day month",
            re.compile(
                rf"\bbetween\s+(?:the\s+)?{_DAY}(?:\s+(?:of\s+)?{_MONTH})?\s+and\s+(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH},?\s*{_YEAR}\b",
                re.IGNORECASE,
            ),
        ),
        ("iso", re.compile(r"\b((?:19|20)\d\d)-(\d{2})-(\d{2})\b")),
        ("day month year", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s*{_YEAR}\b", re.IGNORECASE)),
        ("month day year", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s*{_YEAR}\b", re.IGNORECASE)),
        ("month year", re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?{_YEAR}\b", re.IGNORECASE)),
        ("year", re.compile(rf"\b{_YEAR}\b")),
    )


# A month without a year ("camping in June") is the latest such month up to today.
@cache
def _bare_month() -> re.Pattern[str]:
    return re.compile(
        rf"\b(?:in|during|of|since|early|late|mid|end of|beginning of|start of)\s+(?:the\s+)?{_MONTH}(?!\w)",
        re.IGNORECASE,
    )


def _day_range(day: date) -> tuple[date, date]:
    return day, day


def _span(year: str, first: tuple[str, str], last: tuple[str, str]) -> tuple[date, date]:
    """From the first (month, day) to the last, the year named once at the end: a first day later
    in the year than the last is in the year before ("between December 28 and January 3, 2024")."""
    end = date(int(year), _MONTHS[last[0].lower()], int(last[1]))
    start = date(int(year), _MONTHS[first[0].lower()], int(first[1]))
    return (start, end) if start <= end else (start.replace(year=start.year - 1), end)


def _range(kind: str, groups: tuple[str, ...]) -> tuple[date, date]:
    match kind:
        case "between month day":
            first_month, first_day, last_month, last_day, year_named = groups
            return _span(year_named, (first_month, first_day), (last_month or first_month, last_day))
        case "between day month":
            first_day, first_month, last_day, last_month, year_named = groups
            return _span(year_named, (first_month or last_month, first_day), (last_month, last_day))
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


@dataclass(eq=False)  # internal: no eq, hash or frozen methods to make at import (test_startup)
class NamedDates:
    """The dates a text names: absolute ones as inclusive (first day, last day) ranges, each also
    shifted as the words before it say; and the months it names without a year, which a day
    (`ranges(today)`) resolves."""

    absolute: tuple[tuple[date, date], ...]
    bare_months: tuple[int, ...]  # month numbers, in the text's order

    def ranges(self, today: date | None = None) -> list[tuple[date, date]]:
        """The absolute ranges, then with `today` each month named without a year: the latest such
        month up to today."""
        ranges = list(self.absolute)
        if today is not None:
            for month in self.bare_months:
                year = today.year if month <= today.month else today.year - 1
                ranges.append((date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])))
        return ranges


def named_dates(text: str) -> NamedDates:
    """Each date the text names: absolute dates ("11 August 2023", "between 11 and 15 May 2023",
    shifted by the words before them: "two weeks before …", "the weekend after …") and months
    named without a year ("camping in June")."""
    ranges: list[tuple[date, date]] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _date_patterns():
        for match in pattern.finditer(text):
            if any(start < match.end() and match.start() < end for start, end in taken):
                continue
            try:
                named = _range(kind, match.groups())
            except ValueError:  # 31 February and the like: not a date
                continue
            ranges.append(named)
            if offset := _offset().search(text, 0, match.start()):
                with suppress(ValueError, OverflowError):  # shifted off the calendar's ends
                    ranges.append(_shifted(named, offset))
            taken.append(match.span())
    months = [
        _MONTHS[match.group(1).lower()]
        for match in _bare_month().finditer(text)
        if not any(start < match.end() and match.start() < end for start, end in taken)
    ]
    return NamedDates(tuple(ranges), tuple(months))


def date_ranges(text: str, today: date | None = None) -> list[tuple[date, date]]:
    """Each date in the text as an inclusive (first day, last day) range (see named_dates), with
    `today` months named without a year too."""
    return named_dates(text).ranges(today)


def as_datetimes(day_range: tuple[date, date]) -> tuple[datetime, datetime]:
    """The range from the first day's start to the last day's end, in UTC."""
    first, last = day_range
    return datetime.combine(first, time(), UTC), datetime.combine(last + timedelta(days=1), time(), UTC) - timedelta(
        microseconds=1
    )


_UNIT = r"(?:days?|nights?|weeks?|weekends?|months?|years?|hours?)"
# A question asks when; a memory says when (relative or absolute). Most memories that answer a
# "when" question date the event themselves ("last Saturday", "two weeks ago", "in May"). Asking
# when has many shapes, and each asks the same (issue 33: the held-out half of LoCoMo asks "how
# long…", "which year…" more than "when…"): "when", "which/what year, month, week, weekend, day,
# date, season, time" ("in which month", "around what time"), "what was the date", "how long
# (ago)", "how many weeks (ago)", "how much time".
#
# A time word asks when only as the question's frame, never as the first half of a noun: "Which
# weekend did …", "which week in May", "in which month?", not "which weekend bag", "which time
# slot", "what is the time limit" (a folder of notes asks those as often as a conversation asks
# "which year"). So the time noun must be followed by an auxiliary, a preposition, a possessive
# ("which month's game"), a subject ("what year we moved") or the clause's end. A count of time
# units is a span only before an auxiliary, "ago", "passed", "since" … or the end ("how many
# weeks passed", "how many hours did it take"), not before a noun ("how many days of PTO").
_AUX = r"(?:did|was|were|is|are|does|do|will|would|can|could|should|has|have|had)"
_TIME_NOUN = r"(?:year|month|week|weekend|day|date|season|time)"
_SPAN_UNIT = r"(?:minutes?|hours?|days?|nights?|weeks?|weekends?|months?|years?)"
_CLAUSE_END = r"\s*(?:[?!.,;:]|$)"
_SUBJECT = r"(?:i|we|you|he|she|they|it|the|a|an|my|our|your|his|her|their|its|this|that)"
_FRAME_END = (
    rf"(?=\s+(?:{_AUX}|{_SUBJECT}|when|of|in|on|at|during|between|after|before|since|until|to)\b"
    rf"|['’]s\b|{_CLAUSE_END})"
)
_SPAN_END = (
    rf"(?=\s+(?:{_AUX}|ago|passed|elapsed|went by|later|earlier|after|before|since|between|until|till)\b"
    rf"|\s+it\s+(?:took|takes|will take)\b|{_CLAUSE_END})"
)
# A time noun as the frame of a question, after "which" or "what" (`asks_name` leaves it out too).
TIME_FRAME = rf"(?:exact )?{_TIME_NOUN}s?{_FRAME_END}"
# "how long", "how many weeks ago", "how many days passed", "how much time did it take".
ASKS_SPAN = re.compile(rf"\bhow (?:long\b|(?:(?:many|much) {_SPAN_UNIT}|much time){_SPAN_END})", re.IGNORECASE)
# "which year", "in what month", "what exact day", "what was the date of".
ASKS_DATE = re.compile(rf"\b(?:what|which|what (?:is|was) the) {TIME_FRAME}", re.IGNORECASE)
_ASKS_WHEN = re.compile(rf"\bwhen\b|{ASKS_SPAN.pattern}|{ASKS_DATE.pattern}", re.IGNORECASE)
# Count words: how many units each means, at least and at most ("a few" days: 2 to 5).
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10}  # fmt: skip
_VAGUE = {"couple of": (2, 3), "few": (2, 5), "several": (3, 7)}
_COUNT = "(?:" + "|".join([*_NUMBERS, *_VAGUE, r"\d+"]) + ")"
_WEEKDAY = "(?:" + "|".join(WEEKDAYS) + ")"
# Seasons by their first and last month (winter runs into the next year).
_SEASONS = {"spring": (3, 5), "summer": (6, 8), "fall": (9, 11), "autumn": (9, 11), "winter": (12, 14)}
_SEASON = "(?:" + "|".join(_SEASONS) + ")"


# Compiled on first use (by the `when` adjustment, for a query that asks when): most searches do not.
@cache
def _says_when() -> re.Pattern[str]:
    return re.compile(
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


# A time frame opening a question ("Which year did …", "In which month was …", "Around what time
# did …", "How long ago was …", "How many weeks ago did …", "What was the date when …") asks what
# "When did …" asks: its words name the shape of the answer, not the event, and would otherwise
# match memories that say "year", "time", "long" or "weeks" about something else. A duration
# ("how long has …", "how many years was …") keeps its words: "for three years" answers it.
@cache
def _when_frame() -> re.Pattern[str]:
    aux = rf"(?={_AUX}\b)"
    return re.compile(
        rf"^\s*(?:(?:in|on|at|around|during|by)\s+)?(?:which|what)\s+(?:exact\s+)?{_TIME_NOUN}\s+{aux}"
        rf"|^\s*how\s+(?:long|many\s+{_SPAN_UNIT}|much\s+time)\s+ago\s+{aux}"
        rf"|^\s*what\s+(?:was|is)\s+the\s+{_TIME_NOUN}\s+(?:when|that|on\s+which)\s+",
        re.IGNORECASE,
    )


def as_when(query: str) -> str:
    """The query with a time frame at its start read as "When" ("Which year did Ana move?" → "When
    did Ana move?", "What was the date when Ana moved?" → "When Ana moved?"), so that every shape
    of asking when searches the event's words alone; any other query as it is."""
    return _when_frame().sub("When ", query, count=1)


def says_when(text: str) -> bool:
    """Whether the text dates something: a date, a month, a weekday, "last week", "two days ago"."""
    return _says_when().search(text) is not None


# What a memory's own words date, resolved against the day it was said ("yesterday" in a session
# of 4 May is 3 May): for the `time` leg, whose question names the day the event happened while
# the memory was written days or weeks later. Only the past and the day itself: a plan ("next
# week") is not the event.
@cache
def _mention() -> re.Pattern[str]:
    return re.compile(
        r"\b(?:(?P<day_before>the day before yesterday)|(?P<yesterday>yesterday|last night)"
        r"|(?P<today>today|tonight|this (?:morning|afternoon|evening))"
        rf"|(?:(?:a |the )?(?P<count>\d{{1,2}}|{'|'.join(_NUMBERS)}|{'|'.join(_VAGUE)})"
        r" (?P<unit>day|week|month|year)s? ago)"
        r"|(?:last|this past|the past) (?P<span>week|weekend|month|year)"
        r"|(?P<this>this (?:week|month|year))"
        rf"|(?:last|this past|on) (?P<weekday>{_WEEKDAY})"
        rf"|(?:last|this past) (?P<season>{_SEASON}))(?!\w)",
        re.IGNORECASE,
    )


# How far after a named date the time leg looks for memories that speak of it: two years, time
# enough for "last year", "a year ago", "last summer" (words reaching further are not looked for).
MENTION_REACH = timedelta(days=2 * 366)


def _month_range(year: int, month: int) -> tuple[date, date]:
    year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _months_before(day: date, months: int) -> tuple[int, int]:
    index = day.year * 12 + day.month - 1 - months
    return index // 12, index % 12 + 1


def _weekend(anchor: date, sign: int) -> tuple[date, date]:
    """The nearest Saturday and Sunday before the day (sign −1) or after it (sign 1)."""
    saturday = anchor + timedelta(days=sign * ((sign * (5 - anchor.weekday())) % 7 or 7))
    return saturday, saturday + timedelta(days=1)


def _mention_range(match: re.Match[str], said: date) -> tuple[date, date]:
    group = match.groupdict()
    if group["day_before"]:
        return _day_range(said - timedelta(days=2))
    if group["yesterday"]:
        return _day_range(said - timedelta(days=1))
    if group["today"]:
        return _day_range(said)
    if count := group["count"]:
        return _shift(said, -1, group["unit"].lower(), *_count(count))
    if span := group["span"]:
        match span.lower():
            case "week":  # the calendar week before this one, or the seven days before the day said
                return said - timedelta(days=said.weekday() + 7), said - timedelta(days=1)
            case "weekend":
                return _weekend(said, -1)
            case "month":
                return _month_range(*_months_before(said, 1))
        return date(said.year - 1, 1, 1), date(said.year - 1, 12, 31)
    if this := group["this"]:
        unit = this.split()[-1].lower()
        if unit == "week":
            monday = said - timedelta(days=said.weekday())
            return monday, said
        if unit == "month":
            return said.replace(day=1), said
        return date(said.year, 1, 1), said
    if weekday := group["weekday"]:  # the latest such day before the day said
        back = (said.weekday() - WEEKDAYS.index(weekday.lower())) % 7 or 7
        return _day_range(said - timedelta(days=back))
    first_month, last_month = _SEASONS[group["season"].lower()]
    year = said.year if said.month > last_month else said.year - 1  # the latest season over by then
    if last_month > 12:  # winter runs into the next year
        year = said.year - 1 if said.month > 2 else said.year - 2
    return _month_range(year, first_month)[0], _month_range(year, last_month)[1]


# A date shifted by the words before it: "two weeks before", "the weekend after", "a few days before on".
@cache
def _offset() -> re.Pattern[str]:
    return re.compile(
        rf"\b(?:(?:the|last) (?P<span>day|week|weekend|month|year)|(?:a |the )?(?P<count>\d{{1,2}}|{'|'.join(_NUMBERS)}"
        rf"|{'|'.join(_VAGUE)}) (?P<unit>day|week|month|year)s?) (?P<direction>before|after)(?: on| of)?,? $",
        re.IGNORECASE,
    )


def _count(word: str) -> tuple[int, int]:
    """How many units a count word means, at least and at most: "two" (2, 2), "a few" (2, 5)."""
    word = word.lower()
    return _VAGUE.get(word) or (int(word) if word.isdigit() else _NUMBERS[word],) * 2


def _shift(anchor: date, sign: int, unit: str, low: int, high: int) -> tuple[date, date]:
    """The days `low` to `high` units from `anchor` (before it with sign −1): a week ± 3 days, a
    month or a year whole."""
    if unit == "day":
        ends = sorted((anchor + timedelta(days=sign * low), anchor + timedelta(days=sign * high)))
    elif unit == "week":
        ends = sorted((anchor + timedelta(days=sign * (7 * low - 3)), anchor + timedelta(days=sign * (7 * high + 3))))
    elif unit == "month":
        months = sorted((_months_before(anchor, -sign * low), _months_before(anchor, -sign * high)))
        ends = [_month_range(*months[0])[0], _month_range(*months[1])[1]]
    else:
        years = sorted((anchor.year + sign * low, anchor.year + sign * high))
        ends = [date(years[0], 1, 1), date(years[1], 12, 31)]
    return ends[0], ends[1]


def _shifted(named: tuple[date, date], offset: re.Match[str]) -> tuple[date, date]:
    """The days `offset` ("two weeks before", "the weekend after") points to from the named range."""
    before = offset["direction"].lower() == "before"
    sign, anchor = (-1, named[0]) if before else (1, named[1])
    if not (span := (offset["span"] or "").lower()):
        return _shift(anchor, sign, offset["unit"].lower(), *_count(offset["count"]))
    if span == "weekend":
        return _weekend(anchor, sign)
    if span == "week":  # the seven days on that side
        return _shift(anchor, sign, "day", 1, 7)
    return _shift(anchor, sign, span, 1, 1)


def mentioned_ranges(text: str, said: date) -> list[tuple[date, date]]:
    """The days the text speaks of, as inclusive ranges, resolved against the day it was said:
    absolute dates, months without a year (the latest up to then), and relative words such as
    "yesterday", "two weeks ago", "last weekend", "last Saturday", "last summer"."""
    ranges = date_ranges(text, said)
    for match in _mention().finditer(text):
        try:
            ranges.append(_mention_range(match, said))
        except (ValueError, OverflowError):  # "99 years ago" said in the year 50: before the calendar
            continue
    return ranges
