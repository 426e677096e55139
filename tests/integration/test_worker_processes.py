"""Workers as real processes on SQLite and PostgreSQL: killed with SIGKILL, stopped with SIGTERM;
and the store-level races around them (a stale worker after recovery, disable and re-enable).

A killed worker must take its task processes with it, and the tick must settle what it held
once its lease has run out (time moved with an injected clock, not waited for). A SIGTERMed
worker finishes what it can within its grace period and settles the rest. Every wait is a
bounded poll for a condition.
"""

from __future__ import annotations

import signal
from datetime import timedelta

import pytest
from sqlalchemy import select

from app.clock import utcnow
from app.database import write_transaction
from app.domain.states import AttemptStatus
from app.extensions import db
from app.models import Alert, Attempt, DeadLetter, Event, Execution, Heartbeat, Job
from app.services.engine import recovery
from app.services.engine.scheduler import Scheduler
from app.services.engine.worker import Worker
from app.services.errors import Conflict
from app.services.use_cases import jobs
from app.store import Finished, Outcome, store_for
from tests.factories import make_job
from tests.helpers.processes import children_of, cmdline, is_alive, wait_for

pytestmark = pytest.mark.timeout(120)


def fresh(model, key):
    """Read a row as other processes committed it (end the test's own transaction first)."""
    db.session.rollback()
    return db.session.get(model, key)


def attempts_of(execution_id: int) -> list[Attempt]:
    db.session.rollback()
    return list(
        db.session.scalars(select(Attempt).where(Attempt.execution_id == execution_id).order_by(Attempt.number))
    )


def events_of(execution_id: int, type_: str) -> list[Event]:
    db.session.rollback()
    return list(db.session.scalars(select(Event).where(Event.execution_id == execution_id, Event.type == type_)))


def wait_until_task_runs(worker, execution_id: int) -> tuple[int, int]:
    """Wait until the execution is running and its task process exists; return (zygote, task) pids."""

    def running_task():
        row = fresh(Execution, execution_id)
        if row.status != "running":
            return None
        zygotes = [pid for pid in children_of(worker.pid) if "app.executor.zygote" in cmdline(pid)]
        tasks = [pid for zygote in zygotes for pid in children_of(zygote)]
        return (zygotes[0], tasks[0]) if zygotes and tasks else None

    return wait_for(running_task, within=30, what=lambda: f"execution {execution_id} to run\n{worker.describe()}")


def outcome(status: str, output: str = "") -> Outcome:
    return Outcome(status=AttemptStatus(status), exit_code=0 if status == "succeeded" else 1, output=output, error="")


def start(conn, *, worker_id: str, now, limit: int = 1, lease_seconds: int = 60):
    """A worker turn with nothing to record: what it started, as [(row, attempt number)]."""
    return (
        store_for(conn)
        .record_and_claim(
            conn,
            [],
            worker_id=worker_id,
            now=now,
            limit=limit,
            queue_ids=None,
            lease_seconds=lease_seconds,
            buffer_seconds=0,
        )
        .started
    )


def record(conn, execution_id: int, number: int, result: Outcome, *, worker_id: str, now, retry_at=None) -> bool:
    """Record one finished attempt; False when the worker no longer owned the row."""
    finished = [Finished(execution_id, number, result, retry_at)]
    return store_for(conn).record_finished(conn, finished, worker_id=worker_id, now=now) == {execution_id}


