"""Retention keeps recent finished history and never touches queued, in-flight or dead-lettered rows;
the same pass removes audit events and web sessions past their settings, from every entry point."""

from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from app.clock import utcnow
from app.database import write_transaction
from app.extensions import db
from app.models import AuditEvent, DeadLetter, Execution, WebSession
from app.services import audit_trail
from app.services.engine import retention
from app.services.engine.worker import Worker
from app.services.use_cases import jobs
from tests.factories import make_job, make_user

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


def add_execution(job, *, status, finished_at=None, key, dead=False):
    with write_transaction(db.engine) as conn:
        execution_id = conn.execute(
            Execution.__table__.insert()
            .values(
                job_id=job.id,
                scheduled_for=NOW,
                trigger="manual",
                idempotency_key=key,
                status=status,
                available_at=NOW,
                created_at=NOW,
                updated_at=NOW,
                finished_at=finished_at,
                max_attempts=3,
                attempts=0,
                exclusive=False,
                queue_id=1,
                priority=0,
                output="",
                error="",
            )
            .returning(Execution.__table__.c.id)
        ).scalar()
        if dead:
            conn.execute(
                DeadLetter.__table__.insert().values(
                    execution_id=execution_id, job_id=job.id, reason="r", created_at=NOW
                )
            )
    return execution_id


def statuses(job):
    db.session.rollback()
    return sorted(db.session.scalars(select(Execution.status).where(Execution.job_id == job.id)))


def test_count_axis_keeps_the_newest_finished_rows(app):
    job = make_job(now=NOW, retention_count=2, retention_days=0)
    for i in range(5):
        add_execution(job, status="succeeded", finished_at=NOW, key=f"s{i}")
    add_execution(job, status="pending", key="p")
    add_execution(job, status="running", key="r")
    result = retention.prune_history(now=NOW)
    assert result["deleted"] == 3 and result["by_job"] == {str(job.id): 3}
    assert statuses(job) == ["pending", "running", "succeeded", "succeeded"]


def test_age_axis_removes_old_finished_rows_only(app):
    job = make_job(now=NOW, retention_count=0, retention_days=7)
    add_execution(job, status="failed", finished_at=NOW - timedelta(days=8), key="old")
    add_execution(job, status="failed", finished_at=NOW - timedelta(days=6), key="recent")
    add_execution(job, status="failed", finished_at=NOW - timedelta(days=30), key="dead", dead=True)
    add_execution(job, status="dead_lettered", finished_at=NOW - timedelta(days=30), key="abandoned")
    retention.prune_history(now=NOW)
    assert statuses(job) == ["dead_lettered", "failed", "failed"]


def test_dry_run_counts_without_deleting(app):
    job = make_job(now=NOW, retention_count=1, retention_days=0)
    for i in range(3):
        add_execution(job, status="succeeded", finished_at=NOW, key=f"s{i}")
    assert retention.prune_history(now=NOW, dry_run=True)["deleted"] == 2
    assert len(statuses(job)) == 3


def test_zero_disables_both_axes(app):
    job = make_job(now=NOW, retention_count=0, retention_days=0)
    for i in range(3):
        add_execution(job, status="succeeded", finished_at=NOW - timedelta(days=400), key=f"s{i}")
    assert retention.prune_history(now=NOW)["deleted"] == 0


def test_the_cleanup_old_runs_task_prunes_through_a_real_worker(app):
    noisy = make_job(now=NOW, retention_count=1, retention_days=0)
    for i in range(4):
        add_execution(noisy, status="succeeded", finished_at=NOW, key=f"s{i}")
    cleaner = make_job(now=utcnow(), task="cleanup_old_runs", retention_count=0, retention_days=0)
    execution = jobs.trigger_job(cleaner.id, now=utcnow(), actor="test")
    Worker(app, worker_id="w").run(burst=True)
    db.session.rollback()
    row = db.session.get(Execution, execution.id)
    assert row.status == "succeeded", row.error
    assert "deleted" in row.output
    assert db.session.scalar(select(func.count()).where(Execution.job_id == noisy.id)) == 1


def history_pruned_events():
    from app.models import Event

    db.session.rollback()
    return db.session.scalars(select(Event).where(Event.type == "history_pruned").order_by(Event.id)).all()


def test_a_backlog_is_pruned_in_batches_each_its_own_transaction(app):
    job = make_job(now=NOW, retention_count=0, retention_days=7)
    for i in range(5):
        add_execution(job, status="succeeded", finished_at=NOW - timedelta(days=8), key=f"old{i}")
    add_execution(job, status="succeeded", finished_at=NOW, key="new")
    result = retention.prune_engine(db.engine, now=NOW, batch=2)
    # 2 + 2 + 1: the short batch says the backlog is gone.
    assert (result["deleted"], result["batches"], result["more"]) == (5, 3, False)
    assert result["by_job"] == {str(job.id): 5}
    assert statuses(job) == ["succeeded"]
    # One ledger entry per committed batch: a run stopped half way still says what it removed.
    assert [event.payload["deleted"] for event in history_pruned_events()] == [2, 2, 1]


