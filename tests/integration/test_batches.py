"""Batches on SQLite and PostgreSQL: items validated all-or-nothing, one run per item with its
override, the aggregate status and counts read from the items, the on-complete callback exactly
once, cancel stopping what has not started, and a clean ledger."""

from __future__ import annotations

import json
import threading

import pytest
from sqlalchemy import func, select

from app.database import write_transaction
from app.domain.states import AttemptStatus
from app.extensions import db
from app.models import Batch, Event, Execution
from app.services.engine import callbacks
from app.services.engine.scheduler import Scheduler
from app.services.engine.worker import Worker
from app.services.errors import Conflict, ValidationFailed
from app.services.read import batches as batch_read
from app.services.read.ledger import verify
from app.services.use_cases import batches, executions, jobs
from app.store import Finished, Outcome, store_for
from tests.factories import make_job


def drain(app, clock, **kwargs):
    return Worker(app, worker_id=kwargs.pop("worker_id", "w-batch"), clock=clock, **kwargs).run(burst=True)


def view(batch_id: int):
    db.session.rollback()
    return batch_read.view(db.session.get(Batch, batch_id))


def on_complete_runs(batch_id: int) -> list[Execution]:
    db.session.rollback()
    return list(
        db.session.scalars(select(Execution).where(Execution.batch_id == batch_id, Execution.trigger == "callback"))
    )


def counts() -> tuple[int, int]:
    db.session.rollback()
    return (
        db.session.scalar(select(func.count()).select_from(Batch)),
        db.session.scalar(select(func.count()).select_from(Execution)),
    )


def twenty_items_three_failing() -> list[dict]:
    return [{"message": f"item {n}", **({"fail": True} if n in (4, 11, 17) else {})} for n in range(1, 21)]


def test_a_batch_of_20_with_3_failing_ends_partially_failed_and_its_callback_runs_once(app, clock):
    job = make_job(now=clock(), task="echo", every="1h", max_attempts=1)
    batch = batches.submit_batch(
        job.id,
        {
            "items": json.dumps(twenty_items_three_failing()),
            "on_complete": "echo",
            "on_complete_config": '{"message": "done"}',
        },
        now=clock(),
        actor="test",
    )
    assert (batch.item_count, view(batch.id).status.value) == (20, "running")
    assert view(batch.id).counts["pending"] == 20
    drain(app, clock, slots=4)
    result = view(batch.id)
    assert result.status.value == "partially_failed"
    assert {k: v for k, v in result.counts.items() if v} == {"succeeded": 17, "failed": 3}
    assert result.batch.completed_at is not None
    [callback] = on_complete_runs(batch.id)
    assert (callback.status, callback.callback_task, callback.parent_id) == ("succeeded", "echo", None)
    shown = json.loads(callback.output)
    assert shown["message"] == "done"
    assert shown["parent"] == {
        "batch_id": batch.id,
        "job_id": job.id,
        "job": job.name,
        "status": "partially_failed",
        "counts": {"succeeded": 17, "failed": 3},
        "items": 20,
    }
    # Each item ran with its own override merged over the job's config.
    db.session.rollback()
    items = batch_read.items(batch.id)
    assert [json.loads(fresh_output(e.id).splitlines()[0])["message"] for e in items] == [
        f"item {n}" for n in range(1, 21)
    ]
    # Sweeps and repeated follow-ups never create a second on-complete run.
    with write_transaction(db.engine) as conn:
        assert callbacks.settle_batches(conn, now=clock()).callbacks == []
        assert callbacks.after_final(conn, [e.id for e in items], now=clock()).callbacks == []
    Scheduler(app, clock=clock).tick(clock())
    assert len(on_complete_runs(batch.id)) == 1
    assert view(batch.id).callback.id == callback.id


def fresh_output(execution_id: int) -> str:
    db.session.rollback()
    return db.session.get(Execution, execution_id).output


def test_all_succeeded_and_all_failed(app, clock):
    job = make_job(now=clock(), task="echo", every="1h", max_attempts=1)
    good = batches.submit_batch(job.id, {"items": [{}, {}]}, now=clock(), actor="test")
    bad = batches.submit_batch(job.id, {"items": [{"fail": True}]}, now=clock(), actor="test")
    drain(app, clock)
    assert (view(good.id).status.value, view(bad.id).status.value) == ("succeeded", "failed")
    assert on_complete_runs(good.id) == []  # no on-complete task given


@pytest.mark.parametrize(
    "items, fragment",
    [
        ('[{"message": "ok"}, {"seconds": 3}, {"fail": "yes"}]', "2 of 3 items refused, nothing stored: item 2:"),
        ('[{"message": "ok"}, 5]', "item 2: must be a JSON object, got int"),
        ('{"message": "not a list"}', "must be a JSON list"),
        ("[]", "at least one item"),
        ("[{", "not valid JSON"),
        ("", "got nothing"),
    ],
)
def test_items_are_validated_all_or_nothing_before_anything_is_stored(app, clock, items, fragment):
    job = make_job(now=clock(), task="echo", every="1h")
    before = counts()
    with pytest.raises(ValidationFailed) as refused:
        batches.submit_batch(job.id, {"items": items}, now=clock(), actor="test")
    assert fragment in refused.value.errors["items"]
    assert counts() == before


def test_a_bad_on_complete_task_refuses_the_batch(app, clock):
    job = make_job(now=clock(), task="echo", every="1h")
    before = counts()
    with pytest.raises(ValidationFailed) as refused:
        batches.submit_batch(job.id, {"items": "[{}]", "on_complete": "sleep_for_seconds"}, now=clock(), actor="test")
    assert "'seconds' is required" in refused.value.errors["on_complete_config"]
    with pytest.raises(ValidationFailed) as refused:
        batches.submit_batch(job.id, {"items": "[{}]", "on_complete": "nope"}, now=clock(), actor="test")
    assert "unknown task" in refused.value.errors["on_complete"]
    assert counts() == before


