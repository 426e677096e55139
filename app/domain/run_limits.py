"""Run limits and result TTLs as pure rules: when a job may fire, and when a finished run may go.

No I/O, no clock: every instant is a parameter.

**What max_runs counts.** `runs_created` counts the scheduled occurrences that were created as
runnable executions (status `pending`; triggers `schedule` and `catch_up`). Not counted:
occurrences recorded as `missed` (misfire policy skip, or overlap policy skip), occurrences folded
into a coalesced run (the one run created for them counts once), manual runs, ad-hoc runs and
retries. Why: `max_runs` is a repeat count, "run this N times"; a missed occurrence never
ran and never will (an operator retry makes a new, manual execution), so counting it would end a
job that missed its window before it ran N times. A limit in time is `end_at`.

**When a limit is reached** (the N-th run was created, or the next occurrence would fall after
`end_at`) the scheduler creates nothing more: the job's next run is cleared and
`disabled_reason` says why. The job is disabled once none of its runs is waiting or running, so
the runs it already created still run (a disabled job's queued runs are cancelled at claim time).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

NextAfter = Callable[[datetime], "datetime | None"]
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class RunLimits:
    """A job's limits and how far it got."""

    max_runs: int | None = None
    runs_created: int = 0
    start_at: datetime | None = None
    end_at: datetime | None = None

    @property
    def runs_left(self) -> int | None:
        """Runs it may still create (None: no count limit)."""
        return None if self.max_runs is None else max(0, self.max_runs - self.runs_created)

    def reached(self, *, next_run_at: datetime | None) -> str | None:
        """Why the job has no more runs, when its next occurrence would be `next_run_at`."""
        if self.runs_left == 0:
            return max_runs_reason(self.max_runs or 0)
        if self.end_at is not None and next_run_at is not None and next_run_at > self.end_at:
            return end_at_reason(self.end_at)
        return None


def max_runs_reason(max_runs: int) -> str:
    return f"max_runs reached: {max_runs} scheduled run{'s' if max_runs != 1 else ''} created"


def end_at_reason(end_at: datetime) -> str:
    return f"end_at reached: no run after {end_at.isoformat().replace('+00:00', 'Z')}"


def is_limit_reason(reason: str | None) -> bool:
    """Whether a disabled_reason was written by a run limit (not, say, by auto-pause)."""
    return reason is not None and reason.startswith(("max_runs reached", "end_at reached"))


def window_problem(
    start_at: datetime | None, end_at: datetime | None, *, one_time_at: datetime | None = None
) -> tuple[str, str] | None:
    """(field, message) when start_at/end_at leave no instant to run in, else None."""
    if start_at is not None and end_at is not None and end_at <= start_at:
        return "end_at", "must be after start_at"
    if one_time_at is not None:
        if start_at is not None and one_time_at < start_at:
            return "start_at", "is after the one-time run_at, so the job would never run"
        if end_at is not None and one_time_at > end_at:
            return "end_at", "is before the one-time run_at, so the job would never run"
    return None


def first_run(next_after: NextAfter, *, now: datetime, start_at: datetime | None) -> datetime | None:
    """The first occurrence strictly after `now` that is not before `start_at`."""
    if start_at is not None and start_at > now:
        return next_after(start_at - _TICK)
    return next_after(now)


@dataclass(frozen=True)
class Bounded:
    """What the limits leave of one tick's planned rows for a job."""

    keep: int  # how many of the planned rows (in time order) are created
    runs_added: int  # of those, how many are runs (count towards max_runs)
    next_run_at: datetime | None  # the job's next run (None: a limit was reached)
    reason: str | None  # set: a limit was reached this tick
    # The first occurrence the limits stopped (dropped or never to come): from it on the job is
    # finished, which is what the ledger excuses. None when nothing was stopped.
    stopped_at: datetime | None


def bound(planned: Sequence[tuple[datetime, bool]], next_run_at: datetime | None, limits: RunLimits) -> Bounded:
    """Apply the limits to one tick's planned rows for a job, `(scheduled_for, is_run)` in time
    order (`is_run`: created pending, counting towards max_runs; else a missed row), given the
    job's next occurrence after them. Rows after end_at are dropped; after the last run max_runs
    allows, the rest are dropped."""
    left = limits.runs_left
    keep = runs = 0
    for at, is_run in planned:
        if limits.end_at is not None and at > limits.end_at:
            return Bounded(keep, runs, None, end_at_reason(limits.end_at), at)
        if is_run:
            if left is not None and runs >= left:
                return Bounded(keep, runs, None, max_runs_reason(limits.max_runs or 0), at)
            runs += 1
        keep += 1
    after = RunLimits(limits.max_runs, limits.runs_created + runs, limits.start_at, limits.end_at)
    reason = after.reached(next_run_at=next_run_at)
    if reason is not None:
        return Bounded(keep, runs, None, reason, next_run_at)
    return Bounded(keep, runs, next_run_at, None, None)


def result_expired(
    *, succeeded: bool, finished_at: datetime, now: datetime, success_ttl_seconds: int, failure_ttl_seconds: int
) -> bool:
    """Whether a finished run's result TTL has passed: -1 keeps it (retention_count/days still
    apply), 0 lets the next retention pass remove it, n removes it n seconds after it finished."""
    ttl = success_ttl_seconds if succeeded else failure_ttl_seconds
    if ttl < 0:
        return False
    return finished_at + timedelta(seconds=ttl) <= now


def queued_deadline(available_at: datetime, queued_ttl_seconds: int | None) -> datetime | None:
    """When work that became available at `available_at` expires unless started (None: never)."""
    if queued_ttl_seconds is None:
        return None
    return available_at + timedelta(seconds=queued_ttl_seconds)
