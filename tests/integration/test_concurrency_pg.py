"""Real concurrency on the real PostgreSQL: several OS processes racing over the same rows.

What is proved here is the README's central guarantee under contention: each occurrence gets
one execution even with three schedulers ticking together; each execution is claimed and run
once even with four workers racing; a queue-policy job runs one at a time, in order, even
while several workers want it; and a manual trigger reaches an idle worker through NOTIFY.

Racers start together through a starting gate (a table lock they all queue on) or a barrier,
and every wait is a bounded poll for a condition, never a sleep.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError

from app.clock import utcnow
from app.database import write_transaction
from app.extensions import db
from app.models import Attempt, Execution, Heartbeat, Job
from app.services.use_cases import jobs
from app.store import store_for
from tests.factories import make_job
from tests.helpers.pg import starting_gate
from tests.helpers.processes import wait_for
from tests.helpers.racers import race_schedulers

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture
def backend() -> str:
    """Every test in this module runs on PostgreSQL only: SQLite cannot show skip-locked."""
    return "postgres"


def fresh_session() -> None:
    """End the test's own transaction so the next read sees what other processes committed."""
    db.session.rollback()


def insert_manual_executions(job: Job, count: int, *, now: datetime) -> list[int]:
    with write_transaction(db.engine) as conn:
        return [store_for(conn).insert_manual(conn, job, now=now) for _ in range(count)]


# --- 1. schedulers ------------------------------------------------------------------------------


def test_three_scheduler_processes_create_each_occurrence_exactly_once(app, app_env, tmp_path):
    start = utcnow().replace(microsecond=0)
    # 200 hourly jobs created 5.5 h ago (phases a second apart): each has five occurrences in the
    # past, all late, and its next one about 30 minutes ahead. Catch-up with a cap of 2 per tick
    # makes every job take several ticks, so the schedulers keep meeting on the same jobs.
    created = [
        make_job(
            now=start - timedelta(hours=5, minutes=30) + timedelta(seconds=n),
            every="1h",
            name=f"race-{n:03d}",
            misfire_policy="catch_up",
            overlap_policy="allow",
        )
        for n in range(200)
    ]
    expected = {}
    for job in created:
        schedule = jobs.schedule_of(job)
        occurrences, at = [], job.next_run_at
        while at <= start:
            occurrences.append(at)
            at = schedule.next_after(at)
        assert len(occurrences) == 5
        expected[job.id] = (occurrences, at)
    fresh_session()

    reports = race_schedulers({**app_env, "MISFIRE_CATCH_UP_CAP": "2"}, 3, tmp_path / "racers")

    fresh_session()
    rows = db.session.execute(
        select(Execution.job_id, Execution.scheduled_for, Execution.status, Execution.trigger)
    ).all()
    pairs = Counter((job_id, at) for job_id, at, _, _ in rows)
    assert [pair for pair, n in pairs.items() if n > 1] == []
    assert len(rows) == 200 * 5 == sum(report["created"] for report in reports)
    assert {status for _, _, status, _ in rows} == {"pending"}
    assert {trigger for _, _, _, trigger in rows} == {"catch_up"}  # all were more than the grace late
    by_job: dict[int, set] = {}
    for job_id, at, _, _ in rows:
        by_job.setdefault(job_id, set()).add(at)
    next_runs = dict(db.session.execute(select(Job.id, Job.next_run_at)).all())
    for job_id, (occurrences, following) in expected.items():
        assert by_job[job_id] == set(occurrences), f"job {job_id}"
        assert next_runs[job_id] == following, f"job {job_id} next_run_at"
        assert following > start
    # With a cap of 2 each job is worked three times (2 + 2 + 1 occurrences). Row locks mean no two
    # schedulers ever worked the same job at the same cursor, so the three processes together
    # saw exactly 600 due jobs: without them, duplicates would be absorbed by the unique key but
    # counted here.
    assert sum(report["due"] for report in reports) == 200 * 3
    # Every scheduler left a heartbeat: all three really ran against this database.
    assert set(db.session.scalars(select(Heartbeat.id))) >= {"racer-0", "racer-1", "racer-2"}


# --- 2. workers ---------------------------------------------------------------------------------


def test_four_worker_processes_run_each_of_500_executions_exactly_once(app, app_env, flask_processes):
    job = make_job(now=utcnow(), every="1d", name="race-workers", task="always_succeed", overlap_policy="allow")
    ids = insert_manual_executions(job, 500, now=utcnow())
    fresh_session()

    with starting_gate(app_env["DATABASE_URL"]) as gate:
        workers = [
            flask_processes.start_worker("--once", "--workers", "4", "--worker-id", f"racer-{n}") for n in range(4)
        ]
        gate.wait_for_waiters(4, within=30, describe=flask_processes.outputs)
        gate.open()
        codes = flask_processes.wait_all(within=60)
    assert codes == [0, 0, 0, 0], flask_processes.outputs()
    # No worker ever lost a row it had claimed to another one (a double claim would be discarded).
    for worker in workers:
        assert "discarded=0" in worker.output(), worker.describe()

    fresh_session()
    rows = db.session.execute(
        select(Execution.id, Execution.status, Execution.attempts, Execution.claimed_by).where(Execution.id.in_(ids))
    ).all()
    assert len(rows) == 500
    assert Counter(status for _, status, _, _ in rows) == {"succeeded": 500}
    assert {attempts for _, _, attempts, _ in rows} == {1}
    attempt_counts = dict(
        db.session.execute(select(Attempt.execution_id, func.count()).group_by(Attempt.execution_id)).all()
    )
    assert attempt_counts == {execution_id: 1 for execution_id in ids}
    assert set(db.session.scalars(select(Attempt.status))) == {"succeeded"}
    claimers = Counter(claimed_by for _, _, _, claimed_by in rows)
    assert set(claimers) <= {f"racer-{n}" for n in range(4)}
    assert len(claimers) > 1, f"one worker took everything: {claimers}"
    # Each attempt was recorded by the worker that claimed the execution.
    mismatched = db.session.execute(
        select(func.count())
        .select_from(Attempt)
        .join(Execution, Execution.id == Attempt.execution_id)
        .where(Attempt.worker_id != Execution.claimed_by)
    ).scalar_one()
    assert mismatched == 0


