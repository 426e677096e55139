"""Queues in the claim, on SQLite and PostgreSQL: pause stops new starts (never running work),
a concurrency limit caps running executions across workers, and slots come back when runs end."""

from __future__ import annotations

from sqlalchemy import select

from app.clock import utcnow
from app.extensions import db
from app.models import Execution, Queue
from app.services.engine.worker import Worker
from app.services.use_cases import jobs, queues
from tests.factories import make_job, make_queue


def statuses(job_id) -> list[str]:
    db.session.rollback()
    return sorted(db.session.scalars(select(Execution.status).where(Execution.job_id == job_id)))


def slots_taken(name: str) -> int:
    db.session.rollback()
    return db.session.scalar(select(Queue.slots_taken).where(Queue.name == name))


def trigger(job, times: int) -> None:
    for _ in range(times):
        jobs.trigger_job(job.id, now=utcnow(), actor="test")


def test_a_paused_queue_starts_nothing_until_resumed(app):
    job = make_job("nightly", queue="reports", overlap_policy="allow")
    other = make_job("other", overlap_policy="allow")
    trigger(job, 2)
    trigger(other, 1)
    queues.pause_queue("reports", now=utcnow(), actor="test", reason="maintenance")
    Worker(app, worker_id="w").run(burst=True)
    assert statuses(job.id) == ["pending", "pending"]
    assert statuses(other.id) == ["succeeded"]
    queues.resume_queue("reports", now=utcnow(), actor="test")
    Worker(app, worker_id="w").run(burst=True)
    assert statuses(job.id) == ["succeeded", "succeeded"]


def test_pause_never_stops_running_work(app):
    job = make_job(
        "nightly", queue="reports", overlap_policy="allow", task="sleep_for_seconds", config={"seconds": 0.3}
    )
    trigger(job, 1)
    worker = Worker(app, worker_id="w", slots=2)
    worker.start()
    try:
        worker.run_once(wait=0.0)
        assert statuses(job.id) == ["running"]
        queues.pause_queue("reports", now=utcnow(), actor="test")
        worker.run(burst=True)
    finally:
        worker.executor.stop()
    assert statuses(job.id) == ["succeeded"]


def test_a_limit_caps_what_one_turn_starts_and_slots_come_back(app):
    make_queue("limited", concurrency_limit=2)
    job = make_job(
        "nightly", queue="limited", overlap_policy="allow", task="sleep_for_seconds", config={"seconds": 0.2}
    )
    trigger(job, 5)
    worker = Worker(app, worker_id="w", slots=8)
    worker.start()
    try:
        worker.run_once(wait=0.0)
        assert statuses(job.id).count("running") == 2
        assert slots_taken("limited") == 2
        # A second worker finds the queue full.
        other = Worker(app, worker_id="w2", slots=8)
        other.start()
        try:
            other.run_once(wait=0.0)
        finally:
            other.executor.stop()
        assert statuses(job.id).count("running") == 2
        worker.run(burst=True)
    finally:
        worker.executor.stop()
    assert statuses(job.id) == ["succeeded"] * 5
    assert slots_taken("limited") == 0


def test_unlimited_queues_never_write_their_row(app):
    job = make_job("nightly", overlap_policy="allow")
    trigger(job, 3)
    Worker(app, worker_id="w").run(burst=True)
    assert statuses(job.id) == ["succeeded"] * 3
    assert slots_taken("default") == 0


def test_deleting_a_job_mid_run_gives_its_slots_back(app):
    make_queue("limited", concurrency_limit=1)
    job = make_job("nightly", queue="limited", task="sleep_for_seconds", config={"seconds": 0.3})
    trigger(job, 1)
    worker = Worker(app, worker_id="w", slots=2)
    worker.start()
    try:
        worker.run_once(wait=0.0)
        assert slots_taken("limited") == 1
        jobs.delete_job(job.id, now=utcnow(), actor="test")
        assert slots_taken("limited") == 0
        worker.run(burst=True)
    finally:
        worker.executor.stop()
    assert slots_taken("limited") == 0
