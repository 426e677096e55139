"""How long a failed attempt waits before the next one: the retry kinds, as one pure rule.

No I/O, no clock, no randomness of its own: the caller passes the random draw (`spread`, in
[0, 1]), so the same inputs always give the same delay and tests need no seeding.

- `fixed`: every retry waits `backoff`.
- `linear`: retry n waits `backoff * n`.
- `exponential` (the default, and the rule before retry kinds existed): retry n waits
  `backoff * 2 ** (n - 1)`.

Then the cap (`max_delay`, None: no cap of its own) and the jitter: a fraction `jitter` in [0, 1]
spreads the delay evenly over [delay * (1 - jitter), delay * (1 + jitter)], so many executions that
failed together do not all come back in the same second. The cap holds after the jitter: no retry
ever waits longer than `max_delay`, nor longer than `CEILING` (a year), whatever the inputs (an
exponential backoff at attempt 100 would otherwise overflow a datetime).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from typing import Any


class RetryKind(str, Enum):
    FIXED = "fixed"
    LINEAR = "linear"
    EXPONENTIAL = "exponential"


# No retry waits longer than this, whatever the settings: a year is already no longer a retry.
CEILING = timedelta(days=365)


@dataclass(frozen=True)
class RetryPolicy:
    """A job's retry settings (columns retry_kind, retry_backoff_seconds, retry_max_delay_seconds,
    retry_jitter)."""

    kind: RetryKind | str = RetryKind.EXPONENTIAL
    backoff_seconds: int = 10
    max_delay_seconds: int | None = None
    jitter: float = 0.0

    def delay(self, attempt_number: int, spread: float = 0.5) -> timedelta:
        """The wait before the retry that follows attempt `attempt_number` (counting from 1)."""
        return retry_delay(
            self.kind,
            self.backoff_seconds,
            attempt_number,
            max_delay_seconds=self.max_delay_seconds,
            jitter=self.jitter,
            spread=spread,
        )


def base_delay_seconds(kind: RetryKind | str, backoff_seconds: int, attempt_number: int) -> float:
    """The delay of `kind` before jitter and cap, in seconds (may be huge for exponential)."""
    if attempt_number < 1:
        raise ValueError("attempt_number counts from 1")
    if backoff_seconds < 0:
        raise ValueError("backoff_seconds must not be negative")
    kind = RetryKind(kind)
    if kind is RetryKind.FIXED:
        return float(backoff_seconds)
    if kind is RetryKind.LINEAR:
        return float(backoff_seconds * attempt_number)
    # Bounded exponent: 2 ** 60 seconds is far past CEILING already, and float stays finite.
    return float(backoff_seconds) * 2.0 ** min(attempt_number - 1, 60)


def retry_delay(
    kind: RetryKind | str,
    backoff_seconds: int,
    attempt_number: int,
    *,
    max_delay_seconds: int | None = None,
    jitter: float = 0.0,
    spread: float = 0.5,
) -> timedelta:
    """The delay before the retry after attempt `attempt_number`: the kind's delay, spread by
    `jitter` (`spread` 0 gives the shortest, 1 the longest, 0.5 the delay itself), then capped by
    `max_delay_seconds` and CEILING. Whole milliseconds."""
    if not 0.0 <= jitter <= 1.0:
        raise ValueError("jitter is a fraction between 0 and 1")
    if not 0.0 <= spread <= 1.0:
        raise ValueError("spread is a draw between 0 and 1")
    seconds = base_delay_seconds(kind, backoff_seconds, attempt_number)
    seconds *= 1.0 + jitter * (2.0 * spread - 1.0)
    ceiling = CEILING.total_seconds()
    if max_delay_seconds is not None:
        ceiling = min(ceiling, max(0, max_delay_seconds))
    return timedelta(milliseconds=round(min(seconds, ceiling) * 1000))


def delay_bounds(
    kind: RetryKind | str,
    backoff_seconds: int,
    attempt_number: int,
    *,
    max_delay_seconds: int | None = None,
    jitter: float = 0.0,
) -> tuple[timedelta, timedelta]:
    """The shortest and longest delay the jitter can give (what the job page shows)."""
    args: dict[str, Any] = dict(max_delay_seconds=max_delay_seconds, jitter=jitter)
    return (
        retry_delay(kind, backoff_seconds, attempt_number, spread=0.0, **args),
        retry_delay(kind, backoff_seconds, attempt_number, spread=1.0, **args),
    )
