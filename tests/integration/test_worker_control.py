"""Operators reaching running workers, with real processes on SQLite and PostgreSQL: `flask
worker stop` (drain, and --now) and `flask execution cancel` of a running execution.

Orders travel through the database (a WorkerCommand row, a cancel request on the execution) and
a NOTIFY on PostgreSQL; on SQLite the worker's once-a-second check finds them. Every wait is a
bounded poll for a condition; the pids come from the process table and the attempt rows.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

import pytest
from sqlalchemy import select

from app.clock import utcnow
from app.extensions import db
from app.models import Attempt, Event, Execution, Heartbeat, WorkerCommand
from app.services.engine import recovery
from app.services.use_cases import executions, jobs
from tests.factories import make_execution, make_job
from tests.helpers.processes import children_of, cmdline, is_alive, wait_for

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def fresh(model, key):
    db.session.rollback()
    return db.session.get(model, key)


def attempts_of(execution_id: int) -> list[Attempt]:
    db.session.rollback()
    query = select(Attempt).where(Attempt.execution_id == execution_id).order_by(Attempt.number)
    return list(db.session.scalars(query))


def events(type_: str) -> list[Event]:
    db.session.rollback()
    return list(db.session.scalars(select(Event).where(Event.type == type_).order_by(Event.id)))


def sleeper(name: str, seconds: float, **fields) -> Execution:
    job = make_job(now=utcnow(), every="1d", name=name, task="sleep_for_seconds", config={"seconds": seconds}, **fields)
    return jobs.trigger_job(job.id, now=utcnow(), actor="test")


def task_pid(worker, execution_id: int) -> int:
    """Wait until the execution runs in a task process under the worker's zygote; its pid."""

    def running_task():
        row = fresh(Execution, execution_id)
        if row.status != "running":
            return None
        zygotes = [pid for pid in children_of(worker.pid) if "app.executor.zygote" in cmdline(pid)]
        tasks = [pid for zygote in zygotes for pid in children_of(zygote)]
        return tasks[0] if tasks else None

    return wait_for(running_task, within=30, what=lambda: f"execution {execution_id} to run\n{worker.describe()}")


def run_cli(flask_processes, *args: str) -> str:
    command = flask_processes.start(*args)
    assert command.wait_exit(within=30) == 0, command.describe()
    return command.output()


def state_of(worker_id: str) -> str | None:
    beat = fresh(Heartbeat, worker_id)
    return (beat.info or {}).get("state") if beat is not None else None


def test_drain_lets_the_running_task_finish_and_exits_zero(app, flask_processes):
    # Outlasts the stop command (a CLI process, several seconds on a loaded 2-core machine) and the
    # worker's once-a-second check, so the worker is seen draining before its task ends.
    execution = sleeper("drain-me", 15)
    worker = flask_processes.start_worker("--workers", "1", "--worker-id", "drainee")
    task_pid(worker, execution.id)
    later = sleeper("never-claimed", 0.1)  # waits for the one slot; a draining worker claims nothing more

    out = run_cli(flask_processes, "worker", "stop", "drainee")
    assert "Worker drainee told to drain" in out
    wait_for(lambda: state_of("drainee") == "draining", within=12, what=lambda: "state draining\n" + worker.describe())
    assert worker.wait_exit(within=30) == 0, worker.describe()

    row = fresh(Execution, execution.id)
    assert row.status == "succeeded", worker.describe()  # ran to the end, not killed
    assert [a.status for a in attempts_of(execution.id)] == ["succeeded"]
    assert fresh(Execution, later.id).status == "pending"
    assert state_of("drainee") == "stopped"
    [command] = db.session.scalars(select(WorkerCommand))
    assert (command.command, command.issued_by, command.acted_at is not None) == ("drain", "cli", True)
    assert "stopped" in worker.output()
    # Listed as stopped; a stopped worker takes no more orders.
    listed = run_cli(flask_processes, "worker", "list")
    assert any(line.startswith("drainee") and " stopped " in line for line in listed.splitlines()), listed


