"""Rate limits on SQLite and PostgreSQL: a queue's or a job's `rate_limit` lets at most N runs
start in any window of its period, through the worker's own turn; the rest wait (pending, not
failed), the queue's statistics show the window, and explain says why a run waits."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import select, text

from app.domain.rate_limits import allowance, parse_rate_limit, record_starts
from app.extensions import db
from app.models import Execution, Job, Queue
from app.services.engine.worker import Worker
from app.services.errors import ValidationFailed
from app.services.read.explain import explain_job
from app.services.read.queue_stats import queue_to_dict
from app.services.use_cases import queues, runs
from app.sql.rate_limits import recorded_sql, room_sql
from tests.factories import make_job, make_queue


def statuses(job_id: int) -> list[str]:
    db.session.rollback()
    return list(db.session.scalars(select(Execution.status).where(Execution.job_id == job_id).order_by(Execution.id)))


def drain(app, clock, worker_id: str = "w-rate") -> None:
    stats = Worker(app, worker_id=worker_id, clock=clock).run(burst=True)
    assert stats.gave_up is None, stats.gave_up


def trigger(job: Job, count: int, clock) -> list[int]:
    return [runs.trigger_run(job.id, {}, now=clock(), actor="test").id for _ in range(count)]


def test_a_queue_rate_limit_starts_n_per_window_and_the_rest_wait(app, clock):
    queue = make_queue("partner-api", now=clock(), rate_limit="3/minute")
    assert queue.rate_limit == "3/minute"
    job = make_job(now=clock(), every="1d", queue="partner-api", overlap_policy="allow")
    ids = trigger(job, 5, clock)

    drain(app, clock)
    assert statuses(job.id) == ["succeeded"] * 3 + ["pending"] * 2
    document = queue_to_dict(db.session.get(Queue, queue.id), None, now=clock())
    assert document["rate_window"] == {"limit": "3/minute", "starts_in_window": 3, "room": 0}
    assert len(ids) == 5

    clock.advance(seconds=59)
    drain(app, clock)
    assert statuses(job.id).count("pending") == 2  # still inside the window
    clock.advance(seconds=1, microseconds=1)
    drain(app, clock)
    assert statuses(job.id) == ["succeeded"] * 5


def test_a_job_rate_limit_holds_whatever_its_queue_allows(app, clock):
    job = make_job(now=clock(), every="1d", overlap_policy="allow", rate_limit="2/second")
    other = make_job(now=clock(), every="1d", overlap_policy="allow")
    trigger(job, 4, clock)
    trigger(other, 3, clock)
    drain(app, clock)
    assert statuses(job.id) == ["succeeded"] * 2 + ["pending"] * 2
    assert statuses(other.id) == ["succeeded"] * 3  # the same queue, not limited
    db.session.rollback()
    assert len(db.session.get(Job, job.id).rate_starts) == 2
    clock.advance(seconds=1)
    drain(app, clock)
    assert statuses(job.id) == ["succeeded"] * 4


def test_a_queue_with_both_limits_starts_the_smaller_number(app, clock):
    make_queue("both", now=clock(), rate_limit="2/hour", concurrency_limit=5)
    job = make_job(now=clock(), every="1d", queue="both", overlap_policy="allow")
    trigger(job, 4, clock)
    drain(app, clock)
    assert statuses(job.id) == ["succeeded"] * 2 + ["pending"] * 2
    db.session.rollback()
    assert db.session.scalar(select(Queue.slots_taken).where(Queue.name == "both")) == 0


def test_explain_names_the_rate_limit_a_due_occurrence_waits_for(app, clock):
    job = make_job(now=clock(), every="1m", overlap_policy="allow", rate_limit="1/hour")
    runs.trigger_run(job.id, {}, now=clock(), actor="test")
    drain(app, clock)
    clock.advance(minutes=1)
    from app.services.engine.scheduler import Scheduler

    Scheduler(app, scheduler_id="s-rate", clock=clock).tick(clock())
    drain(app, clock)
    db.session.rollback()
    fate = explain_job(job.id, now=clock(), at=clock())["occurrence"]
    assert fate["fate"] == "rate_limited", fate
    assert fate["summary"].startswith("Waiting: rate limit 1/hour reached (the job)")


def test_bad_rate_limits_are_refused_naming_the_field(app, clock):
    with pytest.raises(ValidationFailed) as refused:
        make_queue("bad", now=clock(), rate_limit="10/day")
    assert refused.value.errors == {"rate_limit": "must be N/second, N/minute or N/hour (e.g. 10/minute), got '10/day'"}
    with pytest.raises(ValidationFailed) as refused:
        make_job(now=clock(), rate_limit="0/minute")
    assert refused.value.errors == {"rate_limit": "the count must be between 1 and 10000, got 0"}
    queue = make_queue("fine", now=clock(), rate_limit="5/second")
    assert queues.edit_queue("fine", {"rate_limit": "none"}, now=clock(), actor="test").rate_limit is None
    assert queue.id


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("limit", "starts", "at", "started"),
    [
        ("3/second", [], 100.0, 2),
        ("3/second", [100.5, 100.0, 99.5], 100.6, 1),
        ("2/minute", [99.0, 41.0], 100.0, 1),
        ("2/minute", [99.0, 40.0], 100.0, 0),
        ("5/hour", [200.0, 150.0], 100.0, 3),
    ],
)
def test_the_claims_sql_agrees_with_the_domain_rule(pg_app, limit, starts, at, started):
    """The PostgreSQL turn's expressions (room, recorded starts) give the domain's answers."""
    now = datetime.fromtimestamp(at, UTC)
    row = "(SELECT CAST(:limit AS text) AS rate_limit, CAST(:starts AS jsonb) AS rate_starts) AS r"
    params = {"limit": limit, "starts": json.dumps(starts), "now": now}
    with db.engine.connect() as conn:
        room = conn.execute(text(f"SELECT {room_sql('r')} FROM {row}"), params).scalar()
        kept = conn.execute(text(f"SELECT {recorded_sql('r', str(started))} FROM {row}"), params).scalar()
    rule = parse_rate_limit(limit)
    assert room == allowance(rule, starts, at)
    assert kept == pytest.approx(record_starts(rule, starts, at, started))


def test_a_run_that_waits_for_its_window_is_never_failed(app, clock):
    job = make_job(now=clock(), every="1d", overlap_policy="allow", rate_limit="1/second")
    trigger(job, 3, clock)
    for _ in range(3):
        drain(app, clock)
        clock.advance(milliseconds=500)
    assert sorted(statuses(job.id)) == ["pending", "succeeded", "succeeded"]
    clock.advance(seconds=1)
    drain(app, clock)
    assert statuses(job.id) == ["succeeded"] * 3


@pytest.mark.postgres
@pytest.mark.timeout(60)
def test_a_turn_never_waits_for_a_rate_limited_job_someone_else_holds(pg_app, clock):
    """A job row locked by an edit or a scheduler tick is skipped, not waited for (the turn holds
    its candidates' rows meanwhile, and the holder may want them next): its runs wait a turn."""
    job = make_job(now=clock(), every="1d", overlap_policy="allow", rate_limit="5/second")
    trigger(job, 2, clock)
    db.session.rollback()
    with db.engine.connect() as holder:
        holder.begin()
        holder.execute(text("SET lock_timeout = '5s'"))
        holder.execute(text("SELECT id FROM jobs WHERE id = :id FOR UPDATE"), {"id": job.id})
        drain(pg_app, clock)  # a turn that waited for the job's lock would hang here until the timeout
        assert statuses(job.id) == ["pending", "pending"]
        holder.rollback()
    drain(pg_app, clock)
    assert statuses(job.id) == ["succeeded", "succeeded"]
