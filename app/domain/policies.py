"""Retry, lease and misfire rules as pure functions of their inputs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from app.domain import retry
from app.domain.states import MisfirePolicy


def retry_delay(backoff_seconds: int, attempt_number: int) -> timedelta:
    """Exponential backoff: backoff * 2 ** (attempt_number - 1), attempt_number counting from 1
    (the default retry kind; every kind is in app/domain/retry.py)."""
    return retry.retry_delay(retry.RetryKind.EXPONENTIAL, backoff_seconds, attempt_number)


def lease_duration(timeout_seconds: int | None, lease_seconds: int, buffer_seconds: int) -> timedelta:
    """A lease must outlive the task's hard timeout, or a healthy run could be recovered twice.
    A task with no timeout (None) gets `lease_seconds` alone: its worker renews the lease while
    the task runs, so only a worker that stopped renewing loses it."""
    if timeout_seconds is None:
        return timedelta(seconds=lease_seconds)
    return timedelta(seconds=max(lease_seconds, timeout_seconds + buffer_seconds))


# How many occurrences one tick walks before it treats the backlog as a long outage and jumps to
# the latest occurrence (so a job down for a year at 1s costs a few steps, not 31 million).
SCAN_LIMIT = 1000


@dataclass
class OccurrencePlan:
    """What one scheduler tick does for one due job.

    `fire`: occurrences to create as runnable executions (the overlap policy still applies),
    as (scheduled_for, trigger). `missed`: occurrences to record as missed rows.
    `coalesced`: late occurrences folded into the single coalesced run (one event records them).
    `unrecorded`: late occurrences beyond the per-tick cap, recorded by one event instead of a
    row each; `unrecorded_range` is the half-open [from, until) span of time they fall in. `lower_bound`: the backlog was longer than SCAN_LIMIT, so those counts are minimums.
    `next_run_at`: where the job's cursor moves (None: the schedule is exhausted).
    """

    fire: list[tuple[datetime, str]] = field(default_factory=list)
    missed: list[datetime] = field(default_factory=list)
    coalesced: int = 0
    unrecorded: int = 0
    unrecorded_range: tuple[datetime, datetime] | None = None
    lower_bound: bool = False
    next_run_at: datetime | None = None


NextAfter = Callable[[datetime], "datetime | None"]


def _collect(
    first: datetime, next_after: NextAfter, until: datetime, limit: int
) -> tuple[list[datetime], datetime | None]:
    """Occurrences from `first` up to `until` inclusive, at most `limit`, and the one after them."""
    found: list[datetime] = []
    current: datetime | None = first
    while current is not None and current <= until and len(found) < limit:
        found.append(current)
        current = next_after(current)
    return found, current


def latest_at_or_before(next_after: NextAfter, start: datetime, until: datetime) -> datetime:
    """The last occurrence in [start, until], given that `start` is one. Searches back from
    `until` in widening windows, so a long outage costs a few steps, not one per occurrence."""
    window = timedelta(minutes=1)
    while True:
        probe_from = until - window
        if probe_from <= start:
            found, _ = _collect(start, next_after, until, 10**9)
            return found[-1]
        latest = None
        current = next_after(probe_from)
        while current is not None and current <= until:
            latest = current
            current = next_after(current)
        if latest is not None:
            return latest
        window *= 4


def plan_occurrences(
    *,
    next_run_at: datetime,
    now: datetime,
    next_after: NextAfter,
    policy: MisfirePolicy | str,
    grace: timedelta,
    cap: int,
) -> OccurrencePlan:
    """Decide what one tick does with a job whose next_run_at <= now.

    Occurrences within `grace` of now are on time and fire normally. Older ones are late, and the
    misfire policy decides: coalesce folds the whole backlog into one run of the latest
    occurrence; catch_up fires each late one, at most `cap` per tick, continuing next tick; skip
    records each late one as missed (at most `cap` rows a tick, the rest counted in one event).
    """
    policy = MisfirePolicy(policy)
    late_before = now - grace
    plan = OccurrencePlan()

    if policy is MisfirePolicy.CATCH_UP:
        backlog, plan.next_run_at = _collect(next_run_at, next_after, now, cap)
        plan.fire = [(at, "schedule" if at >= late_before else "catch_up") for at in backlog]
        return plan

    backlog, after = _collect(next_run_at, next_after, now, SCAN_LIMIT)
    plan.lower_bound = after is not None and after <= now
    latest = latest_at_or_before(next_after, after, now) if after is not None and plan.lower_bound else backlog[-1]
    plan.next_run_at = next_after(latest) if plan.lower_bound else after
    late = [at for at in backlog if at < late_before]
    latest_trigger = "schedule" if latest >= late_before else "catch_up"

    if policy is MisfirePolicy.COALESCE:
        if not late and not plan.lower_bound:
            plan.fire = [(at, "schedule") for at in backlog]
        else:
            plan.fire = [(latest, latest_trigger)]
            plan.coalesced = len(backlog) - (0 if plan.lower_bound else 1)
        return plan

    # MisfirePolicy.SKIP
    plan.missed = late[:cap]
    plan.unrecorded = len(late) - len(plan.missed)
    if plan.lower_bound:
        plan.unrecorded += 1  # at least the occurrences between the scanned ones and the latest
        if latest >= late_before:
            plan.fire = [(latest, "schedule")]
    else:
        plan.fire = [(at, "schedule") for at in backlog if at >= late_before]
    if plan.unrecorded:
        first_unrecorded = late[cap] if len(late) > cap else after
        assert first_unrecorded is not None  # unrecorded with no late ones left: the lower bound, so `after`
        until = plan.fire[0][0] if plan.fire else plan.next_run_at
        plan.unrecorded_range = (first_unrecorded, until if until is not None else latest + timedelta(microseconds=1))
    return plan


# Priorities run from TOP_PRIORITY (first) to BOTTOM_PRIORITY; lower numbers run first.
TOP_PRIORITY, BOTTOM_PRIORITY = -1000, 1000


def starving_since(now: datetime, aging_seconds: int) -> datetime | None:
    """Priority draining: work still waiting for a worker `aging_seconds` after it became due is
    raised to TOP_PRIORITY, where it runs oldest first. Claims take the lowest priority number,
    then the oldest, so without this a queue of high-priority work that never empties would keep
    lower-priority work waiting forever; with it, nothing waits much longer than `aging_seconds`
    plus the time to drain work that started waiting before it. Returns the due-before instant of
    the rows to raise, or None when aging is off."""
    if aging_seconds <= 0:
        return None
    return now - timedelta(seconds=aging_seconds)