def test_stop_now_kills_the_running_task_and_its_execution_is_retried(app, flask_processes):
    execution = sleeper("cut-short", 30, timeout_seconds=60, max_attempts=2, retry_backoff_seconds=10)
    worker = flask_processes.start_worker("--workers", "1", "--worker-id", "stoppee")
    task = task_pid(worker, execution.id)

    run_cli(flask_processes, "worker", "stop", "stoppee", "--now")
    assert worker.wait_exit(within=15) == 0, worker.describe()  # far sooner than the 30 s task
    wait_for(lambda: not is_alive(task), within=5, what="the task process to be gone")
    row = fresh(Execution, execution.id)
    assert (row.status, row.claimed_by, row.finished_at) == ("retry_scheduled", None, None)
    [attempt] = attempts_of(execution.id)
    assert attempt.status == "abandoned" and "stopped by an operator" in attempt.error
    assert state_of("stoppee") == "stopped"


def test_cancel_kills_the_running_task_within_two_seconds_and_records_cancelled(app, flask_processes):
    execution = sleeper("cancel-me", 60, timeout_seconds=120, max_attempts=3)
    worker = flask_processes.start_worker("--workers", "1", "--worker-id", "canceller")
    task = task_pid(worker, execution.id)

    out = run_cli(flask_processes, "execution", "cancel", str(execution.id), "--reason", "wrong input")
    assert f"Execution {execution.id} is running on canceller; asked it to cancel the task" in out
    asked = time.monotonic()
    wait_for(lambda: not is_alive(task), within=2, what=lambda: "the task process to be gone\n" + worker.describe())
    assert time.monotonic() - asked <= 2.0

    wait_for(lambda: fresh(Execution, execution.id).status == "cancelled", within=10, what=worker.describe)
    row = fresh(Execution, execution.id)
    assert (row.reason, row.cancel_requested_by, row.attempts) == ("cancelled by cli: wrong input", "cli", 1)
    assert row.finished_at is not None and row.available_at <= row.finished_at  # no retry was scheduled
    [attempt] = attempts_of(execution.id)
    assert attempt.status == "cancelled" and attempt.pid == task and "cancelled" in attempt.error
    with pytest.raises(ProcessLookupError):
        os.kill(attempt.pid, 0)
    [event] = [e for e in events("execution_cancelled") if e.execution_id == execution.id]
    assert event.actor == "cli" and event.payload["worker_id"] == "canceller"

    # The worker goes on serving: the slot is free for the next run.
    follow_up = sleeper("after-cancel", 0.1)
    wait_for(lambda: fresh(Execution, follow_up.id).status == "succeeded", within=20, what=worker.describe)
    assert worker.popen.poll() is None


def test_recovery_cancels_a_cancel_requested_execution_whose_worker_is_gone(app):
    now = utcnow()
    job = make_job(now=now, every="1d", name="orphan", max_attempts=3)
    row = make_execution(job, "running", now=now, claimed_by="gone-worker", lease_expires_at=now + timedelta(minutes=1))
    executions.cancel_execution(row.id, now=now, actor="alice", reason="stuck")
    # The worker never acts on it; once its lease runs out recovery settles it, without a retry.
    report = recovery.recover_expired_leases(db.engine, now=now + timedelta(minutes=2))
    assert (report.cancelled, report.retried, report.dead_lettered) == (1, 0, 0)
    settled = fresh(Execution, row.id)
    assert (settled.status, settled.reason, settled.claimed_by) == ("cancelled", "cancelled by alice: stuck", None)
    [attempt] = attempts_of(row.id)
    assert attempt.status == "cancelled" and "cancelled by alice" in attempt.error
    [event] = events("execution_cancelled")
    assert (event.actor, event.execution_id, event.payload["worker_id"]) == ("alice", row.id, "gone-worker")