def test_a_pruning_run_stops_after_its_time_budget_and_says_more_is_left(app):
    job = make_job(now=NOW, retention_count=0, retention_days=7)
    for i in range(5):
        add_execution(job, status="failed", finished_at=NOW - timedelta(days=8), key=f"old{i}")
    ticks = iter([0.0, 0.5, 1.5])  # started, after batch 1 (in budget), after batch 2 (past it)
    result = retention.prune_engine(db.engine, now=NOW, batch=2, max_seconds=1.0, monotonic=lambda: next(ticks))
    assert (result["deleted"], result["batches"], result["more"]) == (4, 2, True)
    assert len(statuses(job)) == 1
    assert retention.prune_engine(db.engine, now=NOW, batch=2)["deleted"] == 1


def test_a_dry_run_is_one_pass_that_deletes_nothing(app):
    job = make_job(now=NOW, retention_count=1, retention_days=0)
    for i in range(4):
        add_execution(job, status="succeeded", finished_at=NOW, key=f"s{i}")
    result = retention.prune_engine(db.engine, now=NOW, dry_run=True, batch=2)
    assert (result["deleted"], result["batches"]) == (3, 1)
    assert len(statuses(job)) == 4 and history_pruned_events() == []


def _ages(model, now) -> list[timedelta]:
    """How old each row older than an hour is, oldest first (the rows a test made)."""
    db.session.rollback()
    stamps = db.session.scalars(select(model.created_at).where(model.created_at < now - timedelta(hours=1)))
    return sorted((now - stamp for stamp in stamps), reverse=True)


def test_the_cleanup_old_runs_task_prunes_audit_events_and_sessions_by_the_settings(app):
    # The task runs in a forked process with no app: the worker hands it the two settings.
    app.config["AUDIT_RETENTION_DAYS"] = 30
    app.config["SESSION_MAX_AGE_HOURS"] = 24
    now = utcnow()
    user = make_user("sam")
    for age in (timedelta(days=31), timedelta(days=29)):
        audit_trail.record_change("cli", "updated", "job", 1, {"x": 1}, {"x": 2}, now=now - age)
    for key, age in (("old", timedelta(hours=25)), ("young", timedelta(hours=23))):
        db.session.add(WebSession(user_id=user.id, token_hash=key.ljust(64, "0"), created_at=now - age))
    db.session.commit()
    cleaner = make_job(now=now, task="cleanup_old_runs", retention_count=0, retention_days=0)
    execution = jobs.trigger_job(cleaner.id, now=now, actor="test")

    Worker(app, worker_id="w").run(burst=True)

    db.session.rollback()
    row = db.session.get(Execution, execution.id)
    assert row.status == "succeeded", row.error
    assert "audit_deleted: 1" in row.output and "sessions_deleted: 1" in row.output
    assert _ages(AuditEvent, now) == [timedelta(days=29)]
    assert _ages(WebSession, now) == [timedelta(hours=23)]


def _paced_run(reads, **pace):
    """prune_engine with a clock that returns `reads` in turn (start, then after each batch and
    after each pause) and a sleep that records what it was asked to wait."""
    reads, slept = iter(reads), []
    result = retention.prune_engine(
        db.engine, now=NOW, batch=2, monotonic=lambda: next(reads), sleep=slept.append, **pace
    )
    return result, slept


def test_a_paced_run_waits_between_batches_for_the_stricter_limit(app):
    job = make_job(now=NOW, retention_count=0, retention_days=7)
    for i in range(7):
        add_execution(job, status="succeeded", finished_at=NOW - timedelta(days=8), key=f"old{i}")
    # Start 0; batches end at 1, 5 and 9.5 and the pauses at 4 and 8; the short fourth batch ends it.
    result, slept = _paced_run([0.0, 1.0, 4.0, 5.0, 8.0, 9.5, 12.0, 13.0], rows_per_second=0.5, duty_cycle=0.5)
    assert (result["deleted"], result["batches"], result["more"]) == (7, 4, False)
    # Rows due at 0.5/s: 2 at 4 s, 4 at 8 s, 6 at 12 s (the duty cycle alone: 2, 4 and 7 s).
    assert slept == [3.0, 3.0, 2.5] and result["paused"] == 8.5


def test_a_paced_run_stops_when_its_budget_ends_inside_a_pause(app):
    job = make_job(now=NOW, retention_count=0, retention_days=7)
    for i in range(7):
        add_execution(job, status="succeeded", finished_at=NOW - timedelta(days=8), key=f"old{i}")
    # Duty cycle 0.25: 1 s of work asks for 3 s of pause; the second pause would end past 6 s.
    result, slept = _paced_run([0.0, 1.0, 4.0, 5.0], duty_cycle=0.25, max_seconds=6.0)
    assert (result["deleted"], result["batches"], result["more"]) == (4, 2, True)
    assert slept == [3.0]
