"""When a run asked for at an instant may be in the past: one rule for a one-time job's `run_at`
and an ad-hoc run's `at` (web, CLI, API). Pure: no I/O, no clock (`now` is given).

An instant up to the job's misfire grace ago is "now" (a form filled in slowly, a clock a little
behind); anything earlier is refused, since nothing will ever run then: the caller is told to
give a future time, or none to run now.
"""

from __future__ import annotations

from datetime import datetime, timedelta


def past_run_time_problem(run_at: datetime, *, now: datetime, grace_seconds: int) -> str | None:
    """Why `run_at` cannot be a run's time (more than the grace in the past), or None."""
    if run_at < now - timedelta(seconds=max(0, grace_seconds)):
        return f"{run_at.isoformat()} is in the past; use a future time, or leave it empty to run now"
    return None