# --- 4. kill -9 ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("max_attempts, settled", [(2, "retry_scheduled"), (1, "dead_lettered")])
def test_a_worker_killed_mid_task_leaves_no_orphans_and_its_lease_is_recovered(
    app, flask_processes, max_attempts, settled
):
    job = make_job(
        now=utcnow(),
        every="1d",
        name="victim",
        task="sleep_for_seconds",
        config={"seconds": 30},
        timeout_seconds=60,
        max_attempts=max_attempts,
        retry_backoff_seconds=10,
        alert_mode="web",
    )
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    worker = flask_processes.start_worker("--workers", "1", "--worker-id", "doomed")
    zygote, task = wait_until_task_runs(worker, execution.id)

    worker.signal(signal.SIGKILL)
    assert worker.wait_exit(within=10) == -signal.SIGKILL
    wait_for(
        lambda: not is_alive(task) and not is_alive(zygote),
        within=10,
        what=f"the task ({task}) and zygote ({zygote}) to die with their worker",
    )

    row = fresh(Execution, execution.id)
    assert (row.status, row.claimed_by, row.attempts) == ("running", "doomed", 1)
    lease = row.lease_expires_at
    assert lease >= row.started_at + timedelta(seconds=60)  # the lease covers the hard timeout

    # Before the lease runs out the worker might still be alive: nothing is touched.
    assert Scheduler(app, scheduler_id="early", clock=lambda: lease - timedelta(seconds=1)).tick().recovered == 0
    assert fresh(Execution, execution.id).status == "running"

    recovered_at = lease + timedelta(seconds=1)
    assert Scheduler(app, scheduler_id="late", clock=lambda: recovered_at).tick().recovered == 1

    row = fresh(Execution, execution.id)
    assert row.status == settled and row.claimed_by is None and row.lease_expires_at is None
    [attempt] = attempts_of(execution.id)
    assert (attempt.status, attempt.worker_id, attempt.finished_at) == ("abandoned", "doomed", recovered_at)
    assert "doomed" in attempt.error
    [event] = events_of(execution.id, "lease_recovered")
    assert event.payload["to_status"] == settled and event.payload["worker_id"] == "doomed"
    dead_letters = db.session.scalars(select(DeadLetter).where(DeadLetter.execution_id == execution.id)).all()
    alerts = db.session.scalars(select(Alert).where(Alert.execution_id == execution.id)).all()

    if settled == "retry_scheduled":
        assert row.available_at == recovered_at + timedelta(seconds=10)  # backoff * 2 ** (1 - 1)
        assert row.finished_at is None and dead_letters == [] and alerts == []
        # The retry really runs: shorten the task and drain with a clock past the backoff.
        jobs.update_job(job.id, {"config": {"seconds": 0.1}}, now=recovered_at, actor="test")
        Worker(app, worker_id="rescuer", slots=1, clock=lambda: row.available_at + timedelta(seconds=1)).run(burst=True)
        row = fresh(Execution, execution.id)
        assert (row.status, row.attempts) == ("succeeded", 2)
        assert [(a.status, a.worker_id) for a in attempts_of(execution.id)] == [
            ("abandoned", "doomed"),
            ("succeeded", "rescuer"),
        ]
    else:
        assert row.finished_at == recovered_at
        [dead] = dead_letters
        assert "doomed" in dead.reason
        [alert] = alerts
        assert alert.kind == "dead_letter" and alert.resolved_at is None


# --- 5. a stale worker ------------------------------------------------------------------------


