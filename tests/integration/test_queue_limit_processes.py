"""A queue's concurrency limit and pause, proved with real processes on the real PostgreSQL.

Four `flask worker run` processes with eight slots each serve one queue limited to 2. While they
run, a sampler thread counts every ~20 ms, independently:
  * from the database: the queue's executions whose status is `running`;
  * from the process table: the live task processes, i.e. children of the workers' zygotes
    (the processes that actually run `sleep_for_seconds`, whatever the database says).
Neither may ever exceed the limit, and the process view must have seen every one of the
executions' task processes (their pids are the attempts' pids), so it cannot have looked away.

The second test pauses the queue mid-run with `flask queue pause`: the runs in flight finish,
nothing new starts until `flask queue resume`, and then the rest runs to the end.

Every wait is a bounded poll for a condition; the one fixed window is the pause's quiet period,
which has to be watched for some time to show that nothing happens in it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import select

from app.clock import utcnow
from app.database import write_transaction
from app.extensions import db
from app.models import Attempt, Execution, Job, Queue
from app.store import store_for
from tests.factories import make_job, make_queue
from tests.helpers.pg import plain_url, starting_gate
from tests.helpers.processes import FlaskProcesses, cmdline, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(120)]

LIMIT = 2
WORKERS = 4
SLOTS = 8
TASK_SECONDS = 0.5
SAMPLE_EVERY = 0.02


@pytest.fixture
def backend() -> str:
    """PostgreSQL only: the point is many processes racing on row locks."""
    return "postgres"


# --- what the sampler sees ----------------------------------------------------------------------


def _process_table() -> dict[int, tuple[int, int]]:
    """{pid: (ppid, start time in clock ticks)} of every live (non-zombie) process, in one pass."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = raw[raw.rindex(")") + 2 :].split()  # the command name may contain spaces
        if fields[0] not in ("Z", "X"):
            table[int(entry)] = (int(fields[1]), int(fields[19]))
    return table


def task_processes(worker_pids: Iterable[int]) -> set[tuple[int, int]]:
    """Live task processes of these workers as (pid, start ticks): the children of their zygotes."""
    table = _process_table()
    workers = set(worker_pids)
    zygotes = {pid for pid, (ppid, _) in table.items() if ppid in workers and "app.executor.zygote" in cmdline(pid)}
    return {(pid, started) for pid, (ppid, started) in table.items() if ppid in zygotes}


@dataclass
class Sample:
    at: float  # monotonic
    running: int  # status running, per the database
    started: int  # ever started (no longer pending), per the database
    tasks: int  # live task processes, per the process table


@dataclass
class Sampler:
    """A thread that samples the queue from the database and the process table every ~20 ms."""

    url: str
    queue_id: int
    worker_pids: list[int]
    samples: list[Sample] = field(default_factory=list)
    task_pids: set[tuple[int, int]] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, name="queue-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        try:
            with psycopg.connect(plain_url(self.url), autocommit=True) as conn:
                while not self._stop.is_set():
                    running, started = conn.execute(
                        "SELECT count(*) FILTER (WHERE status = 'running'), count(*) FILTER (WHERE status <> 'pending')"
                        " FROM executions WHERE queue_id = %s",
                        (self.queue_id,),
                    ).fetchone()
                    tasks = task_processes(self.worker_pids)
                    self.task_pids |= tasks
                    self.samples.append(Sample(time.monotonic(), running, started, len(tasks)))
                    self._stop.wait(SAMPLE_EVERY)
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread in __exit__
            self._error = exc

    def latest(self) -> Sample | None:
        return self.samples[-1] if self.samples else None

    def since(self, moment: float) -> list[Sample]:
        return [sample for sample in self.samples if sample.at >= moment]


# --- helpers ------------------------------------------------------------------------------------


def limited_job(queue: str, *, limit: int | None = LIMIT) -> Job:
    make_queue(queue, concurrency_limit=limit)
    return make_job(
        now=utcnow(),
        every="1d",
        name=f"{queue}-sleeper",
        queue=queue,
        task="sleep_for_seconds",
        config={"seconds": TASK_SECONDS},
        overlap_policy="allow",
        timeout_seconds=30,
    )


def insert_executions(job: Job, count: int) -> list[int]:
    with write_transaction(db.engine) as conn:
        return [store_for(conn).insert_manual(conn, job, now=utcnow()) for _ in range(count)]


def statuses(ids: list[int]) -> dict[int, str]:
    db.session.rollback()  # read what the workers committed
    return dict(db.session.execute(select(Execution.id, Execution.status).where(Execution.id.in_(ids))).all())


def attempt_pids(ids: list[int]) -> list[int]:
    db.session.rollback()
    return list(db.session.scalars(select(Attempt.pid).where(Attempt.execution_id.in_(ids))))


def start_workers(flask_processes: FlaskProcesses, queue: str) -> list:
    return [
        flask_processes.start_worker("--workers", str(SLOTS), "--queues", queue, "--worker-id", f"{queue}-{n}")
        for n in range(WORKERS)
    ]


def stop_workers(flask_processes: FlaskProcesses, workers: list) -> None:
    for worker in workers:
        worker.signal(signal.SIGTERM)
    assert flask_processes.wait_all(within=30) == [0] * len(flask_processes.started), flask_processes.outputs()


def run_cli(flask_processes: FlaskProcesses, *args: str) -> str:
    """Run one `flask ...` command to the end; it must exit 0."""
    command = flask_processes.start(*args)
    assert command.wait_exit(within=30) == 0, command.describe()
    return command.output()


