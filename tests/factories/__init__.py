"""Factories for rows, built through the services so tests exercise real validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

from app.services.use_cases import jobs

_names = count(1)


def make_job(*, now: datetime, every: str = "1m", task: str = "always_succeed", **fields):
    """An interval job whose first occurrence is one interval after `now`."""
    data = {
        "name": fields.pop("name", f"job-{next(_names)}"),
        "task": task,
        "schedule_type": fields.pop("schedule_type", "interval"),
        "schedule": fields.pop("schedule", {"every": every}),
        **fields,
    }
    return jobs.create_job(data, now=now, actor="test")


def make_due_job(*, next_run_at: datetime, every: str = "1m", **fields):
    """An interval job whose next occurrence is exactly `next_run_at` (possibly in the past)."""
    step = {"s": 1, "m": 60, "h": 3600}[every[-1]] * int(every[:-1])
    return make_job(now=next_run_at - timedelta(seconds=step), every=every, **fields)


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)
