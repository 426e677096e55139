"""The wall clock, in one place.

Services and the pure layers take `now` as a parameter; only the edges (CLI commands, web
routes, the long-running loops' default clocks, column defaults) read the clock, through here.
"""

from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current instant as an aware UTC datetime."""
    return datetime.now(UTC)
