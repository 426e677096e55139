"""The wall clock, in one place.

Services and the pure layers take `now` as a parameter; only the edges (CLI commands, web
routes, the long-running loops' default clocks, column defaults) read the clock, through here.

Hosts disagree about the time; the database is the one clock they share. A long-running process
measures its host clock against the database's at start and with every heartbeat
(`app.services.engine.heartbeats.sync_clock`) and, when they differ by more than
`CLOCK_TOLERANCE`, follows the database: `utcnow()` is the host clock plus that correction. So
leases, due times, heartbeats and every stamp a skewed host writes are on the database's clock
(within the measurement's error, half a round trip), at no cost per statement.

`CRONWELL_CLOCK_OFFSET_SECONDS` shifts this process's host clock (tests: a host whose clock is
30 s ahead); it is read once, on first use.
"""

import os
from datetime import UTC, datetime, timedelta

OFFSET_VARIABLE = "CRONWELL_CLOCK_OFFSET_SECONDS"
CLOCK_TOLERANCE = timedelta(milliseconds=100)  # closer than this to the database: keep the host clock

_host_offset: timedelta | None = None
_correction = timedelta(0)


def host_now() -> datetime:
    """This host's clock (with the injected offset, if any), before any correction."""
    global _host_offset
    if _host_offset is None:
        _host_offset = timedelta(seconds=float(os.environ.get(OFFSET_VARIABLE) or 0))
    return datetime.now(UTC) + _host_offset


def utcnow() -> datetime:
    """The current instant as an aware UTC datetime (on the database's clock once measured)."""
    return host_now() + _correction


def follow(reference: datetime, local: datetime) -> timedelta:
    """Adopt `reference - local` as the correction when it moved by more than CLOCK_TOLERANCE
    (`reference`: the database's clock read at host instant `local`); returns how far utcnow()
    moved (zero when it kept its correction)."""
    global _correction
    wanted = reference - local
    if abs(wanted) <= CLOCK_TOLERANCE:
        wanted = timedelta(0)  # in step with the database: the host clock as it is
    if abs(wanted - _correction) <= CLOCK_TOLERANCE:
        return timedelta(0)
    moved, _correction = wanted - _correction, wanted
    return moved


def correction() -> timedelta:
    """What utcnow() adds to the host clock to be on the database's."""
    return _correction


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
