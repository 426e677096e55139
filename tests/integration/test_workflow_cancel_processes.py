"""Cancelling a workflow run while one of its steps runs, with a real `flask worker run` process
and a real `flask workflow cancel` process on PostgreSQL: the worker running the step is woken
(its control channel), kills the step's task process and records the step `cancelled`; the step
queued behind it is cancelled without ever being claimed, the step waiting for both is marked
`cancelled`, and the run ends `cancelled` with a clean ledger.

Each step process leaves a witness line when it completes, so a step killed in the middle of its
work leaves none. Every wait is a bounded poll."""

from __future__ import annotations

import signal
import time

import pytest
from sqlalchemy import text

from app.clock import utcnow
from app.extensions import db
from app.services.read.ledger import verify
from app.services.use_cases import runs
from tests.factories import make_job, make_queue
from tests.helpers import workflow_tasks
from tests.helpers.processes import children_of, cmdline, is_alive, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(120)]

# a, then b (a minute of work) and c (in a queue no worker serves), then d after both.
STEPS = [
    {"name": "a", "task": "wf_witness", "config": {"seconds": 0.3}},
    {"name": "b", "task": "wf_witness", "config": {"seconds": 60}, "after": ["a"], "timeout_seconds": 300},
    {"name": "c", "task": "wf_witness", "after": ["a"], "queue": "unserved"},
    {"name": "d", "task": "wf_witness", "after": ["b", "c"]},
]


def rows(statement: str, **params) -> list:
    db.session.rollback()
    return db.session.execute(text(statement), params).all()


def steps(run_id: int) -> dict:
    found = rows(
        "SELECT step, id, status, attempts, claimed_by, finished_at FROM executions WHERE workflow_run_id = :r",
        r=run_id,
    )
    return {row.step: row for row in found}


def task_processes(worker_pid: int) -> list[int]:
    """The task processes the worker's zygote has forked, alive now."""
    zygotes = [pid for pid in children_of(worker_pid) if "app.executor.zygote" in cmdline(pid)]
    return [pid for zygote in zygotes for pid in children_of(zygote)]


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_cancelling_a_run_kills_its_running_step_and_cancels_the_steps_behind_it(app, flask_processes, tmp_path):
    witness = tmp_path / "witness.log"
    make_queue("unserved", now=utcnow())
    job = make_job(now=utcnow(), task="echo", every="1d", steps=STEPS, max_attempts=3)
    worker = flask_processes.start_worker(
        "--workers",
        "2",
        "--worker-id",
        "w-cancel",
        "--queues",
        "default",
        env={"CRONWELL_TASK_MODULES": "tests.helpers.workflow_tasks", workflow_tasks.WITNESS_ENV: str(witness)},
    )
    run = runs.trigger_run(job.id, {}, now=utcnow(), actor="test")

    def b_runs_in_its_process():
        assert worker.popen.poll() is None, worker.describe()
        current = steps(run.id)
        if "b" not in current or current["b"].status != "running":
            return None
        tasks = task_processes(worker.pid)
        return tasks[0] if len(tasks) == 1 else None

    task_pid = wait_for(b_runs_in_its_process, within=60, what=lambda: f"step b to run\n{worker.describe()}")
    before = steps(run.id)
    assert before["a"].status == "succeeded" and before["b"].claimed_by == "w-cancel"
    assert (before["c"].status, before["c"].claimed_by) == ("pending", None)  # nobody serves its queue
    assert "d" not in before  # waits for b and c: no execution yet

    asked = time.monotonic()
    cancel = flask_processes.start("workflow", "cancel", str(run.id), "--reason", "wrong input")
    assert cancel.wait_exit(within=30) == 0, cancel.describe()
    wait_for(
        lambda: rows("SELECT status FROM executions WHERE id = :id", id=run.id)[0].status == "cancelled",
        within=30,
        what=lambda: f"the run to end cancelled: {steps(run.id)}\n{worker.describe()}",
    )
    stopped_within = time.monotonic() - asked

    after = steps(run.id)
    assert (after["b"].status, after["b"].attempts) == ("cancelled", 1)
    assert (after["c"].status, after["c"].attempts, after["c"].claimed_by) == ("cancelled", 0, None)
    assert "d" not in after  # never created
    [state] = rows("SELECT state, finished_at FROM workflow_runs WHERE id = :r", r=run.id)
    assert state.state["d"] == {"state": "cancelled"} and state.finished_at is not None
    # The worker killed b's task: the process is gone long before its minute of work ended, and it
    # never reached the witness line it writes when done (a's is the only one).
    wait_for(lambda: not is_alive(task_pid), within=10, what=f"b's task process {task_pid} to exit")
    assert stopped_within < 30
    assert [line.split()[1] for line in witness.read_text().splitlines()] == ["a"]
    attempts = rows("SELECT status, worker_id FROM attempts WHERE execution_id = :e", e=after["b"].id)
    assert [(a.status, a.worker_id) for a in attempts] == [("cancelled", "w-cancel")]
    kinds = [
        (row.type, (row.payload or {}).get("status"))
        for row in rows("SELECT type, payload FROM events WHERE execution_id = :r ORDER BY id", r=run.id)
    ]
    assert ("workflow_cancelled", None) in kinds and ("workflow_finished", "cancelled") in kinds
    assert worker.popen.poll() is None, worker.describe()  # the worker goes on
    report = verify(now=utcnow())
    assert report.ok, report.violations
    worker.signal(signal.SIGTERM)
    assert worker.wait_exit(within=40) == 0, worker.describe()
