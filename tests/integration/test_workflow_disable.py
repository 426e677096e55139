"""Disabling a workflow job on PostgreSQL, with the scheduler paced as its loop paces it (a tick,
then the sleep's read of whether anything waits or runs; after a full idle pass it skips the
upkeep that acts on runs) and an injected clock.

As for any job, disabling cancels what waits and lets what runs finish: of a run in flight the
running step finishes, the steps that have not started never start (marked `cancelled`), and the
run ends `cancelled` (neither callback) once nothing of it runs; no new run is created while the
job is disabled. A scheduler that thought itself idle when the run was in flight does not hold it
up: the first tick after the change sees it."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from app.executor import ForkServer
from app.extensions import db
from app.models import Event, Execution, WorkflowRun
from app.services.engine.scheduler import Scheduler
from app.services.engine.worker import Worker
from app.services.read.ledger import verify
from app.services.use_cases import jobs as jobs_service
from app.services.use_cases import runs
from tests.factories import make_job
from tests.helpers import workflow_tasks

pytestmark = pytest.mark.postgres

TICK_SECONDS = 1.0  # SCHEDULER_TICK_SECONDS
IDLE_CAP = 15.0  # SCHEDULER_IDLE_TICK_SECONDS
DIAMOND = [
    {"name": "a", "task": "wf_emit", "config": {"value": 1}},
    {"name": "b", "task": "wf_emit", "config": {"value": 2}, "after": ["a"]},
    {"name": "c", "task": "wf_emit", "config": {"value": 3}, "after": ["a"]},
    {"name": "d", "task": "wf_emit", "config": {"value": 4}, "after": ["b", "c"]},
]


class Paced:
    """One scheduler driven as `run_forever` drives it: `turn()` ticks, then reads how long it
    would sleep (and whether it is idle); the clock moves only when the test moves it."""

    def __init__(self, app, clock) -> None:
        self.scheduler = Scheduler(app, scheduler_id="s-paced", clock=clock)
        self.clock = clock

    def turn(self) -> float:
        self.scheduler.tick(self.clock())
        return self.scheduler.seconds_until_due(self.clock(), TICK_SECONDS, idle_cap=IDLE_CAP)

    def idle_pass(self) -> None:
        """Tick until it is idle and has run its one upkeep since: the next upkeeps are quiet."""
        for _ in range(3):
            self.clock.advance(seconds=self.turn())
        assert self.scheduler.idle and self.scheduler._idle_upkept


@pytest.fixture
def executor():
    server = ForkServer(preload=workflow_tasks.PRELOAD, kill_grace_seconds=1.0)
    yield server
    server.stop()


def worker(app, clock, executor) -> Worker:
    return Worker(app, worker_id="w-disable", clock=clock, executor=executor)


def anchors(job_id: int) -> list[Execution]:
    db.session.rollback()
    query = select(Execution).where(Execution.job_id == job_id, Execution.workflow_run_id.is_(None))
    return list(db.session.scalars(query.order_by(Execution.id)))


def steps_of(run_id: int) -> dict[str, Execution]:
    db.session.rollback()
    rows = db.session.scalars(select(Execution).where(Execution.workflow_run_id == run_id)).all()
    return {row.step: row for row in rows}


def kinds(job_id: int) -> list[str]:
    return list(db.session.scalars(select(Event.type).where(Event.job_id == job_id).order_by(Event.id)))


def test_disabled_while_a_step_runs_the_step_finishes_nothing_more_starts_and_the_run_ends_cancelled(
    pg_app, clock, executor
):
    job = make_job(now=clock(), task="echo", every="1h", steps=DIAMOND, on_failure="echo")
    paced = Paced(pg_app, clock)
    paced.idle_pass()
    clock.advance(seconds=3600 - 3 * IDLE_CAP)
    assert paced.turn() == TICK_SECONDS  # the tick started the occurrence: no longer idle
    [anchor] = anchors(job.id)
    assert anchor.status == "running" and set(steps_of(anchor.id)) == {"a"}

    busy = worker(pg_app, clock, executor)
    busy.start()
    busy.run_once(wait=0.0)  # claims a and forks it; its result is recorded by a later turn
    assert steps_of(anchor.id)["a"].status == "running"
    _, cancelled = jobs_service.disable_job(job.id, now=clock(), actor="test")
    assert cancelled == 0  # nothing of the run waited in a queue: a runs

    busy.run(burst=True)  # records a: b and c never start
    steps = steps_of(anchor.id)
    assert set(steps) == {"a"} and steps["a"].status == "succeeded"
    db.session.rollback()
    run = db.session.get(WorkflowRun, anchor.id)
    assert {name: entry.get("state") for name, entry in run.state.items() if "state" in entry} == {
        "b": "cancelled",
        "c": "cancelled",
        "d": "cancelled",
    }
    [anchor] = anchors(job.id)
    assert anchor.status == "cancelled" and anchor.finished_at == steps["a"].finished_at
    assert run.finished_at == anchor.finished_at

    for _ in range(3):  # hours pass: the disabled job gets no run, the scheduler settles idle
        clock.advance(hours=1)
        paced.turn()
    assert [row.id for row in anchors(job.id)] == [anchor.id]
    assert paced.scheduler.idle
    assert db.session.scalars(select(Execution).where(Execution.trigger == "callback")).all() == []
    assert "workflow_finished" in kinds(job.id) and "job_disabled" in kinds(job.id)
    assert verify(now=clock()).ok


def test_a_queued_step_cancelled_by_disabling_ends_the_run_at_the_first_tick_of_an_idle_scheduler(
    pg_app, clock, executor
):
    job = make_job(now=clock(), task="echo", every="1h", steps=DIAMOND)
    paced = Paced(pg_app, clock)
    paced.idle_pass()  # it last read "nothing waits or runs" and will skip the next upkeep's runs part

    run = runs.trigger_run(job.id, {}, now=clock(), actor="test")  # starts at once: a queued
    assert steps_of(run.id)["a"].status == "pending"
    _, cancelled = jobs_service.disable_job(job.id, now=clock(), actor="test")
    assert cancelled == 1  # a, queued: nobody records its end but the scheduler's sweep

    clock.advance(seconds=1)  # the disable's NOTIFY wakes the scheduler
    paced.turn()
    [anchor] = anchors(job.id)
    assert anchor.status == "cancelled", "the first tick after the change still sweeps the run"
    assert steps_of(run.id)["a"].status == "cancelled"
    assert worker(pg_app, clock, executor).run(burst=True).claimed == 0

    for _ in range(3):
        clock.advance(hours=1)
        paced.turn()
    assert [row.id for row in anchors(job.id)] == [run.id]
    assert verify(now=clock()).ok


def test_disabled_while_idle_no_run_is_created_and_enabling_resumes_from_now(pg_app, clock, executor):
    job = make_job(now=clock(), task="echo", every="1h", steps=DIAMOND)
    paced = Paced(pg_app, clock)
    paced.idle_pass()
    jobs_service.disable_job(job.id, now=clock(), actor="test")

    for _ in range(4):
        clock.advance(hours=1)
        assert paced.turn() == IDLE_CAP  # idle: nothing is due, nothing waits or runs
    assert anchors(job.id) == []

    jobs_service.enable_job(job.id, now=clock(), actor="test")
    clock.advance(hours=1)
    paced.turn()
    [anchor] = anchors(job.id)
    assert anchor.status == "running" and set(steps_of(anchor.id)) == {"a"}
    worker(pg_app, clock, executor).run(burst=True)
    paced.turn()
    [anchor] = anchors(job.id)
    assert anchor.status == "succeeded" and len(steps_of(anchor.id)) == 4
    assert verify(now=clock()).ok
