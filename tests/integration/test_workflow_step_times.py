"""A workflow run's history tells the order things happened in, even when two workers end steps
of one run at nearly the same instant: a downstream step is created (and due, and started) no
earlier than the recorded finish of every step it waited for, and the run ends no earlier than
its last step.

The race is played with two workers on two queues and two clocks: the one that records its
step second (so it is the one that sees both ended and hands off) read its clock a few
milliseconds before the other recorded its step, as a turn that waited for the run's lock does."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from app.executor import ForkServer
from app.extensions import db
from app.models import Execution, WorkflowRun
from app.services.engine.worker import Worker
from app.services.read.ledger import verify
from app.services.use_cases import runs
from tests.factories import make_job, make_queue
from tests.helpers import workflow_tasks

AHEAD = timedelta(milliseconds=5)  # how much later the first recorder read its clock


@pytest.fixture
def drain(app):
    executor = ForkServer(preload=workflow_tasks.PRELOAD, kill_grace_seconds=1.0)

    def run(queue: str, clock):
        return Worker(app, worker_id=f"w-{queue}", clock=clock, executor=executor, queues=[queue]).run(burst=True)

    yield run
    executor.stop()


def graph(*, join: bool) -> list[dict]:
    steps = [
        {"name": "a", "task": "wf_emit", "config": {"value": 1}},
        {"name": "b", "task": "wf_emit", "config": {"value": 2}, "after": ["a"], "queue": "late"},
        {"name": "c", "task": "wf_emit", "config": {"value": 3}, "after": ["a"], "queue": "early"},
    ]
    if join:
        steps.append({"name": "d", "task": "wf_emit", "config": {"value": 4}, "after": ["b", "c"]})
    return steps


def race(drain, clock, *, join: bool) -> int:
    """Run a, then b on a worker whose clock reads AHEAD later, then c on one whose clock reads
    `clock` (it records c second, so it is the one that sees both ended). Returns the run's id."""
    make_queue("late", now=clock())
    make_queue("early", now=clock())
    job = make_job(now=clock(), task="echo", every="1h", steps=graph(join=join))
    run = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    drain("default", clock)
    drain("late", lambda: clock() + AHEAD)
    drain("early", clock)
    return run.id


def steps_of(run_id: int) -> dict[str, Execution]:
    db.session.rollback()
    rows = db.session.scalars(select(Execution).where(Execution.workflow_run_id == run_id)).all()
    return {row.step: row for row in rows}


def test_a_join_step_is_created_due_and_started_no_earlier_than_its_last_upstream_finish(app, clock, drain):
    run_id = race(drain, clock, join=True)
    steps = steps_of(run_id)
    assert steps["b"].finished_at == clock() + AHEAD and steps["c"].finished_at == clock()
    d = steps["d"]
    assert d.status == "pending"  # due at b's finish: a worker whose clock reads earlier leaves it
    assert d.created_at == d.available_at == d.scheduled_for == steps["b"].finished_at

    drain("default", clock)
    assert steps_of(run_id)["d"].status == "pending"
    clock.advance(seconds=1)
    drain("default", clock)
    d = steps_of(run_id)["d"]
    assert d.status == "succeeded" and d.started_at >= d.created_at >= steps["b"].finished_at
    anchor = db.session.get(Execution, run_id)
    assert anchor.status == "succeeded" and anchor.finished_at == d.finished_at
    assert verify(now=clock()).ok


def test_a_run_ends_no_earlier_than_the_last_of_its_steps(app, clock, drain):
    run_id = race(drain, clock, join=False)
    steps = steps_of(run_id)
    anchor = db.session.get(Execution, run_id)
    run = db.session.get(WorkflowRun, run_id)
    assert anchor.status == "succeeded"  # ended by the turn that recorded c, with its clock
    latest = max(row.finished_at for row in steps.values())
    assert latest == clock() + AHEAD
    assert anchor.finished_at == run.finished_at == latest
    assert verify(now=clock() + AHEAD).ok
