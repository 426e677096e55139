"""Occurrences written ahead of their time (SCHEDULER_LEAD_MS) on SQLite and PostgreSQL.

The scheduler's clock is injected: a tick at NOW writes what falls due within the lead, and the
claim is driven with explicit times, so no test sleeps for time except the real-process one at
the end (PostgreSQL, real scheduler and worker processes).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, text, update
from sqlalchemy.exc import ProgrammingError

from app.clock import utcnow
from app.database import write_transaction
from app.extensions import db
from app.models import Attempt, Execution, Heartbeat, Job
from app.services.engine import wakeups
from app.services.engine.scheduler import Scheduler
from app.services.engine.worker import Worker
from app.services.read.explain import explain_job
from app.services.use_cases import jobs
from app.store import postgres as postgres_store
from app.store import store_for
from tests.factories import make_due_job, make_execution, utc
from tests.helpers.processes import wait_for

NOW = utc(2026, 6, 1, 12, 0)
SOON = NOW + timedelta(seconds=1)  # inside the default lead (2 s); interval anchors are whole seconds


def rows_of(job_id: int) -> list[Execution]:
    db.session.rollback()  # end the read transaction: on SQLite it pins an old snapshot
    return list(
        db.session.scalars(select(Execution).where(Execution.job_id == job_id).order_by(Execution.scheduled_for))
    )


def job_of(job_id: int) -> Job:
    db.session.rollback()
    return db.session.get(Job, job_id)


def tick(app, now=NOW):
    return Scheduler(app, scheduler_id="test-scheduler", clock=lambda: now).tick(now)


def claim(now) -> list[int]:
    """One worker turn at `now`: the ids it started."""
    with write_transaction(db.engine) as conn:
        turn = store_for(conn).record_and_claim(
            conn, [], worker_id="w1", now=now, limit=10, queue_ids=None, lease_seconds=60, buffer_seconds=10
        )
    return [item.id for item, _ in turn.started]


def test_an_occurrence_inside_the_lead_is_written_ahead_and_claimable_only_at_its_time(app):
    job = make_due_job(next_run_at=SOON)
    report = tick(app)
    [row] = rows_of(job.id)
    assert (row.status, row.scheduled_for, row.available_at, row.created_at) == ("pending", SOON, SOON, NOW)
    assert report.created == 1
    assert job_of(job.id).next_run_at == SOON + timedelta(minutes=1)  # the cursor moved past it
    assert claim(SOON - timedelta(microseconds=1)) == []  # never early
    assert claim(SOON) == [row.id]


def test_no_lead_writes_nothing_before_its_time(app):
    app.config["SCHEDULER_LEAD_MS"] = 0
    job = make_due_job(next_run_at=SOON)
    assert tick(app).created == 0 and rows_of(job.id) == []
    tick(app, SOON)
    assert [r.scheduled_for for r in rows_of(job.id)] == [SOON]


def test_jitter_still_moves_only_available_at(app):
    job = make_due_job(next_run_at=SOON, jitter_seconds=30)
    tick(app)
    [row] = rows_of(job.id)
    assert row.scheduled_for == SOON and SOON <= row.available_at <= SOON + timedelta(seconds=30)


def test_a_job_disabled_before_its_time_never_had_the_run(app):
    job = make_due_job(next_run_at=SOON)
    tick(app)
    _, cancelled = jobs.disable_job(job.id, now=NOW + timedelta(milliseconds=500), actor="test")
    assert cancelled == 0 and rows_of(job.id) == []  # withdrawn, not cancelled: it never existed
    assert job_of(job.id).next_run_at == SOON  # the cursor is back, as if never written
    assert job_of(job.id).runs_created == 0
    assert claim(SOON) == []
    # Enabled again before its time: the occurrence is written again and runs at its time.
    jobs.enable_job(job.id, now=NOW + timedelta(milliseconds=700), actor="test")
    tick(app, NOW + timedelta(milliseconds=700))
    assert [(r.status, r.scheduled_for) for r in rows_of(job.id)] == [("pending", SOON)]


def test_a_job_auto_paused_before_its_time_loses_the_run_written_ahead(app):
    job = make_due_job(next_run_at=SOON, pause_after_failures=1, overlap_policy="allow")
    make_execution(job, "dead_lettered", now=NOW - timedelta(seconds=5))
    report = tick(app)  # writes SOON ahead, then its alert pass auto-pauses the job
    assert report.created == 1
    assert not job_of(job.id).enabled
    assert [r.status for r in rows_of(job.id)] == ["dead_lettered"]  # the row written ahead is gone
    assert job_of(job.id).next_run_at == SOON
    assert claim(SOON) == []


def test_an_edited_schedule_replaces_the_run_written_ahead(app):
    job = make_due_job(next_run_at=SOON)
    tick(app)
    edited_at = NOW + timedelta(milliseconds=500)
    jobs.update_job(job.id, {"schedule": {"every": "5m"}}, now=edited_at, actor="test")
    assert rows_of(job.id) == []  # the old schedule's occurrence will not run
    assert job_of(job.id).next_run_at == NOW + timedelta(minutes=5)  # from the edit, on a whole second
    assert claim(SOON) == []


def test_an_edit_that_keeps_the_schedule_writes_the_run_again_with_the_change(app):
    job = make_due_job(next_run_at=SOON)
    tick(app)
    jobs.update_job(job.id, {"priority": 7}, now=NOW + timedelta(milliseconds=500), actor="test")
    assert rows_of(job.id) == [] and job_of(job.id).next_run_at == SOON
    tick(app, NOW + timedelta(milliseconds=500))
    assert [(r.scheduled_for, r.priority) for r in rows_of(job.id)] == [(SOON, 7)]


def test_overlap_skip_is_decided_at_the_occurrences_time(app):
    """Written ahead while nothing ran; a manual run starts before its time and is still running
    then: the tick at its time records it `missed`, exactly as without a lead time."""
    job = make_due_job(next_run_at=SOON)  # overlap policy skip (the default)
    tick(app)
    [ahead_id] = [r.id for r in rows_of(job.id)]
    manual_id = make_execution(job, "running", now=NOW + timedelta(milliseconds=500)).id
    tick(app, SOON)
    by_time = {r.scheduled_for: r for r in rows_of(job.id) if r.id != manual_id}
    missed = by_time[SOON]
    assert missed.status == "missed" and missed.id != ahead_id
    assert missed.reason == "overlap: an earlier run of this job was still active"
    assert claim(SOON) == []
    explained = explain_job(job.id, at=SOON, now=SOON + timedelta(seconds=1))
    assert "overlap" in str(explained)


def test_overlap_skip_not_busy_at_its_time_runs(app):
    job = make_due_job(next_run_at=SOON)
    tick(app)
    [ahead] = rows_of(job.id)
    tick(app, SOON)  # nothing else ran: the row stays
    assert claim(SOON) == [ahead.id]


def test_an_overlap_skip_job_with_work_waiting_is_not_written_ahead(app):
    job = make_due_job(next_run_at=SOON)
    running = make_execution(job, "running", now=NOW)
    assert tick(app).created == 0 and [r.id for r in rows_of(job.id)] == [running.id]
    tick(app, SOON)  # at its time, the tick's own rule: still running, so missed
    assert [r.status for r in rows_of(job.id) if r.id != running.id] == ["missed"]


def test_jobs_with_run_limits_are_written_at_their_time(app):
    job = make_due_job(next_run_at=SOON, max_runs=5)
    assert tick(app).created == 0 and rows_of(job.id) == []
    tick(app, SOON)
    assert [r.scheduled_for for r in rows_of(job.id)] == [SOON]


def test_the_scheduler_sleeps_until_a_lead_before_the_next_occurrence(app):
    make_due_job(next_run_at=NOW + timedelta(seconds=30))
    scheduler = Scheduler(app, scheduler_id="test-scheduler", clock=lambda: NOW)
    scheduler.tick(NOW)
    assert scheduler.seconds_until_due(NOW, 60) == pytest.approx(28.0)


def test_a_job_due_now_whose_next_run_falls_inside_the_lead_is_not_forgotten(app):
    """A 2 s job planned at its time moves its cursor inside the lead: the scheduler must tick
    again for it (write it ahead, or defer it to its time), not sleep a whole tick interval."""
    job = make_due_job(next_run_at=NOW, every="2s")
    scheduler = Scheduler(app, scheduler_id="test-scheduler", clock=lambda: NOW)
    scheduler.tick(NOW)
    assert [r.scheduled_for for r in rows_of(job.id)] == [NOW]
    assert scheduler.seconds_until_due(NOW, 5) == 0.0
    scheduler.tick(NOW)  # skip job with a run waiting: deferred to its time, as without a lead
    assert scheduler.seconds_until_due(NOW, 5) == pytest.approx(2.0)


def test_an_idle_worker_knows_when_the_next_run_becomes_claimable(app):
    job = make_due_job(next_run_at=SOON)
    tick(app)
    with db.engine.connect() as conn:
        store = store_for(conn)
        assert store.earliest_claimable(conn, after=NOW) == SOON
        assert store.earliest_claimable(conn, after=SOON) is None  # due already: claimed, not waited for
    assert job.id


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_real_processes_never_start_a_run_written_ahead_before_its_time(app, flask_processes):
    """A real scheduler (lead 3 s) and worker: 20 jobs due in the same instant are written well
    before it and all start at or after it."""
    env = {"SCHEDULER_LEAD_MS": "3000"}
    flask_processes.start("scheduler", "run", env=env)
    flask_processes.start_worker("--workers", "4", env=env)

    def both_beating():
        db.session.rollback()
        return {h.kind for h in db.session.scalars(select(Heartbeat))} >= {"scheduler", "worker"} or None

    wait_for(both_beating, within=60, what=lambda: f"scheduler and worker heartbeats\n{flask_processes.outputs()}")
    ids = [make_due_job(next_run_at=utcnow() + timedelta(hours=1), every="1h").id for _ in range(20)]
    due = (utcnow() + timedelta(seconds=5)).replace(microsecond=0)
    with write_transaction(db.engine) as conn:  # all 20 due in the same instant, the scheduler told at once
        conn.execute(update(Job).where(Job.id.in_(ids)).values(next_run_at=due))
        wakeups.notify(conn, wakeups.JOBS_CHANNEL)

    def all_finished():
        rows = [r for job_id in ids for r in rows_of(job_id)]
        return rows if len(rows) == 20 and all(r.finished_at is not None for r in rows) else None

    rows = wait_for(all_finished, within=60, what=lambda: f"20 runs to finish\n{flask_processes.outputs()}")
    assert {r.scheduled_for for r in rows} == {due}
    assert all(r.status == "succeeded" for r in rows)
    assert all(r.created_at < due for r in rows), sorted(str(due - r.created_at) for r in rows)  # written ahead
    assert all(r.started_at >= due for r in rows)  # never early
    attempts = db.session.scalars(select(Attempt).where(Attempt.execution_id.in_([r.id for r in rows]))).all()
    assert len(attempts) == 20 and all(a.started_at >= due for a in attempts)


def executions_reltuples() -> float:
    """PostgreSQL's row estimate of executions (-1: never analyzed since created or truncated)."""
    with db.engine.connect() as conn:
        return conn.execute(text("SELECT reltuples FROM pg_class WHERE oid = to_regclass('executions')")).scalar()


