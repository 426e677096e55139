"""No-limit timeouts are safe: a real worker renews the lease of a task that has no timeout, so
recovery never takes a healthy long run from it, while a worker killed with SIGKILL loses the run
within its lease (SQLite and PostgreSQL, real processes).

A 10 s task with no timeout runs under a 2 s lease (LEASE_SECONDS=2): the claim's lease alone
would expire five times over. Recovery is called over and over while it runs, with the real
clock, and must find nothing; the lease is seen moving forward; the run succeeds with one attempt.
Then the same run again, and the worker is killed: recovery settles it once its lease is past.
"""

from __future__ import annotations

import signal
from collections import namedtuple
from datetime import timedelta

import pytest
from sqlalchemy import text

from app.clock import utcnow
from app.extensions import db
from app.models import Execution
from app.services.engine import recovery
from app.services.use_cases import jobs
from tests.factories import make_job
from tests.helpers.processes import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

LEASE = 2
Row = namedtuple("Row", "status attempts claimed_by lease_expires_at")
ENV = {"LEASE_SECONDS": str(LEASE), "LEASE_BUFFER_SECONDS": "0", "WORKER_POLL_SECONDS": "1"}


def row(execution_id: int) -> tuple:
    """(status, attempts, claimed_by, lease_expires_at) as the worker committed them."""
    db.session.rollback()
    found = db.session.get(Execution, execution_id)
    values = (found.status, found.attempts, found.claimed_by, found.lease_expires_at)
    db.session.rollback()
    return Row(*values)


def long_job():
    return make_job(
        name="ten-seconds-no-timeout",
        now=utcnow(),
        every="1d",
        task="sleep_for_seconds",
        config={"seconds": 10},
        timeout_seconds="none",  # no limit
        max_attempts=2,
        retry_backoff_seconds=1,
    )


def recover_now() -> recovery.RecoveryReport:
    report = recovery.recover_expired_leases(db.engine, now=utcnow())
    db.session.rollback()
    return report


def test_a_live_worker_keeps_a_long_run_without_a_timeout(app, flask_processes):
    job = long_job()
    worker = flask_processes.start_worker("--workers", "1", "--worker-id", "renewing", env=ENV)
    execution_id = jobs.trigger_job(job.id, now=utcnow(), actor="test").id
    wait_for(lambda: row(execution_id).status == "running", within=30, what=lambda: worker.describe())
    first_lease = row(execution_id).lease_expires_at
    leases = {first_lease}

    def finished():
        report = recover_now()
        assert report.total == 0, f"recovery took a healthy run: {report} {row(execution_id)}"
        current = row(execution_id)
        if current.lease_expires_at is not None:
            leases.add(current.lease_expires_at)
        return current.status not in ("running",)

    wait_for(finished, within=40, interval=0.2, what=lambda: f"the run to finish\n{worker.describe()}")
    status, attempts, claimed_by, _ = row(execution_id)
    assert (status, attempts, claimed_by) == ("succeeded", 1, "renewing"), worker.describe()
    # Renewed several times, and well past what the claim gave (10 s task, 2 s lease).
    assert len(leases) >= 5 and max(leases) >= first_lease + timedelta(seconds=7), sorted(leases)
    worker.signal(signal.SIGTERM)
    assert worker.wait_exit(30) == 0


def test_a_killed_worker_loses_the_run_within_its_lease(app, flask_processes):
    job = long_job()
    worker = flask_processes.start_worker("--workers", "1", "--worker-id", "doomed", env=ENV)
    execution_id = jobs.trigger_job(job.id, now=utcnow(), actor="test").id
    wait_for(lambda: row(execution_id).status == "running", within=30, what=lambda: worker.describe())
    wait_for(lambda: row(execution_id).lease_expires_at > utcnow() - timedelta(seconds=60), within=5, what="a lease")
    worker.signal(signal.SIGKILL)
    worker.popen.wait(timeout=10)
    killed_at = utcnow()
    last_lease = row(execution_id).lease_expires_at
    assert last_lease <= killed_at + timedelta(seconds=LEASE + 0.5), (last_lease, killed_at)

    report = wait_for(lambda: recover_now().retried and True, within=LEASE + 10, interval=0.1, what="recovery")
    recovered_at = utcnow()
    status, attempts, claimed_by, _ = row(execution_id)
    assert report and (status, attempts, claimed_by) == ("retry_scheduled", 1, None)
    # Recovered once the lease was past, and no later than a lease after the kill (plus polling).
    assert recovered_at >= last_lease
    assert recovered_at - killed_at <= timedelta(seconds=LEASE + 2), (killed_at, last_lease, recovered_at)


def test_a_run_claimed_again_while_its_first_copy_runs_is_given_back(app):
    """After a failover to an asynchronous replica a worker can be handed, again, a run whose first
    claim the new primary lost while its first task still runs. The worker must not start a second
    copy, nor record the first copy's result on the new attempt: it gives the new claim back (its
    lease expired at once, so recovery retries it) and discards the old copy's result."""
    from app.services.engine.worker import Worker

    job = long_job()
    execution_id = jobs.trigger_job(job.id, now=utcnow(), actor="test").id
    worker = Worker(app, worker_id="w-failover", slots=2)
    worker.start()
    try:
        wait_for(
            lambda: worker.run_once(wait=0.05) or execution_id in worker.executor.running(), within=20, what="start"
        )
        # What the new primary remembers: the claim never happened.
        with db.engine.begin() as conn:
            conn.execute(text("DELETE FROM attempts WHERE execution_id = :id"), {"id": execution_id})
            conn.execute(
                text(
                    "UPDATE executions SET status = 'pending', claimed_by = NULL, lease_expires_at = NULL, "
                    "attempts = 0, started_at = NULL WHERE id = :id"
                ),
                {"id": execution_id},
            )
        worker.run_once(wait=0)  # claims it again while the first copy still runs
        status, attempts, claimed_by, lease = row(execution_id)
        assert (status, attempts, claimed_by) == ("running", 1, "w-failover")
        assert lease < utcnow()  # given back: recovery may take it at once
        assert execution_id in worker.book.disowned and len(worker.executor.running()) == 1  # no second copy
        wait_for(
            lambda: worker.run_once(wait=0.05) is not None and execution_id not in worker.running,
            within=15,
            what="the first copy to be stopped and its result discarded",
        )
        assert worker.stats.discarded == 1 and worker.stats.succeeded == 0
        assert recover_now().retried == 1
        status, attempts, claimed_by, _ = row(execution_id)
        assert (status, attempts, claimed_by) == ("retry_scheduled", 1, None)
    finally:
        worker.shutdown()