# --- 3. queue overlap policy --------------------------------------------------------------------


def test_queue_policy_runs_one_at_a_time_in_fifo_order_across_racing_workers(app, app_env, flask_processes):
    job = make_job(
        now=utcnow(),
        every="1d",
        name="race-queue",
        task="sleep_for_seconds",
        config={"seconds": 0.2},
        overlap_policy="queue",
    )
    ids = insert_manual_executions(job, 10, now=utcnow())
    fresh_session()

    with starting_gate(app_env["DATABASE_URL"]) as gate:
        workers = [flask_processes.start_worker("--workers", "2", "--worker-id", f"queue-{n}") for n in range(3)]
        gate.wait_for_waiters(3, within=30, describe=flask_processes.outputs)
        gate.open()

        def all_finished():
            fresh_session()
            return (
                db.session.execute(
                    select(func.count())
                    .select_from(Execution)
                    .where(Execution.id.in_(ids), Execution.status == "succeeded")
                ).scalar_one()
                == 10
            )

        wait_for(all_finished, within=45, what=lambda: "10 queued executions to succeed\n" + flask_processes.outputs())
    for worker in workers:
        worker.signal(15)
    assert flask_processes.wait_all(within=20) == [0, 0, 0], flask_processes.outputs()

    fresh_session()
    attempts = db.session.execute(
        select(Attempt.execution_id, Attempt.started_at, Attempt.finished_at)
        .where(Attempt.execution_id.in_(ids))
        .order_by(Attempt.started_at)
    ).all()
    assert len(attempts) == 10
    # FIFO: started in the order the executions were created.
    assert [execution_id for execution_id, _, _ in attempts] == sorted(ids)
    # Never overlapping: each attempt started after the previous one finished. Each worker reads
    # its clock before its claim or completion statement runs, so on a busy machine the recorded
    # times of a hand-over can cross by a few tens of milliseconds; an engine that let two of these
    # 0.2 s runs overlap would show crossings of up to 200 ms, on most of the ten hand-overs.
    skew = timedelta(milliseconds=100)
    for (_, _, previous_end), (execution_id, next_start, _) in zip(attempts, attempts[1:]):
        assert next_start + skew >= previous_end, f"execution {execution_id} started before its predecessor ended"


def test_the_database_allows_at_most_one_in_flight_run_of_an_exclusive_job(app):
    index = db.session.execute(
        text(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'executions' AND indexname = 'uq_executions_one_in_flight'"
        )
    ).scalar_one()
    assert "UNIQUE" in index and "exclusive" in index and "claimed" in index and "running" in index

    job = make_job(now=utcnow(), every="1d", name="exclusive", overlap_policy="queue")
    first, second = insert_manual_executions(job, 2, now=utcnow())
    fresh_session()
    with write_transaction(db.engine) as conn:
        conn.execute(text("UPDATE executions SET status = 'running', claimed_by = 'a' WHERE id = :id"), {"id": first})
    with pytest.raises(IntegrityError):
        with write_transaction(db.engine) as conn:
            conn.execute(
                text("UPDATE executions SET status = 'claimed', claimed_by = 'b' WHERE id = :id"), {"id": second}
            )


# --- 7. wake-up -------------------------------------------------------------------------------


def test_a_manual_trigger_wakes_an_idle_worker_through_notify(app, flask_processes):
    job = make_job(now=utcnow(), every="1d", name="wake-me", task="always_succeed")
    fresh_session()
    # A 30 s poll: only the NOTIFY can explain a pickup within a second.
    worker = flask_processes.start_worker(
        "--workers", "1", "--worker-id", "listener", env={"WORKER_POLL_SECONDS": "30"}
    )

    def idle_and_listening():
        # The worker opens its LISTEN connection before its first heartbeat.
        fresh_session()
        return db.session.get(Heartbeat, "listener") is not None

    wait_for(idle_and_listening, within=30, what=lambda: "the worker's first heartbeat\n" + worker.describe())
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")

    def started():
        fresh_session()
        row = db.session.get(Execution, execution.id)
        return row if row.started_at is not None else None

    row = wait_for(started, within=5, what=lambda: "the triggered execution to start\n" + worker.describe())
    assert row.started_at - row.created_at < timedelta(seconds=1)
    assert row.claimed_by == "listener"
    worker.signal(15)
    assert worker.wait_exit(within=20) == 0, worker.describe()
