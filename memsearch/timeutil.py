"""Timestamps: parsed from ISO-8601, stored as canonical UTC text that sorts chronologically."""

from __future__ import annotations

import re
from calendar import monthrange
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from memsearch.errors import InvalidInputError

SECONDS_PER_DAY = 86_400.0
# Moments memsearch accepts: a decade inside the calendar's ends, so that the date arithmetic done
# around a moment (decay, "last week", the span of a year) cannot overflow.
EARLIEST = datetime(11, 1, 1, tzinfo=UTC)
LATEST = datetime(9989, 12, 31, 23, 59, 59, tzinfo=UTC)

# English month names → number, matched without the locale (strptime's %B follows it).
MONTHS = {
    name: number
    for number, name in enumerate(
        ("january", "february", "march", "april", "may", "june",
         "july", "august", "september", "october", "november", "december"),
        start=1,
    )
}  # fmt: skip
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")  # date.weekday() order


def utc_now() -> datetime:
    return datetime.now(UTC)


def parse_time(value: str, *, what: str = "time") -> datetime:
    """Parse an ISO-8601 date or date-time; a value without an offset is taken as UTC."""
    return _parse_iso(value, lambda problem: InvalidInputError(f"{what} {value!r} {problem}"))


def _parse_iso(value: str, error: Callable[[str], InvalidInputError]) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise error("is not an ISO-8601 date or date-time (for example 2024-05-01 or 2024-05-01T13:56:00Z)") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        moment = parsed.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+14:00 is in year 0 in UTC
        moment = None
    if moment is None or not EARLIEST <= moment <= LATEST:
        raise error(f"is too close to the ends of the calendar (use a moment from {EARLIEST.year} to {LATEST.year})")
    return moment


# A moment relative to now (or to a search's as-of time): "7d", "2w", "3h", "30m" before it, "3mo"
# or "1y" back on the calendar (the same day and time that many months or years before, or the
# month's last day when it is shorter: 1mo before 31 March is 29 February in a leap year), or the
# start (00:00 UTC) of "today" or "yesterday", as an ISO date means its start.
_RELATIVE = re.compile(r"(\d{1,6})\s*(mo|[mhdwy])", re.IGNORECASE)
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}
_UNIT_MONTHS = {"mo": 1, "y": 12}
RELATIVE_EXAMPLES = "7d, 2w, 3h, 30m, 3mo, 1y, today, yesterday"


def months_before(moment: datetime, months: int) -> datetime | None:
    """The same day and time `months` calendar months before `moment` (the month's last day when
    it has fewer days), or None when that is before EARLIEST."""
    index = moment.year * 12 + moment.month - 1 - months
    year, month = divmod(index, 12)
    if year < EARLIEST.year:
        return None
    earlier = moment.replace(year=year, month=month + 1, day=min(moment.day, monthrange(year, month + 1)[1]))
    return earlier if earlier >= EARLIEST else None


def parse_moment(value: str, *, now: datetime, field: str) -> datetime:
    """A moment given as ISO-8601 (see `parse_time`) or relative to `now`: `7d`, `2w`, `3h`,
    `30m` before it, `3mo` or `1y` before it on the calendar (see `months_before`), `today` or
    `yesterday` (the start of that UTC day). A bad value raises InvalidInputError naming `field`."""
    text = value.strip().lower()
    if text in ("today", "yesterday"):
        start = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return start - timedelta(days=1) if text == "yesterday" else start
    if match := _RELATIVE.fullmatch(text):
        too_far = InvalidInputError(f"{value!r} reaches back before the year {EARLIEST.year}", field=field)
        if match[2] in _UNIT_MONTHS:
            earlier = months_before(now, int(match[1]) * _UNIT_MONTHS[match[2]])
            if earlier is None:
                raise too_far
            return earlier
        seconds = int(match[1]) * _UNIT_SECONDS[match[2]]
        if seconds > (now - EARLIEST).total_seconds():
            raise too_far
        return now - timedelta(seconds=seconds)
    return _parse_iso(
        value,
        lambda problem: InvalidInputError(
            f"{value!r} {problem.replace('is not an', 'is neither an')} nor a relative time ({RELATIVE_EXAMPLES})"
            if problem.startswith("is not")
            else f"{value!r} {problem}",
            field=field,
        ),
    )


def to_iso(moment: datetime) -> str:
    """Canonical storage form: UTC, microseconds, explicit offset; lexical order is time order."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def from_iso(text: str) -> datetime:
    return datetime.fromisoformat(text)


def age_seconds(moment: datetime, now: datetime) -> float:
    """How long before `now` the moment lies; a moment after `now` has age 0."""
    return max(0.0, (now - moment).total_seconds())
