"""Pacing for background deletes: how long to wait before the next batch so a pass keeps to its share.

Pure: no I/O, no sleeping, no clock of its own; the caller passes the times it read. Retention
(app.services.engine.retention) deletes history batch after batch on the same machine and the same
database as the workers' claims; at full speed one pass takes a whole core (on two cores, the
claims' share). Two limits, either one off with 0:

- `rows_per_second`: the pass deletes no faster than this on average;
- `duty_cycle` (0 < d <= 1): the pass works at most this share of its wall time, which adapts to a
  loaded machine where batches are slow (a fixed rate would not slow down there at all).

Both are kept over the whole pass, not per batch: a batch that overran (or a pause that overslept)
is made up by the next wait, so the average holds whatever the batch sizes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The pace's defaults (config.py's RETENTION_ROWS_PER_SECOND and RETENTION_DUTY_PERCENT): chosen with
# `python -m bench retention` at 10M rows on 2 cores, docs/performance.md.
ROWS_PER_SECOND = 11_000
DUTY_CYCLE = 0.75


def retention_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """`prune_engine`'s keywords for the audit log, the event log, the web sessions and the pace,
    from the app's settings."""
    return {
        "audit_retention_days": config.get("AUDIT_RETENTION_DAYS", 365),
        "event_retention_days": config.get("EVENT_RETENTION_DAYS", 90),
        "session_max_age_hours": config.get("SESSION_MAX_AGE_HOURS", 168),
        "rows_per_second": config.get("RETENTION_ROWS_PER_SECOND", ROWS_PER_SECOND),
        "duty_cycle": config.get("RETENTION_DUTY_PERCENT", DUTY_CYCLE * 100) / 100,
    }


@dataclass
class Pace:
    """The running totals of one pass: start it at `started`, `record` each batch, ask `wait_after`."""

    started: float
    rows_per_second: float = 0.0
    duty_cycle: float = 1.0
    rows: int = 0
    working: float = field(default=0.0)

    def __post_init__(self) -> None:
        if self.rows_per_second < 0:
            raise ValueError("rows_per_second must be >= 0 (0: no rate limit)")
        if not 0 < self.duty_cycle <= 1:
            raise ValueError("duty_cycle must be in (0, 1] (1: no pauses)")

    def record(self, rows: int, *, began: float, ended: float) -> None:
        """A batch of `rows` rows that worked from `began` to `ended` (the same clock as `started`)."""
        self.rows += rows
        self.working += max(0.0, ended - began)

    def wait_after(self, now: float) -> float:
        """Seconds to wait at `now` before the next batch (0: go on at once)."""
        return max(0.0, self.resume_at() - now)

    def resume_at(self) -> float:
        """The earliest time the next batch may start: the later of the two limits' times."""
        at = self.started
        if self.rows_per_second > 0:
            at = max(at, self.started + self.rows / self.rows_per_second)
        if self.duty_cycle < 1:
            at = max(at, self.started + self.working / self.duty_cycle)
        return at
