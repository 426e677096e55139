"""The wall clock, in one place.

Services and the pure layers take `now` as a parameter; only the edges (CLI commands, web
routes, the long-running loops' default clocks, column defaults) read the clock, through here.
"""

from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current instant as an aware UTC datetime."""
    return datetime.now(UTC)


def iso_z(value: datetime | None, timespec: str = "auto") -> str | None:
    """An aware instant as ISO 8601 in UTC with a `Z`: `2026-06-01T12:00:00Z`; None stays None.

    The one formatter for stored, logged and serialized instants. `timespec` as in
    `datetime.isoformat`: "auto" (microseconds only when there are some), "milliseconds", or
    "microseconds" (a fixed width, for keys that must compare as text). A naive datetime is a
    programming error (the caller forgot the zone) and raises ValueError.
    """
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise TypeError(f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"expected a timezone-aware (UTC) datetime, got naive {value.isoformat()}")
    return value.astimezone(UTC).isoformat(timespec=timespec).replace("+00:00", "Z")
