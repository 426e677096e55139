"""A limited queue costs no extra round trips: the turn that records a run of a full queue starts
its successor in the same call (on PostgreSQL, the same statement), on SQLite and PostgreSQL."""

from __future__ import annotations

from sqlalchemy import select

from app.clock import utcnow
from app.database import write_transaction
from app.domain.states import AttemptStatus
from app.extensions import db
from app.models import Execution, Queue
from app.services.use_cases import jobs
from app.store import Finished, Outcome, Turn, store_for
from tests.factories import make_job, make_queue

SUCCEEDED = Outcome(status=AttemptStatus.SUCCEEDED, exit_code=0, output="", error="", pid=4242)


def turn(finished=(), *, worker_id: str = "w1", limit: int = 4) -> Turn:
    with write_transaction(db.engine) as conn:
        return store_for(conn).record_and_claim(
            conn,
            list(finished),
            worker_id=worker_id,
            now=utcnow(),
            limit=limit,
            queue_ids=None,
            lease_seconds=60,
            buffer_seconds=0,
        )


def slots_taken(name: str) -> int:
    db.session.rollback()
    return db.session.scalar(select(Queue.slots_taken).where(Queue.name == name))


def test_the_turn_that_frees_a_full_queues_slot_starts_the_successor(app):
    make_queue("narrow", concurrency_limit=2)
    job = make_job("narrow-job", queue="narrow", overlap_policy="allow")
    for _ in range(5):
        jobs.trigger_job(job.id, now=utcnow(), actor="test")

    first = turn()
    assert len(first.started) == 2 and slots_taken("narrow") == 2
    # The queue is full. Recording one run gives its slot back and starts the next, in one call.
    (done, number), (still_running, _) = first.started
    second = turn([Finished(done.id, number, SUCCEEDED, None)])
    assert second.recorded == {done.id}
    assert len(second.started) == 1
    assert slots_taken("narrow") == 2
    # Recording both remaining runs starts two more: never more than the limit.
    (next_run, next_number) = second.started[0]
    third = turn([Finished(still_running.id, 1, SUCCEEDED, None), Finished(next_run.id, next_number, SUCCEEDED, None)])
    assert len(third.started) == 2
    assert slots_taken("narrow") == 2
    db.session.rollback()
    running = db.session.scalar(
        select(db.func.count()).select_from(Execution).where(Execution.job_id == job.id, Execution.status == "running")
    )
    assert running == 2


def test_a_turn_of_another_worker_still_finds_the_queue_full(app):
    make_queue("narrow", concurrency_limit=1)
    job = make_job("narrow-job", queue="narrow", overlap_policy="allow")
    for _ in range(3):
        jobs.trigger_job(job.id, now=utcnow(), actor="test")
    [(running, number)] = turn(worker_id="w1").started
    # What w1 gives back is w1's to reuse in its turn; w2 records nothing and gets nothing.
    assert turn(worker_id="w2").started == []
    assert len(turn([Finished(running.id, number, SUCCEEDED, None)], worker_id="w1").started) == 1
    assert slots_taken("narrow") == 1
