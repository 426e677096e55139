"""The ledger check finds lost and duplicated work, and passes when everything is accounted for."""

from datetime import timedelta

from app.clock import utcnow
from app.database import write_transaction
from app.extensions import db
from app.services.engine.scheduler import Scheduler
from app.services.engine.worker import Worker
from app.services.read.ledger import verify
from app.services.use_cases import jobs
from tests.factories import make_due_job, utc

NOW = utc(2026, 6, 1, 12, 0)


def ledger(now):
    db.session.rollback()  # a fresh read: on SQLite an open transaction pins an old snapshot
    return verify(now=now)


def tick(app, at):
    Scheduler(app, scheduler_id="s", clock=lambda: at).tick(at)


def test_a_clean_history_verifies(app):
    make_due_job(next_run_at=NOW - timedelta(minutes=10), misfire_policy="coalesce")
    make_due_job(next_run_at=NOW - timedelta(minutes=10), misfire_policy="catch_up", overlap_policy="allow")
    make_due_job(next_run_at=NOW - timedelta(minutes=10), misfire_policy="skip", overlap_policy="queue")
    app.config["MISFIRE_CATCH_UP_CAP"] = 4
    for minute in range(0, 5):
        tick(app, NOW + timedelta(minutes=minute))
    report = ledger(NOW + timedelta(minutes=4, seconds=30))
    assert report.ok, report.violations
    assert report.occurrences >= 45
    assert report.coalesced_or_skipped > 0


def test_disabled_spans_are_excused(app):
    job = make_due_job(next_run_at=NOW)
    tick(app, NOW)
    jobs.disable_job(job.id, now=NOW + timedelta(seconds=30), actor="t")
    jobs.enable_job(job.id, now=NOW + timedelta(minutes=10, seconds=30), actor="t")
    tick(app, NOW + timedelta(minutes=11))
    report = ledger(NOW + timedelta(minutes=11, seconds=30))
    assert report.ok, report.violations
    assert report.excused_disabled == 10  # 12:01 through 12:10


def test_a_deleted_execution_is_reported_lost(app):
    job = make_due_job(next_run_at=NOW, overlap_policy="allow")
    tick(app, NOW)
    tick(app, NOW + timedelta(minutes=1))
    with write_transaction(db.engine) as conn:
        conn.execute(
            db.text(
                "DELETE FROM executions WHERE job_id = :id AND scheduled_for = "
                "(SELECT MIN(scheduled_for) FROM executions WHERE job_id = :id)"
            ),
            {"id": job.id},
        )
    report = ledger(NOW + timedelta(minutes=1, seconds=30))
    assert not report.ok
    assert any("lost" in v for v in report.violations)


def test_an_unsettled_expired_lease_and_a_missing_dead_letter_are_reported(app):
    job = make_due_job(next_run_at=NOW, overlap_policy="allow", max_attempts=1)
    tick(app, NOW)
    with write_transaction(db.engine) as conn:
        conn.execute(
            db.text(
                "UPDATE executions SET status = 'running', claimed_by = 'w', attempts = 1, "
                "started_at = :t, lease_expires_at = :t WHERE job_id = :id"
            ),
            {"id": job.id, "t": "2026-06-01 12:00:01" if db.engine.dialect.name == "sqlite" else NOW},
        )
    report = ledger(NOW + timedelta(minutes=5))
    assert any("lease" in v for v in report.violations)
    assert any("Attempt rows" in v for v in report.violations)


def test_real_runs_verify_clean(app):
    job = make_due_job(
        next_run_at=utcnow() - timedelta(minutes=3),
        task="always_fail",
        max_attempts=2,
        retry_backoff_seconds=0,
        misfire_policy="catch_up",
        overlap_policy="allow",
    )
    now = utcnow()
    tick(app, now)
    Worker(app, worker_id="w").run(burst=True)
    report = ledger(utcnow())
    assert report.ok, report.violations
    assert report.executions >= 3
    del job


def test_a_job_created_disabled_and_enabled_later_verifies(app):
    job = make_due_job(next_run_at=NOW, enabled=False)
    for minute in range(0, 6):  # the scheduler runs all along; a disabled job gets nothing
        tick(app, NOW + timedelta(minutes=minute))
    jobs.enable_job(job.id, now=NOW + timedelta(minutes=5, seconds=30), actor="t")
    for minute in range(6, 9):
        tick(app, NOW + timedelta(minutes=minute))
    report = ledger(NOW + timedelta(minutes=8, seconds=30))
    assert report.ok, report.violations
    assert report.excused_disabled == 6  # 12:00 through 12:05, before the enabling
    assert report.occurrences == 9


def test_a_job_created_disabled_by_an_older_release_verifies(app):
    """A job_created event that does not say whether the job was enabled: the first enabling
    with no disable before it means the job was disabled from its creation."""
    job = make_due_job(next_run_at=NOW, enabled=False)
    with write_transaction(db.engine) as conn:
        conn.execute(
            db.text("UPDATE events SET payload = :p WHERE job_id = :id AND type = 'job_created'"),
            {"id": job.id, "p": '{"name": "old"}'},
        )
    jobs.enable_job(job.id, now=NOW + timedelta(minutes=3, seconds=30), actor="t")
    tick(app, NOW + timedelta(minutes=4))
    report = ledger(NOW + timedelta(minutes=4, seconds=30))
    assert report.ok, report.violations
    assert report.excused_disabled == 4


def test_a_job_disabled_from_creation_that_lost_a_run_after_its_enabling_is_still_caught(app):
    job = make_due_job(next_run_at=NOW, enabled=False, overlap_policy="allow")
    jobs.enable_job(job.id, now=NOW + timedelta(minutes=2, seconds=30), actor="t")
    tick(app, NOW + timedelta(minutes=3))
    tick(app, NOW + timedelta(minutes=4))
    with write_transaction(db.engine) as conn:
        conn.execute(db.text("DELETE FROM executions WHERE job_id = :id"), {"id": job.id})
    report = ledger(NOW + timedelta(minutes=4, seconds=30))
    assert report.excused_disabled == 3
    assert len([v for v in report.violations if "lost" in v]) == 2