def test_a_stale_worker_finishing_after_recovery_cannot_overwrite_the_new_owner(app):
    job = make_job(now=utcnow(), every="1d", name="contested", max_attempts=3, retry_backoff_seconds=5)
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    claimed_at = utcnow()
    db.session.rollback()
    with write_transaction(db.engine) as conn:
        [(claim_a, number)] = start(conn, worker_id="worker-a", now=claimed_at)
        assert (claim_a.id, number) == (execution.id, 1)

    # Worker A goes quiet; its lease runs out and recovery hands the row back.
    recovered_at = claim_a.lease_expires_at + timedelta(seconds=1)
    assert recovery.recover_expired_leases(db.engine, now=recovered_at).retried == 1
    retry_at = fresh(Execution, execution.id).available_at
    assert retry_at == recovered_at + timedelta(seconds=5)

    # Worker B claims the retry and starts attempt 2.
    db.session.rollback()
    with write_transaction(db.engine) as conn:
        [(claim_b, number)] = start(conn, worker_id="worker-b", now=retry_at)
        assert (claim_b.id, number) == (execution.id, 2)

    # A wakes up and reports its (late) result: every move it tries is refused.
    late = retry_at + timedelta(seconds=1)
    with write_transaction(db.engine) as conn:
        assert not record(conn, execution.id, 1, outcome("succeeded", "A"), worker_id="worker-a", now=late)
        assert not record(conn, execution.id, 1, outcome("failed", "A"), worker_id="worker-a", now=late, retry_at=late)
        assert start(conn, worker_id="worker-a", now=late) == []
        turn = store_for(conn).record_and_claim(
            conn,
            [Finished(execution.id, 1, outcome("succeeded", "A"), None)],
            worker_id="worker-a",
            now=late,
            limit=0,
            queue_ids=None,
            lease_seconds=60,
            buffer_seconds=0,
        )
        assert turn.recorded == set()  # the worker's own turn statement refuses it too
    row = fresh(Execution, execution.id)
    assert (row.status, row.claimed_by, row.attempts, row.output) == ("running", "worker-b", 2, "")
    assert row.lease_expires_at == claim_b.lease_expires_at
    assert [(a.status, a.worker_id) for a in attempts_of(execution.id)] == [
        ("abandoned", "worker-a"),
        ("running", "worker-b"),
    ]

    # B finishes normally, and A still cannot touch the finished row.
    done = retry_at + timedelta(seconds=2)
    with write_transaction(db.engine) as conn:
        assert record(conn, execution.id, 2, outcome("succeeded", "B"), worker_id="worker-b", now=done)
        assert not record(conn, execution.id, 1, outcome("failed", "A"), worker_id="worker-a", now=done)
    row = fresh(Execution, execution.id)
    assert (row.status, row.claimed_by, row.output, row.finished_at) == ("succeeded", "worker-b", "B", done)


# --- 6. graceful stop -------------------------------------------------------------------------


@pytest.mark.slow
def test_sigterm_lets_the_running_task_finish_and_exits_cleanly(app, flask_processes):
    job = make_job(now=utcnow(), every="1d", name="finish-me", task="sleep_for_seconds", config={"seconds": 1})
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    worker = flask_processes.start_worker("--workers", "1", "--worker-id", "polite")
    wait_until_task_runs(worker, execution.id)

    worker.signal(signal.SIGTERM)
    assert worker.wait_exit(within=20) == 0, worker.describe()
    row = fresh(Execution, execution.id)
    assert row.status == "succeeded", worker.describe()
    assert row.finished_at - row.started_at >= timedelta(seconds=1)  # it ran to the end, not killed
    assert [a.status for a in attempts_of(execution.id)] == ["succeeded"]
    assert fresh(Heartbeat, "polite").info["state"] == "stopped"  # listed as stopped until pruned
    assert "stopped" in worker.output()


@pytest.mark.slow
def test_sigterm_with_no_grace_settles_the_running_execution_instead_of_leaving_it(app, flask_processes):
    job = make_job(
        now=utcnow(),
        every="1d",
        name="cut-short",
        task="sleep_for_seconds",
        config={"seconds": 30},
        timeout_seconds=60,
        max_attempts=2,
        retry_backoff_seconds=10,
    )
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    worker = flask_processes.start_worker(
        "--workers", "1", "--worker-id", "hasty", env={"WORKER_SHUTDOWN_GRACE_SECONDS": "0"}
    )
    zygote, task = wait_until_task_runs(worker, execution.id)

    worker.signal(signal.SIGTERM)
    # Far sooner than the 30 s task: the grace period is 0.
    assert worker.wait_exit(within=15) == 0, worker.describe()
    wait_for(lambda: not is_alive(task) and not is_alive(zygote), within=10, what="the task and zygote to be gone")
    row = fresh(Execution, execution.id)
    assert (row.status, row.claimed_by, row.finished_at) == ("retry_scheduled", None, None)
    [attempt] = attempts_of(execution.id)
    assert attempt.status == "abandoned" and "hasty" in attempt.error
    assert events_of(execution.id, "lease_recovered")
    assert fresh(Heartbeat, "hasty").info["state"] == "stopped"


# --- 8. disable and enable --------------------------------------------------------------------