def test_a_tick_that_writes_a_burst_ahead_brings_the_planner_statistics_up_to_date(app, monkeypatch):
    """Workers plan their turn once per connection; planned while executions looked empty, each
    turn then reads the whole table per candidate. A tick that writes more rows than the
    statistics count ANALYZEs the table (PostgreSQL), before the burst's time."""
    monkeypatch.setattr(postgres_store, "STALE_STATISTICS_MIN_ROWS", 5)
    for _ in range(4):
        make_due_job(next_run_at=SOON)
    assert tick(app).created == 4  # below the threshold: left to autovacuum
    postgres = db.engine.dialect.name == "postgresql"
    if postgres:
        assert executions_reltuples() <= 0
    for _ in range(6):
        make_due_job(next_run_at=SOON + timedelta(milliseconds=500))
    assert tick(app).created == 6
    if postgres:
        assert executions_reltuples() == 10  # every row written so far, counted before its time
    with db.engine.connect() as conn:  # SQLite plans each statement afresh: nothing to refresh
        assert store_for(conn).refresh_planner_statistics(conn, written=10**6) is postgres


def test_a_refused_analyze_is_logged_and_not_asked_again_and_the_tick_goes_on(app, monkeypatch, caplog):
    calls = []

    def refused(self, conn, *, written):
        calls.append(written)
        raise ProgrammingError("ANALYZE executions", {}, RefusedAnalyze())

    monkeypatch.setattr(type(store_for(db.engine)), "refresh_planner_statistics", refused)
    scheduler = Scheduler(app, scheduler_id="test-scheduler", clock=lambda: NOW)
    job = make_due_job(next_run_at=SOON)
    with caplog.at_level("WARNING", logger="cronwell.scheduler"):
        assert scheduler.tick(NOW).created == 1
    assert [r.scheduled_for for r in rows_of(job.id)] == [SOON]
    assert "planner_statistics_failed" in [getattr(r, "event", None) for r in caplog.records]
    make_due_job(next_run_at=SOON + timedelta(milliseconds=500))
    assert scheduler.tick(NOW).created == 1
    assert calls == [1]  # no privilege: not asked again


class RefusedAnalyze(Exception):
    sqlstate = "42501"  # insufficient_privilege, as psycopg reports it


def test_an_idle_worker_wakes_at_once_for_a_row_that_fell_due_while_its_turn_ran(app):
    """The turn claimed at `since`; a row claimable after it (the first rows of a burst, when the
    turn ran across their time) must not wait a whole poll interval."""
    make_due_job(next_run_at=SOON)
    tick(app)
    worker = Worker(app, worker_id="w1", slots=1, clock=lambda: SOON + timedelta(milliseconds=5), poll_seconds=1)
    try:
        assert worker.waits.until_claimable(since=SOON - timedelta(milliseconds=1)) == 0.0  # due now: no wait
        assert worker.waits.until_claimable(since=NOW) == 0.0
        assert worker.waits.until_claimable(since=SOON) == 1  # claimed at its time already: the poll interval
    finally:
        worker.connection.drop()
