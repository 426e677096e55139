"""Instants, timezones and the mapping of local wall-clock times to UTC.

Every instant entering or leaving the engine is an aware UTC datetime. Local
wall-clock times are naive datetimes interpreted in an IANA zone; this module
says whether such a time exists once, twice (DST fold) or not at all (DST gap).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from app.scheduling.errors import ScheduleError

UTC = UTC
_ONE_SECOND = timedelta(seconds=1)
MAX_TIMEZONE_NAME = 64  # the longest IANA name has 32 characters


def resolve_timezone(name: str | tzinfo) -> ZoneInfo:
    """Return the ZoneInfo for an IANA name, or raise ScheduleError naming it."""
    if isinstance(name, ZoneInfo):
        return name
    if name is UTC:
        return ZoneInfo("UTC")
    if not isinstance(name, str) or not name.strip():
        raise ScheduleError(f"timezone must be an IANA name like 'Europe/London', got {name!r}")
    if len(name) > MAX_TIMEZONE_NAME:
        raise ScheduleError(
            f"unknown timezone: IANA names have at most {MAX_TIMEZONE_NAME} characters, got {len(name)}"
        )
    try:
        return ZoneInfo(name.strip())
    # ZoneInfo raises ValueError (not ZoneInfoNotFoundError) for keys such as
    # "../etc" or absolute paths, and OSError for a directory of the database
    # ("America"); all mean the same thing to an operator.
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(f"unknown timezone {name!r}") from None


def ensure_utc(instant: datetime, what: str = "instant") -> datetime:
    """Return ``instant`` as an aware UTC datetime; refuse naive datetimes.

    A naive datetime here is a programming error (the caller forgot the zone),
    so it raises a plain ValueError rather than a user-facing ScheduleError.
    """
    if not isinstance(instant, datetime):
        raise TypeError(f"{what} must be a datetime, got {type(instant).__name__}")
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware (UTC), got naive {instant.isoformat()}")
    return instant.astimezone(UTC)


def parse_instant(value: str | datetime, zone: tzinfo, what: str) -> datetime:
    """Parse an ISO 8601 date-time; a value without an offset is local to ``zone``.

    Local times that fall in a DST gap or fold follow the same rule as cron
    jobs with a fixed hour: first valid instant after a gap, first occurrence
    of a repeated time.
    """
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and value.strip():
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ScheduleError(
                f'{what} must be an ISO 8601 date-time like "2026-01-01T12:00:00Z", got "{value}"'
            ) from None
    else:
        raise ScheduleError(f'{what} must be an ISO 8601 date-time like "2026-01-01T12:00:00Z", got {value!r}')
    if parsed.tzinfo is not None and parsed.utcoffset() is not None:
        return parsed.astimezone(UTC)
    return locate_wall_time(parsed, zone).first


class WallTimeKind(enum.Enum):
    """How a local wall-clock time maps onto real instants."""

    NORMAL = "normal"  # exists exactly once
    GAP = "gap"  # skipped by a spring-forward transition
    FOLD = "fold"  # repeated by a fall-back transition


@dataclass(frozen=True, slots=True)
class WallTime:
    """A local wall-clock time resolved in a zone.

    ``first`` is the instant for a normal time, the first occurrence in a fold,
    and the first valid instant after the gap (the transition) for a gap time.
    ``second`` is set only for folds.
    """

    kind: WallTimeKind
    first: datetime
    second: datetime | None = None


def locate_wall_time(wall: datetime, zone: tzinfo) -> WallTime:
    """Resolve a naive local time in ``zone`` to UTC, detecting gaps and folds."""
    wall = wall.replace(tzinfo=None)
    # PEP 495: fold=0 uses the offset in force before a transition, fold=1 the
    # one after. Equal offsets mean the time is unambiguous; a larger fold=0
    # offset means clocks went back (fold); a smaller one, forward (gap).
    offset_before = wall.replace(tzinfo=zone, fold=0).utcoffset()
    offset_after = wall.replace(tzinfo=zone, fold=1).utcoffset()
    as_before = (wall - offset_before).replace(tzinfo=UTC)
    if offset_before == offset_after:
        return WallTime(WallTimeKind.NORMAL, as_before)
    as_after = (wall - offset_after).replace(tzinfo=UTC)
    if offset_before > offset_after:
        return WallTime(WallTimeKind.FOLD, as_before, as_after)
    return WallTime(WallTimeKind.GAP, _transition_between(as_after, as_before, zone, offset_before))


def _transition_between(low: datetime, high: datetime, zone: tzinfo, offset_before: timedelta) -> datetime:
    """Find the first instant in (low, high] whose offset is no longer ``offset_before``.

    zoneinfo does not expose its transition table, so bisect on whole seconds
    (transitions fall on whole seconds); a gap lasts at most a few hours, so
    this takes about a dozen conversions.
    """
    low = low.replace(microsecond=0)
    if high.microsecond:
        high = high.replace(microsecond=0) + _ONE_SECOND
    while high - low > _ONE_SECOND:
        middle = low + timedelta(seconds=(high - low) // _ONE_SECOND // 2)
        if middle.astimezone(zone).utcoffset() == offset_before:
            low = middle
        else:
            high = middle
    return high
