"""`Store.record_and_claim`, the worker's one-statement turn on PostgreSQL (composed steps on
SQLite), checked directly on both backends: what it records, what it starts, what it refuses."""

from datetime import timedelta

from sqlalchemy import select

from app.clock import utcnow
from app.database import write_transaction
from app.domain.states import AttemptStatus
from app.extensions import db
from app.models import Attempt, Execution
from app.services.use_cases import jobs
from app.store import DISABLED_BEFORE_RUN, Finished, Outcome, Turn, store_for
from tests.factories import make_job

LEASE = dict(lease_seconds=60, buffer_seconds=30)


def now():
    return utcnow()


def fresh(execution_id) -> Execution:
    db.session.rollback()
    return db.session.get(Execution, execution_id)


def attempt_statuses(execution_id) -> list[str]:
    db.session.rollback()
    return list(
        db.session.scalars(select(Attempt.status).where(Attempt.execution_id == execution_id).order_by(Attempt.number))
    )


def queue_ids(names):
    """The ids of named queues, as a worker resolves its --queues."""
    if not names:
        return None
    with db.engine.connect() as conn:
        found = store_for(conn).queue_ids(conn, names)
    return [found[name] for name in names]


def turn(finished=(), *, worker_id="w1", at=None, limit=10, queues=None) -> Turn:
    with write_transaction(db.engine) as conn:
        return store_for(conn).record_and_claim(
            conn,
            list(finished),
            worker_id=worker_id,
            now=at or now(),
            limit=limit,
            queue_ids=queue_ids(queues),
            **LEASE,
        )


def outcome(status: str, text: str = "") -> Outcome:
    return Outcome(
        status=AttemptStatus(status),
        exit_code=0 if status == "succeeded" else 1,
        output=text,
        error="" if status == "succeeded" else "boom",
        pid=4242,
    )


def test_a_turn_claims_and_starts_in_priority_order_and_opens_attempts(app):
    low = make_job(now=now(), name="low", priority=5, overlap_policy="allow")
    high = make_job(now=now(), name="high", priority=1, overlap_policy="allow")
    first = jobs.trigger_job(low.id, now=now(), actor="t")
    second = jobs.trigger_job(high.id, now=now(), actor="t")
    at = now()

    result = turn(at=at, limit=1)

    assert [(item.id, number) for item, number in result.started] == [(second.id, 1)]
    item = result.started[0][0]
    assert (item.job_name, item.task, item.attempts) == ("high", "always_succeed", 0)
    row = fresh(second.id)
    assert (row.status, row.claimed_by, row.attempts) == ("running", "w1", 1)
    assert row.lease_expires_at >= at + timedelta(seconds=60)
    assert attempt_statuses(second.id) == ["running"]
    assert fresh(first.id).status == "pending"


def test_a_turn_records_success_and_retry_and_claims_in_the_same_transaction(app):
    job = make_job(now=now(), overlap_policy="allow", max_attempts=3)
    ok, flaky, waiting = (jobs.trigger_job(job.id, now=now(), actor="t") for _ in range(3))
    started = turn(limit=2).started
    assert sorted(item.id for item, _ in started) == [ok.id, flaky.id]
    retry_at = now() + timedelta(minutes=5)

    result = turn(
        [
            Finished(ok.id, 1, outcome("succeeded", "done"), None),
            Finished(flaky.id, 1, outcome("failed"), retry_at),
        ],
        limit=2,
    )

    assert result.recorded == {ok.id, flaky.id}
    assert [item.id for item, _ in result.started] == [waiting.id]
    done, retrying = fresh(ok.id), fresh(flaky.id)
    assert (done.status, done.output, done.finished_at is not None) == ("succeeded", "done", True)
    assert (retrying.status, retrying.finished_at, retrying.claimed_by) == ("retry_scheduled", None, None)
    assert abs((retrying.available_at - retry_at).total_seconds()) < 0.001
    assert attempt_statuses(ok.id) == ["succeeded"] and attempt_statuses(flaky.id) == ["failed"]


def test_a_stale_worker_records_nothing_and_its_attempt_stays_with_the_new_owner(app):
    job = make_job(now=now(), overlap_policy="allow")
    execution = jobs.trigger_job(job.id, now=now(), actor="t")
    turn(worker_id="old")

    result = turn([Finished(execution.id, 1, outcome("succeeded", "late"), None)], worker_id="intruder")

    assert result.recorded == set()
    row = fresh(execution.id)
    assert (row.status, row.output, row.claimed_by) == ("running", "", "old")
    assert attempt_statuses(execution.id) == ["running"]


def test_rows_of_a_job_disabled_after_queueing_are_cancelled_not_run(app):
    job = make_job(now=now(), overlap_policy="allow")
    execution = jobs.trigger_job(job.id, now=now(), actor="t")
    db.session.rollback()
    db.session.execute(db.text("UPDATE jobs SET enabled = false WHERE id = :id"), {"id": job.id})
    db.session.commit()

    result = turn()

    assert result.started == [] and [item.id for item in result.cancelled] == [execution.id]
    row = fresh(execution.id)
    assert (row.status, row.reason) == ("cancelled", DISABLED_BEFORE_RUN)
    assert attempt_statuses(execution.id) == []


def test_queues_limit_what_a_turn_claims(app):
    reports = make_job(now=now(), name="reports", queue="reports")
    default = make_job(now=now(), name="default")
    in_reports = jobs.trigger_job(reports.id, now=now(), actor="t")
    jobs.trigger_job(default.id, now=now(), actor="t")

    result = turn(queues=["reports"])

    assert [item.id for item, _ in result.started] == [in_reports.id]


def test_an_exclusive_job_never_has_two_runs_in_flight_across_turns(app):
    job = make_job(now=now(), overlap_policy="queue")
    older, newer = (jobs.trigger_job(job.id, now=now(), actor="t") for _ in range(2))

    assert [item.id for item, _ in turn().started] == [older.id]
    assert turn(worker_id="w2").started == []  # the older run is in flight

    finished = turn([Finished(older.id, 1, outcome("succeeded"), None)])
    # The next claim (in the same statement on PostgreSQL, or right after on SQLite) gets the
    # newer row; the worker claims again at once when a turn recorded results and had room.
    started = finished.started or turn().started
    assert [item.id for item, _ in started] == [newer.id]
