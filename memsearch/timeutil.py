"""Timestamps: parsed from ISO-8601, stored as canonical UTC text that sorts chronologically."""

from __future__ import annotations

from datetime import UTC, datetime

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


def utc_now() -> datetime:
    return datetime.now(UTC)


def parse_time(value: str, *, what: str = "time") -> datetime:
    """Parse an ISO-8601 date or date-time; a value without an offset is taken as UTC."""
    text = value.strip()
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(
            f"{what} {value!r} is not an ISO-8601 date or date-time (for example 2024-05-01 or 2024-05-01T13:56:00Z)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        moment = parsed.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+14:00 is in year 0 in UTC
        moment = None
    if moment is None or not EARLIEST <= moment <= LATEST:
        raise InvalidInputError(
            f"{what} {value!r} is too close to the ends of the calendar "
            f"(use a moment from {EARLIEST.year} to {LATEST.year})"
        )
    return moment


def to_iso(moment: datetime) -> str:
    """Canonical storage form: UTC, microseconds, explicit offset; lexical order is time order."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def from_iso(text: str) -> datetime:
    return datetime.fromisoformat(text)


def age_seconds(moment: datetime, now: datetime) -> float:
    """How long before `now` the moment lies; a moment after `now` has age 0."""
    return max(0.0, (now - moment).total_seconds())
