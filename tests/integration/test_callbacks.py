"""Callbacks on SQLite and PostgreSQL: a job's on_success / on_failure task runs as its own execution
(trigger callback, parent_id), once per final outcome (on_failure after the last attempt, not per
attempt), with the parent's outcome under `parent`; a failing callback alerts and never changes its
parent; callbacks never trigger callbacks; a second follow-up of the same outcome creates nothing."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from app.database import write_transaction
from app.extensions import db
from app.models import Alert, DeadLetter, Event, Execution
from app.services.engine import callbacks
from app.services.engine.recovery import recover_expired_leases
from app.services.engine.worker import Worker
from app.services.errors import ValidationFailed
from app.services.read.ledger import verify
from app.services.use_cases import jobs, runs
from tests.factories import make_job


def drain(app, clock, **kwargs):
    return Worker(app, worker_id=kwargs.pop("worker_id", "w-callbacks"), clock=clock, **kwargs).run(burst=True)


def children(parent_id: int) -> list[Execution]:
    db.session.rollback()
    return list(db.session.scalars(select(Execution).where(Execution.parent_id == parent_id).order_by(Execution.id)))


def fresh(execution_id: int) -> Execution:
    db.session.rollback()
    return db.session.get(Execution, execution_id)


def test_on_success_runs_once_as_its_own_execution_with_the_parents_outcome(app, clock):
    job = make_job(
        now=clock(),
        task="echo",
        every="1h",
        config={"message": "parent"},
        on_success="echo",
        on_success_config={"message": "after success"},
        on_failure="always_fail",
    )
    parent = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    drain(app, clock)
    assert fresh(parent.id).status == "succeeded"
    [callback] = children(parent.id)
    assert (callback.trigger, callback.status, callback.job_id) == ("callback", "succeeded", job.id)
    assert (callback.callback_task, callback.max_attempts, callback.exclusive) == ("echo", 1, False)
    assert callback.idempotency_key == f"callback:on_success:execution:{parent.id}"
    shown = json.loads(callback.output)
    assert shown["message"] == "after success"
    assert shown["parent"]["id"] == parent.id and shown["parent"]["status"] == "succeeded"
    assert shown["parent"]["exit_code"] == 0 and shown["parent"]["job"] == job.name
    assert children(callback.id) == []  # callbacks never trigger callbacks (its own success fires nothing)


def test_on_failure_runs_once_after_the_last_attempt_not_per_attempt(app, clock):
    job = make_job(
        now=clock(),
        task="echo",
        every="1h",
        config={"fail": True, "message": "boom"},
        max_attempts=3,
        retry_backoff_seconds=0,
        on_failure="echo",
        on_success="echo",
    )
    parent = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    drain(app, clock)
    row = fresh(parent.id)
    assert (row.status, row.attempts) == ("failed", 3)
    [callback] = children(parent.id)
    assert callback.status == "succeeded" and callback.idempotency_key.startswith("callback:on_failure:")
    shown = json.loads(callback.output)["parent"]
    assert (shown["status"], shown["attempts"], shown["exit_code"]) == ("failed", 3, row.exit_code)
    assert "boom" in shown["error"]
    db.session.rollback()
    created = db.session.scalars(select(Event).where(Event.type == "callback_created")).all()
    assert [(e.payload["parent_id"], e.payload["kind"]) for e in created] == [(parent.id, "on_failure")]


def test_a_failing_callback_alerts_and_never_changes_its_parent(app, clock):
    job = make_job(
        now=clock(),
        task="echo",
        every="1h",
        on_success="echo",
        on_success_config={"fail": True, "message": "callback broke"},
        on_failure="echo",
        alert_mode="web",
    )
    parent = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    drain(app, clock)
    parent_row = fresh(parent.id)
    assert (parent_row.status, parent_row.attempts) == ("succeeded", 1)
    [callback] = children(parent.id)
    assert (callback.status, callback.attempts) == ("failed", 1)
    assert "callback broke" in callback.error
    dead = db.session.scalars(select(DeadLetter)).all()
    assert [d.execution_id for d in dead] == [callback.id]
    [alert] = db.session.scalars(select(Alert).where(Alert.execution_id == callback.id)).all()
    assert "callback broke" in alert.message
    assert children(callback.id) == []  # its failure fires no on_failure: callbacks never trigger callbacks
    db.session.rollback()
    assert db.session.scalars(select(Execution).where(Execution.trigger == "callback")).all() == [callback]


def test_a_second_follow_up_of_the_same_outcome_creates_nothing(app, clock):
    job = make_job(now=clock(), task="echo", every="1h", on_success="echo")
    parent = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    drain(app, clock)
    assert len(children(parent.id)) == 1
    with write_transaction(db.engine) as conn:
        again = callbacks.after_final(conn, [parent.id], now=clock())
    assert again.callbacks == []
    assert len(children(parent.id)) == 1


def test_a_run_dead_lettered_by_recovery_fires_on_failure(app, clock):
    job = make_job(
        now=clock(), task="sleep_for_seconds", config={"seconds": 0.1}, every="1h", max_attempts=1, on_failure="echo"
    )
    parent = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    with write_transaction(db.engine) as conn:  # a worker claimed it and vanished
        from app.store import store_for

        store_for(conn).record_and_claim(
            conn, [], worker_id="gone", now=clock(), limit=1, queue_ids=None, lease_seconds=5, buffer_seconds=1
        )
    clock.advance(minutes=10)
    recover_expired_leases(db.engine, now=clock())
    assert fresh(parent.id).status == "dead_lettered"
    [callback] = children(parent.id)
    assert callback.status == "pending" and callback.config_override["parent"]["status"] == "dead_lettered"


def test_cancelled_runs_fire_no_callback(app, clock):
    job = make_job(now=clock(), task="echo", every="1h", on_success="echo", on_failure="echo")
    parent = runs.trigger_run(job.id, {"in": "1h"}, now=clock(), actor="test")
    from app.services.use_cases import executions

    executions.cancel_execution(parent.id, now=clock(), actor="test")
    assert children(parent.id) == []


@pytest.mark.parametrize(
    "fields, field, fragment",
    [
        ({"on_success": "no_such_task"}, "on_success", "unknown task"),
        ({"on_success": "sleep_for_seconds"}, "on_success_config", "'seconds' is required"),
        ({"on_failure": "echo", "on_failure_config": {"bogus": 1}}, "on_failure_config", "invalid config"),
        ({"on_failure_config": {"message": "x"}}, "on_failure_config", "needs a task"),
        ({"on_success_config": "{no"}, "on_success_config", "not valid JSON"),
    ],
)
def test_bad_callbacks_are_refused_at_job_creation(app, clock, fields, field, fragment):
    with pytest.raises(ValidationFailed) as refused:
        make_job(now=clock(), task="echo", every="1h", **fields)
    assert fragment in refused.value.errors[field]


def test_callbacks_can_be_set_and_cleared_by_an_edit(app, clock):
    job = make_job(now=clock(), task="echo", every="1h")
    assert (job.on_success, job.on_success_config) == (None, {})
    job = jobs.update_job(
        job.id, {"on_success": "echo", "on_success_config": '{"message": "hi"}'}, now=clock(), actor="t"
    )
    assert (job.on_success, job.on_success_config) == ("echo", {"message": "hi"})
    job = jobs.update_job(job.id, {"on_success": "", "on_success_config": "{}"}, now=clock(), actor="t")
    assert (job.on_success, job.on_success_config) == (None, {})


def test_the_ledger_stays_clean_with_callbacks(app, clock):
    ok = make_job(now=clock(), task="echo", every="1h", on_success="echo", on_success_config={"fail": True})
    bad = make_job(
        now=clock(),
        task="echo",
        every="1h",
        config={"fail": True},
        max_attempts=2,
        retry_backoff_seconds=0,
        on_failure="echo",
    )
    runs.trigger_run(ok.id, {}, now=clock(), actor="test")
    runs.trigger_run(bad.id, {}, now=clock(), actor="test")
    drain(app, clock)
    db.session.rollback()
    assert len(db.session.scalars(select(Execution).where(Execution.trigger == "callback")).all()) == 2
    report = verify(now=clock())
    assert report.ok, report.violations


def test_an_operator_retry_of_a_callback_runs_its_task_again_and_still_fires_nothing(app, clock):
    from app.services.use_cases import executions

    job = make_job(
        now=clock(),
        task="echo",
        every="1h",
        on_success="echo",
        on_success_config={"fail": True, "message": "cb"},
        on_failure="always_fail",
    )
    parent = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    drain(app, clock)
    [callback] = children(parent.id)
    assert callback.status == "failed"
    again = executions.retry_execution(callback.id, now=clock(), actor="ops")
    assert (again.trigger, again.callback_task, again.parent_id) == ("retry", "echo", parent.id)
    assert (again.max_attempts, again.config_override) == (1, callback.config_override)
    drain(app, clock)
    retried = fresh(again.id)
    assert retried.status == "failed" and json.loads(retried.output.splitlines()[0])["parent"]["id"] == parent.id
    assert children(again.id) == [] and children(callback.id) == []  # no on_failure of a callback


def test_an_operator_retry_of_an_ad_hoc_run_keeps_its_override(app, clock):
    from app.services.use_cases import executions

    job = make_job(now=clock(), task="echo", every="1h", max_attempts=1)
    first = runs.trigger_run(job.id, {"config_override": {"fail": True, "message": "x"}}, now=clock(), actor="t")
    drain(app, clock)
    db.session.rollback()
    again = executions.retry_execution(first.id, now=clock(), actor="ops")
    assert again.config_override == {"fail": True, "message": "x"} and again.callback_task is None


def test_a_callback_gets_callback_timeout_seconds_not_its_jobs_timeout(app, clock):
    app.config["CALLBACK_TIMEOUT_SECONDS"] = 1
    job = make_job(
        now=clock(),
        task="echo",
        every="1h",
        timeout_seconds=300,
        on_success="sleep_for_seconds",
        on_success_config={"seconds": 30},
    )
    parent = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    drain(app, clock)
    [callback] = children(parent.id)
    assert callback.status == "timed_out" and fresh(parent.id).status == "succeeded"
    assert callback.duration_seconds is None or callback.duration_seconds < 10


def test_failing_callbacks_never_count_as_their_jobs_failures(app, clock):
    from app.services.engine.alerting import consecutive_failures, evaluate_alerts

    job = make_job(
        now=clock(),
        task="echo",
        every="1h",
        on_success="echo",
        on_success_config={"fail": True},
        pause_after_failures=2,
        alert_after_failures=2,
    )
    for _ in range(3):
        runs.trigger_run(job.id, {}, now=clock(), actor="test")
        drain(app, clock)
    db.session.rollback()
    failed = db.session.scalars(select(Execution).where(Execution.callback_task.is_not(None))).all()
    assert [c.status for c in failed] == ["failed"] * 3
    with write_transaction(db.engine) as conn:
        assert consecutive_failures(conn, job.id, limit=5, since=None) == 0
        evaluate_alerts(conn, now=clock(), settings={})
    assert jobs.get_job(job.id).enabled  # not auto-paused by its callbacks
