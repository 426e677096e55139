"""Priority draining on both databases: lower priority numbers run first, but work that has
waited PRIORITY_AGING_SECONDS is raised to the top, so a queue of high-priority work that never
empties cannot keep the rest waiting forever."""

from __future__ import annotations

from datetime import timedelta

from app.database import write_transaction
from app.domain.states import AttemptStatus
from app.extensions import db
from app.services.engine.scheduler import Scheduler
from app.services.use_cases import jobs
from app.store import Finished, Outcome, store_for
from tests.factories import make_job, make_queue, utc

T0 = utc(2031, 3, 1, 12)
LEASE = dict(lease_seconds=60, buffer_seconds=30)


def run_busy_hour(app, minutes: int) -> int | None:
    """Every minute two more urgent runs arrive and a one-slot worker finishes one run and starts
    the next: the urgent backlog only grows. Returns the minute the low-priority run started."""
    make_queue("urgent", priority=-10, now=T0)
    urgent = make_job("urgent", queue="urgent", overlap_policy="allow", every="1d", now=T0)
    patient = make_job("patient", priority=10, every="1d", now=T0)
    waiting = jobs.trigger_job(patient.id, now=T0, actor="test")
    scheduler = Scheduler(app, scheduler_id="s", clock=lambda: T0)
    running: list[tuple[int, int]] = []
    for minute in range(minutes):
        now = T0 + timedelta(minutes=minute, seconds=1)
        for _ in range(2):
            jobs.trigger_job(urgent.id, now=now, actor="test")
        scheduler.tick(now)
        finished = [Finished(i, n, Outcome(AttemptStatus.SUCCEEDED, 0, "", ""), None) for i, n in running]
        with write_transaction(db.engine) as conn:
            turn = store_for(conn).record_and_claim(
                conn, finished, worker_id="w", now=now, limit=1, queue_ids=None, **LEASE
            )
        running = [(item.id, number) for item, number in turn.started]
        if any(item.id == waiting.id for item, _ in turn.started):
            return minute
    return None


def test_urgent_work_runs_first(app):
    app.config["PRIORITY_AGING_SECONDS"] = 300
    assert run_busy_hour(app, 3) is None  # for the first minutes only urgent work starts


def test_work_that_waited_too_long_jumps_the_line(app):
    app.config["PRIORITY_AGING_SECONDS"] = 300
    started = run_busy_hour(app, 30)
    assert started is not None and 5 <= started <= 6


def test_without_draining_the_busy_queue_starves_the_rest(app):
    app.config["PRIORITY_AGING_SECONDS"] = 0  # the rule is what makes the difference
    assert run_busy_hour(app, 30) is None
