"""Rate limits: at most N starts per period (`10/minute`), as a sliding window. No I/O here.

A limit holds in every window of its period, not only in calendar-aligned ones: the state is the
instants of the last N starts (epoch seconds, newest first), and a start at `now` is allowed
while fewer than N of them are later than `now - period`. The worker's claim keeps that list
on the limited row under the row's lock (PostgreSQL: the SQL twin in app/sql/rate_limits.py;
SQLite: these functions under the write lock), so the limit holds across all workers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

PERIODS = {"second": 1, "minute": 60, "hour": 3600}
MAX_COUNT = 10_000  # the state keeps N instants, so N is bounded
_PATTERN = re.compile(r"^\s*(\d+)\s*/\s*(second|minute|hour)s?\s*$")


class RateLimitError(ValueError):
    """A rate limit that is not `N/second|minute|hour` with 1 <= N <= MAX_COUNT."""


@dataclass(frozen=True)
class RateLimit:
    count: int
    period: str  # second | minute | hour

    @property
    def seconds(self) -> int:
        return PERIODS[self.period]

    def __str__(self) -> str:
        return f"{self.count}/{self.period}"


def parse_rate_limit(text: str) -> RateLimit:
    """`10/minute` (also `10 / minutes`) -> RateLimit(10, "minute"); anything else is refused."""
    match = _PATTERN.match(text or "")
    if match is None:
        raise RateLimitError(f"must be N/second, N/minute or N/hour (e.g. 10/minute), got {text!r}")
    count = int(match.group(1))
    if not 1 <= count <= MAX_COUNT:
        raise RateLimitError(f"the count must be between 1 and {MAX_COUNT}, got {count}")
    return RateLimit(count, match.group(2))


def allowance(limit: RateLimit, starts: Sequence[float], now: float) -> int:
    """How many more starts `limit` allows at `now` (epoch seconds), given the recorded `starts`.

    Starts later than `now` (another worker whose clock is a little ahead) count as inside the
    window, so an out-of-order start can only make the limit stricter."""
    recent = sum(1 for at in starts if at > now - limit.seconds)
    return max(0, limit.count - recent)


def record_starts(limit: RateLimit, starts: Sequence[float], now: float, started: int) -> list[float]:
    """The state after `started` starts at `now`: the newest `limit.count` instants, newest first."""
    return sorted([*starts, *([now] * started)], reverse=True)[: limit.count]
