"""The worker on SQLite and PostgreSQL, driven with run(burst=True): outcomes, retries, dead
letters, timeouts, claim-time cancellation, overlap and priority ordering."""

from datetime import timedelta

import pytest
from sqlalchemy import select

from app.clock import utcnow
from app.database import write_transaction
from app.domain.limits import OUTPUT_LIMIT_CHARS
from app.domain.states import AttemptStatus
from app.extensions import db
from app.models import Alert, Attempt, DeadLetter, Event, Execution
from app.services.engine.worker import Worker
from app.services.use_cases import jobs
from app.store import Finished, Outcome, store_for, truncate
from tests.factories import make_job


def now():
    return utcnow()


def fresh(execution_id) -> Execution:
    db.session.rollback()
    return db.session.get(Execution, execution_id)


def attempts_of(execution_id):
    db.session.rollback()
    return list(
        db.session.scalars(select(Attempt).where(Attempt.execution_id == execution_id).order_by(Attempt.number))
    )


def drain(app, **kwargs):
    return Worker(app, worker_id=kwargs.pop("worker_id", "test-worker"), **kwargs).run(burst=True)


def test_a_successful_run_records_output_and_one_attempt(app):
    job = make_job(now=now(), task="always_succeed", config={"message": "hello <world>"})
    execution = jobs.trigger_job(job.id, now=now(), actor="test")
    stats = drain(app)
    row = fresh(execution.id)
    assert (row.status, row.attempts, row.exit_code) == ("succeeded", 1, 0)
    assert "hello <world>" in row.output
    assert row.started_at <= row.finished_at and row.claimed_by is None or row.claimed_by == "test-worker"
    [attempt] = attempts_of(execution.id)
    assert (attempt.status, attempt.worker_id, attempt.number) == ("succeeded", "test-worker", 1)
    assert attempt.pid and attempt.pid > 0
    assert stats.succeeded == 1


def test_failures_retry_with_backoff_then_dead_letter_with_an_alert(app):
    job = make_job(now=now(), task="always_fail", max_attempts=3, retry_backoff_seconds=0, alert_mode="web")
    execution = jobs.trigger_job(job.id, now=now(), actor="test")
    drain(app)
    row = fresh(execution.id)
    assert (row.status, row.attempts) == ("failed", 3)  # the truthful terminal status
    assert [a.status for a in attempts_of(execution.id)] == ["failed", "failed", "failed"]
    assert "always_fail failed on purpose" in row.error
    dead = db.session.scalars(select(DeadLetter).where(DeadLetter.execution_id == execution.id)).one()
    assert "3 attempt" in dead.reason
    alert = db.session.scalars(select(Alert).where(Alert.execution_id == execution.id)).one()
    assert alert.kind == "dead_letter" and alert.resolved_at is None
    retries = db.session.scalars(
        select(Event).where(Event.type == "retry_scheduled", Event.execution_id == execution.id)
    ).all()
    assert len(retries) == 2


def test_log_only_alert_mode_writes_no_alert_row_but_logs_alert(app, caplog):
    job = make_job(now=now(), task="always_fail", max_attempts=1, alert_mode="log_only")
    execution = jobs.trigger_job(job.id, now=now(), actor="test")
    with caplog.at_level("ERROR", logger="cronwell.alerts"):
        drain(app)
    assert fresh(execution.id).status == "failed"
    assert db.session.scalars(select(Alert)).all() == []
    assert db.session.scalars(select(DeadLetter)).one().execution_id == execution.id
    assert any(r.getMessage().startswith("ALERT ") for r in caplog.records)


def test_retry_waits_for_its_backoff(app):
    job = make_job(now=now(), task="always_fail", max_attempts=2, retry_backoff_seconds=3600)
    execution = jobs.trigger_job(job.id, now=now(), actor="test")
    drain(app)
    row = fresh(execution.id)
    assert row.status == "retry_scheduled" and row.attempts == 1
    assert row.available_at > now() + timedelta(minutes=59)
    assert row.finished_at is None and row.claimed_by is None


def test_fail_once_then_succeed_succeeds_on_the_second_attempt(app):
    job = make_job(now=now(), task="fail_once_then_succeed", max_attempts=2, retry_backoff_seconds=0)
    execution = jobs.trigger_job(job.id, now=now(), actor="test")
    drain(app)
    assert fresh(execution.id).status == "succeeded"
    assert [a.status for a in attempts_of(execution.id)] == ["failed", "succeeded"]


def test_timeout_kills_the_task_and_records_timed_out(app):
    job = make_job(now=now(), task="sleep_for_seconds", config={"seconds": 30}, timeout_seconds=1, max_attempts=1)
    execution = jobs.trigger_job(job.id, now=now(), actor="test")
    drain(app)
    row = fresh(execution.id)
    assert row.status == "timed_out"
    assert row.duration_seconds < 10
    assert db.session.scalars(select(DeadLetter)).one().execution_id == execution.id


def test_stored_output_is_truncated_to_the_limit_with_a_marker(app):
    assert len(truncate("x" * 50_000)) == OUTPUT_LIMIT_CHARS
    assert truncate("x" * 50_000).endswith("[... truncated: 50000 characters in all]")
    assert truncate("short") == "short"