def test_a_disabled_job_takes_no_batch(app, clock):
    job = make_job(now=clock(), task="echo", every="1h", enabled=False)
    with pytest.raises(Conflict):
        batches.submit_batch(job.id, {"items": "[{}]"}, now=clock(), actor="test")


def test_cancel_stops_what_has_not_started_and_completes_the_batch_once(app, clock):
    job = make_job(now=clock(), task="echo", every="1h")
    batch = batches.submit_batch(job.id, {"items": "[{}, {}, {}]", "on_complete": "echo"}, now=clock(), actor="test")
    with write_transaction(db.engine) as conn:  # one item is already running on a worker
        turn = store_for(conn).record_and_claim(
            conn, [], worker_id="w1", now=clock(), limit=1, queue_ids=None, lease_seconds=60, buffer_seconds=30
        )
    [(running, number)] = turn.started
    cancelled_batch, cancelled = batches.cancel_batch(batch.id, now=clock(), actor="ops")
    assert cancelled == 2 and cancelled_batch.cancelled_by == "ops"
    assert view(batch.id).status.value == "cancelled"
    assert view(batch.id).counts["running"] == 1 and on_complete_runs(batch.id) == []  # not complete yet
    with pytest.raises(Conflict):
        batches.cancel_batch(batch.id, now=clock(), actor="ops")
    db.session.rollback()  # what the adapters do with a refusal (it held the write lock)
    # The running item finishes; its recording completes the batch and creates the callback once.
    finished = Finished(running.id, number, Outcome(AttemptStatus.SUCCEEDED, 0, "ok", ""), None)
    with write_transaction(db.engine) as conn:
        store_for(conn).record_and_claim(
            conn, [finished], worker_id="w1", now=clock(), limit=0, queue_ids=None, lease_seconds=60, buffer_seconds=30
        )
        callbacks.after_final(conn, [running.id], now=clock())
    [callback] = on_complete_runs(batch.id)
    assert callback.config_override["parent"]["status"] == "cancelled"
    assert callback.config_override["parent"]["counts"] == {"succeeded": 1, "cancelled": 2}


def test_cancelling_the_last_queued_item_completes_the_batch(app, clock):
    job = make_job(now=clock(), task="echo", every="1h")
    batch = batches.submit_batch(job.id, {"items": "[{}]", "on_complete": "echo"}, now=clock(), actor="test")
    [item] = batch_read.items(batch.id)
    executions.cancel_execution(item.id, now=clock(), actor="ops")
    assert view(batch.id).status.value == "failed"  # nothing succeeded
    assert len(on_complete_runs(batch.id)) == 1


def test_items_cancelled_by_disabling_the_job_are_swept_complete(app, clock):
    job = make_job(now=clock(), task="echo", every="1h")
    batch = batches.submit_batch(job.id, {"items": "[{}, {}]", "on_complete": "echo"}, now=clock(), actor="test")
    jobs.disable_job(job.id, now=clock(), actor="ops")
    assert view(batch.id).batch.completed_at is None
    Scheduler(app, clock=clock).tick(clock())
    assert view(batch.id).batch.completed_at is not None
    assert len(on_complete_runs(batch.id)) == 1
    db.session.rollback()
    assert db.session.scalars(select(Event.payload).where(Event.type == "batch_completed")).all() == [
        {"batch_id": batch.id, "status": "failed"}
    ]


def test_the_ledger_stays_clean_with_batches(app, clock):
    job = make_job(now=clock(), task="echo", every="1h", max_attempts=1)
    batches.submit_batch(job.id, {"items": twenty_items_three_failing(), "on_complete": "echo"}, now=clock(), actor="t")
    drain(app, clock, slots=8)
    db.session.rollback()
    report = verify(now=clock())
    assert report.ok, report.violations


def test_two_workers_ending_the_last_items_at_once_complete_the_batch_exactly_once(pg_app, clock):
    """PostgreSQL, real concurrent transactions: each records one of the last two items and follows
    up before the other commits; the batch lock makes the second see both ended."""
    job = make_job(now=clock(), task="echo", every="1h")
    batch = batches.submit_batch(job.id, {"items": "[{}, {}]", "on_complete": "echo"}, now=clock(), actor="test")
    started = {}
    for worker in ("w1", "w2"):
        with write_transaction(db.engine) as conn:
            turn = store_for(conn).record_and_claim(
                conn, [], worker_id=worker, now=clock(), limit=1, queue_ids=None, lease_seconds=60, buffer_seconds=30
            )
            [(item, number)] = turn.started
            started[worker] = Finished(item.id, number, Outcome(AttemptStatus.SUCCEEDED, 0, "", ""), None)
    barrier = threading.Barrier(2)
    results, errors = {}, []

    def finish(worker: str) -> None:
        try:
            with pg_app.app_context(), write_transaction(db.engine) as conn:
                store_for(conn).record_and_claim(
                    conn,
                    [started[worker]],
                    worker_id=worker,
                    now=clock(),
                    limit=0,
                    queue_ids=None,
                    lease_seconds=60,
                    buffer_seconds=30,
                )
                barrier.wait(timeout=10)  # both items recorded, neither committed
                results[worker] = callbacks.after_final(conn, [started[worker].execution_id], now=clock())
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=finish, args=(w,)) for w in ("w1", "w2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not errors, errors
    assert sorted(len(r.batches) for r in results.values()) == [0, 1]
    assert len(on_complete_runs(batch.id)) == 1
    assert view(batch.id).status.value == "succeeded"