def test_disable_cancels_queued_rows_but_not_running_ones_and_keeps_next_run_at(app):
    t0 = utcnow().replace(microsecond=0)
    job = make_job(now=t0, every="1h", name="pausable", overlap_policy="allow", max_attempts=3)
    next_run_at = job.next_run_at
    ids = [jobs.trigger_job(job.id, now=t0 + timedelta(seconds=n), actor="test").id for n in range(4)]
    running, claimed, retrying, pending = ids
    at = t0 + timedelta(seconds=10)
    db.session.rollback()
    with write_transaction(db.engine) as conn:
        # A legacy `claimed` row (an older release's worker died between its claim and start).
        conn.execute(
            db.text(
                "UPDATE executions SET status = 'claimed', claimed_by = 'w', lease_expires_at = :at WHERE id = :id"
            ),
            {"at": at + timedelta(minutes=1), "id": claimed},
        )
        got = start(conn, worker_id="w", now=at, limit=2)
        assert [(c.id, number) for c, number in got] == [(running, 1), (retrying, 1)]
        assert record(conn, retrying, 1, outcome("failed"), worker_id="w", now=at, retry_at=at + timedelta(hours=1))

    disabled_at = t0 + timedelta(seconds=20)
    job, cancelled = jobs.disable_job(job.id, now=disabled_at, actor="test")
    assert cancelled == 3
    statuses = {i: fresh(Execution, i).status for i in ids}
    assert statuses == {running: "running", claimed: "cancelled", retrying: "cancelled", pending: "cancelled"}
    for execution_id in (claimed, retrying, pending):
        row = fresh(Execution, execution_id)
        assert (row.finished_at, row.reason, row.claimed_by) == (disabled_at, "job disabled", None)
    job = fresh(Job, job.id)
    assert (job.enabled, job.next_run_at) == (False, next_run_at)

    # The running one finishes on its worker as usual.
    with write_transaction(db.engine) as conn:
        assert record(conn, running, 1, outcome("succeeded"), worker_id="w", now=disabled_at)
    with pytest.raises(Conflict):
        jobs.trigger_job(job.id, now=disabled_at, actor="test")
    db.session.rollback()

    # Enabled again before its next run: the schedule resumes where it was.
    jobs.enable_job(job.id, now=t0 + timedelta(minutes=10), actor="test")
    assert fresh(Job, job.id).next_run_at == next_run_at


def test_enabling_a_job_whose_next_run_is_in_the_past_re_anchors_from_now(app):
    t0 = utcnow().replace(microsecond=0)
    job = make_job(now=t0, every="1h", name="dormant", misfire_policy="catch_up")
    jobs.disable_job(job.id, now=t0, actor="test")
    later = t0 + timedelta(hours=5, minutes=30)  # five occurrences fell due while it was disabled
    job = jobs.enable_job(job.id, now=later, actor="test")
    assert fresh(Job, job.id).next_run_at == t0 + timedelta(hours=6)  # the next one after now, on the grid
    report = Scheduler(app, scheduler_id="after-enable", clock=lambda: later).tick()
    assert (report.created, report.missed, report.coalesced) == (0, 0, 0)  # no burst
    db.session.rollback()
    assert db.session.scalars(select(Execution).where(Execution.job_id == job.id)).all() == []


def test_a_fired_one_time_job_cannot_be_re_enabled(app):
    t0 = utcnow().replace(microsecond=0)
    run_at = t0 + timedelta(minutes=1)
    job = make_job(
        now=t0, name="once", schedule_type="one_time", schedule={"run_at": run_at.strftime("%Y-%m-%dT%H:%M:%SZ")}
    )
    assert Scheduler(app, scheduler_id="once", clock=lambda: run_at).tick().created == 1
    assert fresh(Job, job.id).next_run_at is None
    jobs.disable_job(job.id, now=run_at, actor="test")
    with pytest.raises(Conflict, match="already fired"):
        jobs.enable_job(job.id, now=run_at + timedelta(minutes=1), actor="test")
    db.session.rollback()
    assert fresh(Job, job.id).enabled is False