def test_a_row_whose_job_was_disabled_is_cancelled_at_claim_time(app):
    job = make_job(now=now())
    execution = jobs.trigger_job(job.id, now=now(), actor="test")
    # Disable behind the services' back, as if it raced with the claim.
    db.session.rollback()
    db.session.execute(db.text("UPDATE jobs SET enabled = false WHERE id = :id"), {"id": job.id})
    db.session.commit()
    stats = drain(app)
    row = fresh(execution.id)
    assert row.status == "cancelled" and "disabled" in row.reason
    assert stats.cancelled == 1 and attempts_of(execution.id) == []


def test_queue_overlap_runs_one_at_a_time_in_fifo_order(app):
    job = make_job(now=now(), overlap_policy="queue")
    ids = [jobs.trigger_job(job.id, now=now(), actor="test").id for _ in range(4)]
    drain(app, slots=4)
    rows = [fresh(i) for i in ids]
    assert all(r.status == "succeeded" for r in rows)
    for earlier, later in zip(rows, rows[1:]):
        assert earlier.finished_at <= later.started_at


def test_claim_orders_by_priority_then_age(app):
    low = make_job(now=now(), priority=5, overlap_policy="allow")
    high = make_job(now=now(), priority=-5, overlap_policy="allow")
    first = jobs.trigger_job(low.id, now=now() - timedelta(seconds=10), actor="test")
    second = jobs.trigger_job(high.id, now=now(), actor="test")
    with write_transaction(db.engine) as conn:
        turn = store_for(conn).record_and_claim(
            conn, [], worker_id="w", now=now(), limit=1, queue_ids=None, lease_seconds=120, buffer_seconds=30
        )
    assert [c.id for c, _ in turn.started] == [second.id]
    assert first.id != second.id


def test_claim_sets_a_lease_that_covers_the_timeout(app):
    job = make_job(now=now(), timeout_seconds=600)
    execution = jobs.trigger_job(job.id, now=now(), actor="test")
    at = now()
    with write_transaction(db.engine) as conn:
        [(claimed, number)] = (
            store_for(conn)
            .record_and_claim(
                conn, [], worker_id="w", now=at, limit=5, queue_ids=None, lease_seconds=120, buffer_seconds=30
            )
            .started
        )
    assert (claimed.id, number) == (execution.id, 1)
    assert abs((claimed.lease_expires_at - at).total_seconds() - 630) < 1
    row = fresh(execution.id)
    assert (row.status, row.claimed_by) == ("running", "w")
    assert abs((row.lease_expires_at - at).total_seconds() - 630) < 1


def test_workers_serve_only_their_queues(app):
    reports = make_job(now=now(), queue="reports")
    execution = jobs.trigger_job(reports.id, now=now(), actor="test")
    drain(app, queues=["default"])
    assert fresh(execution.id).status == "pending"
    drain(app, queues=["reports"])
    assert fresh(execution.id).status == "succeeded"


def test_a_stale_worker_cannot_overwrite_a_recovered_row(app):
    job = make_job(now=now(), max_attempts=3)
    execution = jobs.trigger_job(job.id, now=now(), actor="test")
    at = now()
    with write_transaction(db.engine) as conn:
        started = (
            store_for(conn)
            .record_and_claim(
                conn, [], worker_id="old", now=at, limit=1, queue_ids=None, lease_seconds=1, buffer_seconds=0
            )
            .started
        )
        assert [(item.id, number) for item, number in started] == [(execution.id, 1)]
    from app.services.engine import recovery

    later = at + timedelta(minutes=5)
    report = recovery.recover_expired_leases(db.engine, now=later)
    assert report.retried == 1
    outcome = Outcome(status=AttemptStatus.SUCCEEDED, exit_code=0, output="late", error="")
    with write_transaction(db.engine) as conn:
        late = [Finished(execution.id, 1, outcome, None)]
        assert store_for(conn).record_finished(conn, late, worker_id="old", now=later) == set()
    row = fresh(execution.id)
    assert row.status == "retry_scheduled" and row.output == ""
    assert [a.status for a in attempts_of(execution.id)] == ["abandoned"]


@pytest.mark.parametrize("status", ["succeeded", "failed"])
def test_terminal_rows_must_have_finished_at(app, status):
    job = make_job(now=now())
    execution = jobs.trigger_job(job.id, now=now(), actor="test")
    db.session.rollback()
    with pytest.raises(Exception):
        with write_transaction(db.engine) as conn:
            conn.execute(db.text("UPDATE executions SET status = :s WHERE id = :id"), {"s": status, "id": execution.id})


def test_rows_cancelled_at_claim_time_do_not_use_up_the_turn(app):
    # Rows of a job disabled behind the service's back (or in a race with the disable) are
    # cancelled when claimed; the worker must claim again at once, not leave the runnable row
    # behind them waiting for the next poll.
    disabled = make_job(now=now(), name="switched-off", overlap_policy="allow")
    stale = [jobs.trigger_job(disabled.id, now=now(), actor="test").id for _ in range(5)]
    db.session.rollback()
    db.session.execute(db.text("UPDATE jobs SET enabled = false WHERE id = :id"), {"id": disabled.id})
    db.session.commit()
    wanted = jobs.trigger_job(make_job(now=now(), name="still-on").id, now=now(), actor="test")
    worker = Worker(app, worker_id="one-turn", slots=2)
    worker.start()
    try:
        worker.run_once(wait=0.0)
        assert wanted.id in worker.running
        assert {fresh(i).status for i in stale} == {"cancelled"}
    finally:
        worker.run(burst=True)
    assert fresh(wanted.id).status == "succeeded"
