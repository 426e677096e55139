"""The store's side of the row shapes: the tables the store's statements use, the claimed shape
as SQLAlchemy columns, and the counts only the store reads. The pure shapes and builders live in
app/sql/rows.py (the worker parent uses them without SQLAlchemy) and are re-exported here, so
`from app.store.rows import ...` keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from app.models import Attempt, Batch, Execution, Job, Queue
from app.sql.rows import (
    CLAIMED_FIELDS,
    DISABLED_BEFORE_RUN,
    ClaimedExecution,
    ExpiredLease,
    Finished,
    Outcome,
    Turn,
    batch_item_key,
    batch_item_row,
    callback_key,
    callback_row,
    claimed_null_list,
    claimed_sql_list,
    manual_row,
    occurrence_key,
    occurrence_row,
    one_off_key,
    one_off_row,
    truncate,
)

executions = Execution.__table__
batches = Batch.__table__
attempts = Attempt.__table__
jobs = Job.__table__
queues = Queue.__table__

_TABLES = {"executions": executions, "jobs": jobs}


def claimed_columns() -> list[Any]:
    """The claimed shape as labelled SQLAlchemy columns (for Core selects)."""
    return [_TABLES[f.metadata["table"]].c[f.metadata["column"]].label(f.name) for f in fields(ClaimedExecution)]


# --- counts -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExpiredRun:
    """A waiting row the queued-TTL pass ended `expired`."""

    id: int
    job_id: int | None  # None: a one-off run
    reason: str


@dataclass(frozen=True)
class QueueCounts:
    """The queue as metrics and `flask health` show it, read at `now`."""

    depth: int  # due and claimable now
    oldest_due_at: datetime | None  # the longest-waiting of those
    in_flight: int  # holding a lease (running; legacy claimed)
    retries_waiting: int  # retry_scheduled whose backoff has not passed


@dataclass(frozen=True)
class QueueStats:
    """One queue's live statistics (see app/services/read/queue_stats.py for what each means)."""

    pending: int = 0
    scheduled_later: int = 0
    retrying: int = 0
    running: int = 0
    succeeded_last_hour: int = 0
    failed_last_hour: int = 0
    oldest_pending_seconds: float | None = None
    throughput_per_minute: float = 0.0
    lateness_p50_seconds: float | None = None
    lateness_p95_seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


__all__ = [
    "CLAIMED_FIELDS",
    "DISABLED_BEFORE_RUN",
    "ClaimedExecution",
    "ExpiredLease",
    "ExpiredRun",
    "Finished",
    "Outcome",
    "QueueCounts",
    "QueueStats",
    "Turn",
    "attempts",
    "batch_item_key",
    "batch_item_row",
    "batches",
    "callback_key",
    "callback_row",
    "claimed_columns",
    "claimed_null_list",
    "claimed_sql_list",
    "executions",
    "jobs",
    "manual_row",
    "occurrence_key",
    "occurrence_row",
    "one_off_key",
    "one_off_row",
    "queues",
    "truncate",
]
