"""The scheduler tick on SQLite and PostgreSQL: misfire and overlap policies, one_time jobs."""

from datetime import timedelta

from sqlalchemy import select

from app.extensions import db
from app.models import Event, Execution, Job
from app.services.engine.scheduler import Scheduler
from app.services.use_cases import jobs
from tests.factories import make_due_job, utc

NOW = utc(2026, 6, 1, 12, 0)


def executions_of(job_id):
    db.session.rollback()  # end the read transaction: on SQLite it pins an old snapshot
    return list(
        db.session.scalars(select(Execution).where(Execution.job_id == job_id).order_by(Execution.scheduled_for))
    )


def tick(app, now=NOW):
    return Scheduler(app, scheduler_id="test-scheduler", clock=lambda: now).tick(now)


def test_coalesce_from_five_minutes_late_gives_one_pending_row_at_now(app):
    job = make_due_job(next_run_at=NOW - timedelta(minutes=5), misfire_policy="coalesce", misfire_grace_seconds=30)
    report = tick(app)
    rows = executions_of(job.id)
    assert [(r.status, r.scheduled_for) for r in rows] == [("pending", NOW)]
    assert report.created == 1 and report.coalesced == 5
    events = db.session.scalars(select(Event).where(Event.type == "misfire_coalesced", Event.job_id == job.id)).all()
    assert len(events) == 1 and events[0].payload["occurrences"] == 5
    db.session.rollback()
    assert db.session.get(Job, job.id).next_run_at == NOW + timedelta(minutes=1)


def test_catch_up_creates_six_and_three_with_cap_three(app):
    job = make_due_job(next_run_at=NOW - timedelta(minutes=5), misfire_policy="catch_up", overlap_policy="allow")
    tick(app)
    assert len(executions_of(job.id)) == 6

    capped = make_due_job(next_run_at=NOW - timedelta(minutes=5), misfire_policy="catch_up", overlap_policy="allow")
    app.config["MISFIRE_CATCH_UP_CAP"] = 3
    tick(app)
    assert [r.scheduled_for for r in executions_of(capped.id)] == [NOW - timedelta(minutes=m) for m in (5, 4, 3)]
    tick(app)  # the next tick continues where the cap stopped
    assert len(executions_of(capped.id)) == 6


def test_skip_gives_missed_missed_pending(app):
    job = make_due_job(next_run_at=NOW - timedelta(minutes=2), misfire_policy="skip", misfire_grace_seconds=30)
    tick(app)
    assert [r.status for r in executions_of(job.id)] == ["missed", "missed", "pending"]
    missed = executions_of(job.id)[0]
    assert missed.finished_at == NOW and "misfire" in missed.reason


def test_overlap_skip_records_missed_while_a_run_is_active(app):
    job = make_due_job(next_run_at=NOW, overlap_policy="skip")
    tick(app)
    tick(app, NOW + timedelta(minutes=1))
    rows = executions_of(job.id)
    assert [r.status for r in rows] == ["pending", "missed"]
    assert rows[1].reason.startswith("overlap")


def test_catch_up_rechecks_overlap_before_each_occurrence(app):
    job = make_due_job(next_run_at=NOW - timedelta(minutes=3), misfire_policy="catch_up", overlap_policy="skip")
    tick(app)
    assert [r.status for r in executions_of(job.id)] == ["pending", "missed", "missed", "missed"]


def test_overlap_queue_and_allow_create_every_occurrence(app):
    queued = make_due_job(next_run_at=NOW, overlap_policy="queue")
    allowed = make_due_job(next_run_at=NOW, overlap_policy="allow")
    tick(app)
    tick(app, NOW + timedelta(minutes=1))
    assert [r.status for r in executions_of(queued.id)] == ["pending", "pending"]
    assert [r.status for r in executions_of(allowed.id)] == ["pending", "pending"]


def test_a_second_tick_at_the_same_instant_creates_nothing(app):
    job = make_due_job(next_run_at=NOW, misfire_policy="catch_up", overlap_policy="allow")
    tick(app)
    report = tick(app)
    assert report.created == 0
    assert len(executions_of(job.id)) == 1


def test_one_time_job_fires_once_and_then_has_no_next_run(app):
    run_at = NOW + timedelta(minutes=10)
    job = jobs.create_job(
        {
            "name": "once",
            "task": "always_succeed",
            "schedule_type": "one_time",
            "schedule": {"run_at": run_at.isoformat()},
        },
        now=NOW,
        actor="test",
    )
    assert job.next_run_at == run_at
    tick(app, run_at)
    tick(app, run_at + timedelta(hours=1))
    assert [r.scheduled_for for r in executions_of(job.id)] == [run_at]
    db.session.rollback()
    assert db.session.get(Job, job.id).next_run_at is None


def test_disabled_jobs_are_not_scheduled(app):
    job = make_due_job(next_run_at=NOW)
    jobs.disable_job(job.id, now=NOW - timedelta(seconds=1), actor="test")
    assert tick(app).due == 0
    assert executions_of(job.id) == []


def test_tick_writes_a_scheduler_heartbeat(app, sql):
    tick(app)
    rows = sql("SELECT id, kind FROM heartbeats")
    assert [(r.id, r.kind) for r in rows] == [("test-scheduler", "scheduler")]


def test_upkeep_runs_at_most_once_a_second_while_due_jobs_fire_on_every_tick(app):
    # The loop wakes at every job's exact next_run_at; heartbeat and lease recovery must not
    # ride along on each of those wakes, but must not be starved by them either.
    from app.models import Heartbeat

    first = make_due_job(next_run_at=NOW, every="1h", name="first")
    second = make_due_job(next_run_at=NOW + timedelta(milliseconds=300), every="1h", name="second")
    scheduler = Scheduler(app, scheduler_id="wakeful", clock=lambda: NOW)

    scheduler.tick(NOW)
    db.session.rollback()
    beat = db.session.get(Heartbeat, "wakeful").last_seen
    scheduler.tick(NOW + timedelta(milliseconds=300))
    db.session.rollback()
    assert db.session.get(Heartbeat, "wakeful").last_seen == beat  # no upkeep 0.3 s later
    assert [len(executions_of(j.id)) for j in (first, second)] == [1, 1]  # but the due job fired

    scheduler.tick(NOW + timedelta(seconds=1))
    db.session.rollback()
    assert db.session.get(Heartbeat, "wakeful").last_seen == NOW + timedelta(seconds=1)
