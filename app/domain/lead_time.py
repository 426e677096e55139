"""Writing occurrences ahead of their time (SCHEDULER_LEAD_MS), as pure functions.

The scheduler writes a job's next occurrences up to `lead` before they fall due, so that at the
due instant the rows already exist and the workers (asleep until the earliest claimable time)
start them without waiting for a tick. A row written ahead is claimable at its `available_at`
(its scheduled time plus jitter), never before, so it cannot run early. Until its scheduled time
it is only a forecast: editing, disabling or pausing the job withdraws it (it is deleted and the
job's cursor moves back), and an overlap-skip job busy at that time gets the `missed` row the
tick would have written (docs/scheduling.md, "Lead time").

Which jobs are written ahead: a job whose cursor is on time (next_run_at in (now, now + lead]),
without run limits (max_runs, end_at: their counters and reasons are decided when a run is
created, so such jobs keep being written at their time), and, for overlap policy `skip`, only
when nothing of the job waits or runs (one row ahead at most: the skip decision at its time
needs the rows before it to have started).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

NextAfter = Callable[[datetime], "datetime | None"]


@dataclass(frozen=True)
class AheadPlan:
    """The occurrences to write ahead for one job and where its cursor moves."""

    fire: list[datetime]
    next_run_at: datetime | None


def writes_ahead(*, next_run_at: datetime | None, now: datetime, lead: timedelta, limited: bool) -> bool:
    """Whether a job's next occurrence is written ahead now rather than at its time."""
    if next_run_at is None or lead <= timedelta(0) or limited:
        return False
    return now < next_run_at <= now + lead


def plan_ahead(
    *, next_run_at: datetime, now: datetime, lead: timedelta, next_after: NextAfter, only_one: bool, limit: int
) -> AheadPlan:
    """The occurrences in (now, now + lead] from `next_run_at` on: all of them (at most `limit`),
    or only the first for an overlap-skip job. They are on time by construction, so no misfire
    policy applies; the cursor moves to the first occurrence not written."""
    horizon = now + lead
    fire: list[datetime] = []
    current: datetime | None = next_run_at
    while current is not None and now < current <= horizon and len(fire) < max(1, limit):
        fire.append(current)
        current = next_after(current)
        if only_one:
            break
    return AheadPlan(fire, current)


def wake_at(
    *,
    now: datetime,
    lead: timedelta,
    earliest_beyond: datetime | None,
    deferred: datetime | None,
    confirm: datetime | None,
    again: bool,
) -> datetime | None:
    """When the scheduler must tick next (None: nothing known; the caller's cap applies).

    `earliest_beyond`: the earliest next_run_at after the horizon (written `lead` before it);
    `deferred`: the earliest time of a job that could not be written ahead (ticked at its time);
    `confirm`: the earliest scheduled time of an overlap-skip row written ahead (checked then);
    `again`: a job is still inside the horizon after this tick (a period shorter than the lead).
    """
    if again:
        return now
    times = [t for t in (deferred, confirm) if t is not None]
    if earliest_beyond is not None:
        times.append(earliest_beyond - lead)
    return min(times) if times else None