def all_succeeded(ids: list[int], flask_processes: FlaskProcesses, sampler: Sampler, within: float) -> None:
    wait_for(
        lambda: set(statuses(ids).values()) == {"succeeded"},
        within=within,
        what=lambda: (
            f"all {len(ids)} executions to succeed: {statuses(ids)}\nlast sample {sampler.latest()}\n"
            + flask_processes.outputs()
        ),
    )


# --- 1. the limit holds across four racing workers ----------------------------------------------


def test_a_limit_of_2_holds_across_4_worker_processes_with_8_slots_each(app, app_env, flask_processes):
    job = limited_job("capped")
    ids = insert_executions(job, 40)
    db.session.rollback()

    # The workers start together: each one's first claim queues on the gate's table lock.
    with starting_gate(app_env["DATABASE_URL"]) as gate:
        workers = start_workers(flask_processes, "capped")
        gate.wait_for_waiters(WORKERS, within=30, describe=flask_processes.outputs)
        with Sampler(app_env["DATABASE_URL"], job.queue_id, [w.pid for w in workers]) as sampler:
            gate.open()
            # 40 runs of 0.5 s, two at a time: 10 s if the limit is used to the full.
            all_succeeded(ids, flask_processes, sampler, within=45)
            # One more sample after the last row settled: the task processes are gone too.
            wait_for(lambda: sampler.latest().tasks == 0, within=5, what="the last task process to exit")
    stop_workers(flask_processes, workers)

    samples = sampler.samples
    assert len(samples) > 100, f"only {len(samples)} samples"
    assert max(sample.running for sample in samples) == LIMIT
    assert max(sample.tasks for sample in samples) == LIMIT
    # The process view saw every task process: one per execution, and exactly the attempts' pids.
    assert len(sampler.task_pids) == 40
    assert sorted(pid for pid, _ in sampler.task_pids) == sorted(attempt_pids(ids))
    # The limit was used, not just respected: most of the run had both slots busy.
    busy = [sample for sample in samples if sample.running == LIMIT]
    assert len(busy) > len(samples) / 2, f"{len(busy)} of {len(samples)} samples at the limit"
    # Each ran once. (Which worker ran them is not asserted: a worker that records a finish claims in
    # the same statement, so it usually keeps the slot it frees, and idle workers polling meanwhile
    # find the queue full. They still race at the start and on every poll.)
    db.session.rollback()
    assert db.session.scalar(select(Execution.id).where(Execution.id.in_(ids), Execution.attempts != 1)) is None


# --- 2. pause mid-run, then resume --------------------------------------------------------------


def test_pause_mid_run_lets_running_work_finish_and_starts_nothing_until_resume(app, app_env, flask_processes):
    job = limited_job("pausable")
    # Enough work (15 s at the limit) that the pause lands mid-run however slowly the CLI starts.
    ids = insert_executions(job, 60)
    db.session.rollback()
    poll_seconds = app.config["WORKER_POLL_SECONDS"]

    workers = start_workers(flask_processes, "pausable")
    with Sampler(app_env["DATABASE_URL"], job.queue_id, [w.pid for w in workers]) as sampler:
        wait_for(
            lambda: (sampler.latest() or Sample(0, 0, 0, 0)).started >= 2,
            within=30,
            what=lambda: f"two executions to start\n{flask_processes.outputs()}",
        )
        run_cli(flask_processes, "queue", "pause", "pausable", "--reason", "mid-run test")
        paused_at = time.monotonic()
        at_pause = statuses(ids)
        running_at_pause = [i for i, status in at_pause.items() if status == "running"]
        started_at_pause = sum(1 for status in at_pause.values() if status != "pending")
        assert started_at_pause < 60, "the run ended before the pause landed"

        # The runs in flight finish (each worker's turn after a finish records it and claims nothing).
        wait_for(
            lambda: sampler.latest().running == 0 and sampler.latest().tasks == 0 and sampler.latest().at > paused_at,
            within=10,
            what=lambda: f"the running executions to finish: {sampler.latest()}",
        )
        assert {statuses(running_at_pause)[i] for i in running_at_pause} <= {"succeeded"}
        # Quiet period: every idle worker polls at least twice in it and still claims nothing.
        quiet_until = time.monotonic() + 2 * poll_seconds + 0.5
        wait_for(lambda: time.monotonic() >= quiet_until, within=10, what="the quiet period to pass")

        resumed_at = time.monotonic()  # before the command: its commit may wake workers before it exits
        run_cli(flask_processes, "queue", "resume", "pausable")
        all_succeeded(ids, flask_processes, sampler, within=30)
    stop_workers(flask_processes, workers)

    paused = [sample for sample in sampler.samples if paused_at <= sample.at < resumed_at]
    assert len(paused) > 20, f"only {len(paused)} samples while paused"
    assert {sample.started for sample in paused} == {started_at_pause}, "something started while paused"
    assert paused[-1].running == 0 and paused[-1].tasks == 0
    # After resume the rest ran, still within the limit.
    after = sampler.since(resumed_at)
    assert max(sample.started for sample in after) == 60
    assert max(sample.running for sample in sampler.samples) <= LIMIT
    assert max(sample.tasks for sample in sampler.samples) <= LIMIT
    db.session.rollback()
    queue = db.session.get(Queue, job.queue_id)
    assert (queue.paused, queue.slots_taken) == (False, 0)
