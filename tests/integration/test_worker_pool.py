"""Jobs with isolation = pool through the real worker and fork server, on SQLite and PostgreSQL:
every attempt is an Attempt row as in process mode, pool processes are reused and replaced, a
timeout or a crash ends only its own attempt, and process-mode jobs still fork per attempt."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select

import tests.helpers.executor_tasks  # noqa: F401 - registers the test tasks here (job validation) and in the zygote
import tests.helpers.pool_tasks  # noqa: F401
from app.clock import utcnow
from app.executor import ForkServer
from app.executor.pool_limits import PoolLimits
from app.extensions import db
from app.models import Attempt, Execution
from app.services.engine.worker import Worker
from app.services.use_cases import jobs
from tests.factories import make_job
from tests.helpers.processes import children_of, cmdline, is_alive, wait_for

pytestmark = pytest.mark.timeout(120)

PRELOAD = ("app.tasks.catalog", "tests.helpers.executor_tasks", "tests.helpers.pool_tasks")


def drain(app, *, slots: int = 1, max_tasks: int = 3, max_memory_mb: int = 0):
    limits = PoolLimits(max_tasks=max_tasks, max_memory_mb=max_memory_mb)
    executor = ForkServer(preload=PRELOAD, kill_grace_seconds=0.5, pool=limits)
    return Worker(app, worker_id="pool-test", slots=slots, executor=executor).run(burst=True)


def trigger(job, times: int = 1) -> list[int]:
    return [jobs.trigger_job(job.id, now=utcnow(), actor="test").id for _ in range(times)]


def attempts(execution_ids: list[int]) -> list[Attempt]:
    db.session.rollback()
    query = select(Attempt).where(Attempt.execution_id.in_(execution_ids)).order_by(Attempt.id)
    return list(db.session.scalars(query))


def execution(execution_id: int) -> Execution:
    db.session.rollback()
    return db.session.get(Execution, execution_id)


def test_pool_jobs_reuse_a_process_and_record_every_attempt(app):
    job = make_job(now=utcnow(), task="test_pool_count", isolation="pool", overlap_policy="allow")
    ids = trigger(job, 5)

    stats = drain(app, max_tasks=3)

    assert job.isolation == "pool" and stats.succeeded == 5
    rows = attempts(ids)
    assert sorted(a.execution_id for a in rows) == sorted(ids)  # one Attempt per execution
    assert all(a.status == "succeeded" and a.exit_code == 0 and a.worker_id == "pool-test" for a in rows)
    assert sorted(Counter(a.pid for a in rows).values()) == [2, 3]  # reused, replaced after 3
    for execution_id in ids:
        row = execution(execution_id)
        assert row.status == "succeeded" and f"of execution {execution_id}" in row.output


def test_a_timed_out_pool_attempt_is_recorded_timed_out_and_the_next_runs_in_a_new_process(app):
    slow = make_job(
        now=utcnow(),
        task="test_exec_sleep",
        config={"seconds": 60},
        timeout_seconds=1,
        max_attempts=1,
        isolation="pool",
    )
    quick = make_job(now=utcnow(), task="test_pool_count", isolation="pool")
    [slow_id] = trigger(slow)
    drain(app)
    [quick_id] = trigger(quick)
    drain(app)

    [timed_out] = attempts([slow_id])
    [after] = attempts([quick_id])
    assert execution(slow_id).status == "timed_out" and timed_out.status == "timed_out"
    assert "task timed out after 1 s" in timed_out.error
    assert after.status == "succeeded" and after.pid != timed_out.pid


def test_a_crash_in_a_pool_process_fails_only_that_attempt(app):
    crash = make_job(now=utcnow(), task="test_exec_exit3", isolation="pool", max_attempts=2, retry_backoff_seconds=0)
    fine = make_job(now=utcnow(), task="test_pool_count", isolation="pool", overlap_policy="allow")
    crash_ids = trigger(crash)
    fine_ids = trigger(fine, 3)

    drain(app, slots=2, max_tasks=1000)

    crashed = attempts(crash_ids)
    assert [a.status for a in crashed] == ["failed", "failed"]  # both tries, each its own Attempt
    assert all(a.exit_code == 3 and "exited with code 3" in a.error for a in crashed)
    assert execution(crash_ids[0]).status == "failed"
    assert all(a.status == "succeeded" for a in attempts(fine_ids))  # the processes beside it were not touched


def test_the_worker_takes_its_pool_limits_from_the_settings(app):
    app.config.update(WORKER_POOL_MAX_TASKS_PER_CHILD=7, WORKER_POOL_MAX_MEMORY_MB=99)
    worker = Worker(app, worker_id="limits")
    assert worker.executor.pool == PoolLimits(max_tasks=7, max_memory_mb=99)


def test_a_pool_process_over_the_memory_cap_is_replaced_between_recorded_attempts(app):
    zygote = ForkServer(preload=PRELOAD)
    zygote.start()
    try:
        zygote_mb = (
            int(Path(f"/proc/{zygote.zygote_pid}/statm").read_text().split()[1])
            * os.sysconf("SC_PAGE_SIZE")
            // (1 << 20)
        )
    finally:
        zygote.stop()
    grow = make_job(now=utcnow(), task="test_pool_grow", config={"megabytes": 64}, isolation="pool")
    count = make_job(now=utcnow(), task="test_pool_count", isolation="pool", overlap_policy="allow")
    [grown] = trigger(grow)
    [after] = trigger(count)
    drain(app, max_tasks=1000, max_memory_mb=zygote_mb + 32)  # one slot: grown runs first, then after

    assert execution(grown).status == "succeeded"  # the attempt over the cap still succeeds
    [grown_attempt] = attempts([grown])
    [after_attempt] = attempts([after])
    assert after_attempt.pid != grown_attempt.pid  # its process was replaced after it (no cap: the same pid)
    assert grown_attempt.started_at <= after_attempt.started_at


def test_process_jobs_still_fork_a_process_per_attempt(app):
    job = make_job(now=utcnow(), task="test_pool_count", overlap_policy="allow")  # the default
    ids = trigger(job, 3)

    drain(app)

    rows = attempts(ids)
    assert job.isolation == "process"
    assert len({a.pid for a in rows}) == 3 and all(a.status == "succeeded" for a in rows)
    assert all('"runs": 1' in execution(i).result for i in ids)  # nothing carried between attempts


def fresh(model, key):
    db.session.rollback()
    return db.session.get(model, key)


def task_pid(worker, execution_id: int) -> int:
    """Wait until the execution runs in a process under the worker's zygote; its pid."""

    def running_task():
        if fresh(Execution, execution_id).status != "running":
            return None
        zygotes = [pid for pid in children_of(worker.pid) if "app.executor.zygote" in cmdline(pid)]
        tasks = [pid for zygote in zygotes for pid in children_of(zygote)]
        return tasks[0] if tasks else None

    return wait_for(running_task, within=30, what=lambda: f"execution {execution_id} to run\n{worker.describe()}")


