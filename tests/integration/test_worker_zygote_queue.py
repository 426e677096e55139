"""The worker and the zygote's queue on SQLite and PostgreSQL, driven turn by turn: runs handed
to the zygote beyond the free slots (ADR 0010, amendment on the zygote's queue) are settled, when they are
withdrawn before their fork, exactly as runs that never left the claim-ahead buffer: a cancel
records them `cancelled` without a process, a stop abandons them "before the task started".
"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.clock import utcnow
from app.extensions import db
from app.models import Attempt, Execution
from app.services.engine.worker import Worker
from app.services.use_cases import executions, jobs
from tests.factories import make_job
from tests.helpers.processes import wait_for

pytestmark = pytest.mark.timeout(120)


def trigger(name: str, task: str, config: dict) -> int:
    job = make_job(now=utcnow(), every="1d", name=name, task=task, config=config, max_attempts=3)
    return jobs.trigger_job(job.id, now=utcnow(), actor="test").id


def attempts_of(execution_id: int) -> list[Attempt]:
    db.session.rollback()
    return list(db.session.scalars(select(Attempt).where(Attempt.execution_id == execution_id)))


def status_of(execution_id: int) -> str:
    db.session.rollback()
    return db.session.get(Execution, execution_id).status


def waiting_in_ready(worker: Worker) -> set[int]:
    return {ready.item.id for ready in worker.book.ready}


def test_runs_queued_in_the_zygote_are_cancelled_and_stopped_without_a_process(app):
    app.config["WORKER_SHUTDOWN_GRACE_SECONDS"] = 0  # the sleeper would hold the grace period
    sleeper = trigger("sleeper", "sleep_for_seconds", {"seconds": 60})
    cancelled, stopped, last = (trigger(f"short-{i}", "always_succeed", {}) for i in range(3))
    worker = Worker(app, worker_id="queuer", slots=1)
    worker.book.task_seconds = 0.01  # tasks known to be short: the turn claims ahead
    worker.start()
    try:
        # One turn claims all four: the sleeper is forked into the only slot, the next is handed
        # to the zygote's queue (one per slot), the rest wait in `ready`.
        wait_for(
            lambda: worker.run_once(wait=0.0) is not None and worker.executor.pid_of(sleeper),
            within=30,
            what="the sleeper's fork",
        )
        assert set(worker.running) == {sleeper, cancelled, stopped, last}
        assert waiting_in_ready(worker) == {stopped, last}
        assert cancelled in worker.executor.running() and worker.executor.pid_of(cancelled) is None

        executions.cancel_execution(cancelled, now=utcnow(), actor="test")
        wait_for(
            lambda: worker.run_once(wait=0.0) is not None and status_of(cancelled) == "cancelled",
            within=30,
            what="the queued run to be cancelled",
        )
        [attempt] = attempts_of(cancelled)
        assert attempt.status == "cancelled" and not attempt.pid  # 0, as for a run cancelled in `ready`
        assert attempt.error == "cancelled before its task process started"
        # The freed queue place went to the next run: now it waits in the zygote.
        assert waiting_in_ready(worker) == {last}
        assert stopped in worker.executor.running() and worker.executor.pid_of(stopped) is None
        assert worker.executor.pid_of(sleeper)  # still running: the slot never freed

        worker.request_stop()
        worker.shutdown()
    finally:
        if worker.executor.zygote_pid is not None:
            worker.executor.stop(0)

    for execution_id, how in ((stopped, "before the task started"), (last, "before the task started")):
        [attempt] = attempts_of(execution_id)
        assert attempt.status == "abandoned" and not attempt.pid, execution_id
        assert how in attempt.error, (execution_id, attempt.error)
    [attempt] = attempts_of(sleeper)
    assert attempt.status == "abandoned" and "before the task finished" in attempt.error
