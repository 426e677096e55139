"""kill -9 the scheduler between two steps of a workflow run, while it holds the hand-off: the
upstream step has succeeded, the downstream one is not created yet, and the scheduler's
transaction that starts the run (and so creates that step) is open. A fresh scheduler must then
run the downstream step exactly once and finish the run.

Most hand-offs between steps never wait for the scheduler: the transaction that records a step's
end creates the steps after it (app/services/engine/workflows.py). The scheduler holds the hand-off
when it starts a run that resumes after steps already done: a retry of a failed run takes over
the steps that succeeded, and when its job's previous run is still in flight (overlap policy
queue) the retry waits; the scheduler starts it once that run ends, creating the first step that
did not succeed. That is the moment killed here: a test transaction holds a SHARE lock on
workflow_runs, so the scheduler's start moves the run's execution to running and then waits,
inside PostgreSQL, to write the run's row; it is SIGKILLed there.

Real processes: `flask worker run` x 2 (their task processes leave a witness line when a step
completes) and `flask scheduler run`, on the fault package's private PostgreSQL cluster.
"""

from __future__ import annotations

import signal
from collections import Counter

import pytest
from sqlalchemy import text

from app.extensions import db
from app.services.read import ledger
from app.services.use_cases import queues, runs
from app.services.use_cases import workflows as workflow_use_cases
from tests.factories import make_job
from tests.helpers import workflow_tasks
from tests.helpers.processes import wait_for
from tests.helpers.scenario import rows, scalar, stop_gracefully, utcnow, write_transactions_open

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(180)]


def status(execution_id: int) -> str:
    return scalar("SELECT status FROM executions WHERE id = :id", id=execution_id)


def steps(run_id: int) -> dict:
    found = rows(
        "SELECT step, id, status, attempts, idempotency_key FROM executions WHERE workflow_run_id = :r", r=run_id
    )
    return {row.step: row for row in found}


def witnessed(witness) -> list[tuple[int, str]]:
    """(execution, step) of every step process that completed."""
    lines = witness.read_text().splitlines() if witness.exists() else []
    return [(int(line.split()[2]), line.split()[1]) for line in lines]


def start_waiting_for_the_lock(url: str) -> int | None:
    """The scheduler's backend writing the run's row and waiting for the test's lock: its pid."""
    return scalar(
        "SELECT max(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        " AND backend_xid IS NOT NULL AND query LIKE 'INSERT INTO workflow_runs%'"
    )


def test_a_scheduler_killed_while_it_hands_off_between_two_steps_runs_the_next_step_once(
    fault_app, fault_db, processes, tmp_path
):
    witness = tmp_path / "witness.log"
    may_report = tmp_path / "report-may-succeed"
    job = make_job(
        now=utcnow(),
        task="echo",
        every="1d",
        overlap_policy="queue",
        max_attempts=1,
        steps=[
            {"name": "export", "task": "wf_witness"},
            {"name": "report", "task": "wf_witness", "config": {"require": str(may_report)}, "after": ["export"]},
            {"name": "mail", "task": "wf_witness", "after": ["report"]},
        ],
    )
    env = {"CRONWELL_TASK_MODULES": "tests.helpers.workflow_tasks", workflow_tasks.WITNESS_ENV: str(witness)}
    workers = [processes.start_worker("--workers", "2", "--worker-id", f"w{n}", env=env) for n in (1, 2)]

    # Run 1: export succeeds, report fails (its file is missing), mail will not run.
    first = runs.trigger_run(job.id, {}, now=utcnow(), actor="test").id
    wait_for(lambda: status(first) == "failed", within=60, what=lambda: f"run 1 to fail\n{processes.outputs()}")
    export = steps(first)["export"]
    # Run 2 is in flight (its export waits in the paused queue), so the retry of run 1 waits.
    queues.pause_queue("default", now=utcnow(), actor="test")
    second = runs.trigger_run(job.id, {}, now=utcnow(), actor="test").id
    assert status(second) == "running"
    may_report.touch()
    retry = workflow_use_cases.retry_run(first, now=utcnow(), actor="test").id
    db.session.remove()
    assert status(retry) == "pending" and steps(retry) == {}
    workflow_use_cases.cancel_run(second, now=utcnow(), actor="test")
    queues.resume_queue("default", now=utcnow(), actor="test")
    db.session.remove()
    # Between two steps: export succeeded (taken over), report not created; only a scheduler
    # starts the waiting retry now.
    [state] = rows("SELECT state FROM workflow_runs WHERE id = :r", r=retry)
    assert state.state == {"export": {"execution_id": export.id}}

    locker = db.engine.connect()
    try:
        locker.execute(text("LOCK TABLE workflow_runs IN SHARE MODE"))
        doomed = processes.start("scheduler", "run", "--tick-seconds", "1", "--scheduler-id", "doomed")
        wait_for(
            lambda: start_waiting_for_the_lock(fault_db) or doomed.popen.poll() is not None,
            within=60,
            what=lambda: f"the scheduler to start the retry\n{doomed.describe()}",
            interval=0.02,
        )
        assert doomed.popen.poll() is None, doomed.describe()
        assert status(retry) == "pending"  # its start is not committed
        doomed.signal(signal.SIGKILL)
        assert doomed.wait_exit(within=10) == -signal.SIGKILL
    finally:
        locker.rollback()
        locker.close()
    # Once the lock is gone the orphaned backend writes the row, finds its client gone and rolls
    # the whole start back.
    wait_for(lambda: write_transactions_open(fault_db) == 0, within=20, what="the killed start to roll back")
    assert status(retry) == "pending" and steps(retry) == {}
    [state] = rows("SELECT state FROM workflow_runs WHERE id = :r", r=retry)
    assert state.state == {"export": {"execution_id": export.id}}
    print(f"\n[workflow scheduler killed between steps] killed while starting run {retry}: nothing committed")

    survivor = processes.start("scheduler", "run", "--tick-seconds", "1", "--scheduler-id", "survivor")
    wait_for(
        lambda: status(retry) not in ("pending", "running"),
        within=60,
        what=lambda: f"the retry to finish: {steps(retry)}\n{survivor.describe()}",
    )
    assert status(retry) == "succeeded"
    resumed = steps(retry)
    assert set(resumed) == {"report", "mail"}  # export was taken over, not run again
    for name, row in resumed.items():
        assert (row.status, row.attempts, row.idempotency_key) == ("succeeded", 1, f"workflow:{retry}:{name}")
    seen = witnessed(witness)
    assert Counter(step for _, step in seen) == {"export": 1, "report": 1, "mail": 1}
    assert sorted(seen) == sorted(
        [(export.id, "export"), (resumed["report"].id, "report"), (resumed["mail"].id, "mail")]
    )
    assert scalar("SELECT count(*) FROM events WHERE type = 'workflow_started' AND execution_id = :r", r=retry) == 1
    stop_gracefully(survivor, *workers)
    db.session.remove()
    report = ledger.verify(now=utcnow())
    db.session.remove()
    print(
        f"[workflow scheduler killed between steps] ledger: executions={report.executions} "
        f"in_flight={report.in_flight} violations={len(report.violations)}"
    )
    assert report.ok, report.violations