def run_cli(flask_processes, *args: str) -> str:
    command = flask_processes.start(*args)
    assert command.wait_exit(within=30) == 0, command.describe()
    return command.output()


@pytest.mark.slow
def test_cancel_kills_a_pool_attempt_and_the_worker_replaces_the_process(app, flask_processes):
    job = make_job(
        now=utcnow(), every="1d", task="sleep_for_seconds", config={"seconds": 60}, isolation="pool", max_attempts=3
    )
    [execution_id] = trigger(job)
    worker = flask_processes.start_worker("--workers", "1", "--worker-id", "pool-canceller")
    pool_pid = task_pid(worker, execution_id)  # the pool process, a child of the zygote

    run_cli(flask_processes, "execution", "cancel", str(execution_id))
    wait_for(lambda: not is_alive(pool_pid), within=5, what=lambda: "the pool process to be gone\n" + worker.describe())
    wait_for(lambda: fresh(Execution, execution_id).status == "cancelled", within=10, what=worker.describe)
    [attempt] = attempts([execution_id])
    assert attempt.status == "cancelled" and attempt.pid == pool_pid and "cancelled" in attempt.error

    quick = make_job(now=utcnow(), every="1d", task="always_succeed", isolation="pool")
    [after_id] = trigger(quick)
    wait_for(lambda: fresh(Execution, after_id).status == "succeeded", within=20, what=worker.describe)
    [after] = attempts([after_id])
    assert after.pid != pool_pid and worker.popen.poll() is None
