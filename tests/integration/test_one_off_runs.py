"""One-off runs on SQLite and PostgreSQL: an execution of a task with no job, claimed, run,
retried, timed out, dead-lettered and expired like any other, under its queue's pause and
limit, listed by task, scoped by its own project, and created all-or-nothing in lists."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import Alert, DeadLetter, Execution
from app.services.caller import Caller
from app.services.engine.scheduler import Scheduler
from app.services.engine.worker import Worker
from app.services.errors import NotFound, ValidationFailed
from app.services.read.console_lists import ExecutionFilters, executions_query
from app.services.use_cases import executions, one_off_runs, queues
from tests.factories import make_job


def fresh(execution_id: int) -> Execution:
    db.session.rollback()
    return db.session.get(Execution, execution_id)


def drain(app, clock, **kwargs):
    return Worker(app, worker_id=kwargs.pop("worker_id", "w-one-off"), clock=clock, **kwargs).run(burst=True)


def run(data, clock, **kwargs):
    return one_off_runs.create_run(data, now=clock(), actor="test", **kwargs)


def count() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(Execution))


def test_a_one_off_run_has_no_job_and_runs_its_task_with_its_config(app, clock):
    created = run({"task": "echo", "config": {"message": "hello"}}, clock)
    row = created.execution
    assert created.created and row.job_id is None and row.task == "echo" and row.project_id is not None
    assert (row.status, row.trigger, row.exclusive, row.queue) == ("pending", "manual", False, "default")
    assert row.timeout_seconds == app.config["DEFAULT_JOB_TIMEOUT_SECONDS"]
    assert drain(app, clock).claimed == 1
    done = fresh(row.id)
    assert done.status == "succeeded" and json.loads(done.output) == {"message": "hello"}
    assert [a.status for a in done.attempt_rows] == ["succeeded"]


def test_a_delayed_one_off_run_waits_for_its_time(app, clock):
    row = run({"task": "always_succeed", "in": "30s"}, clock).execution
    assert row.available_at == clock() + timedelta(seconds=30)
    clock.advance(seconds=29)
    assert drain(app, clock).claimed == 0
    clock.advance(seconds=1)
    assert drain(app, clock).claimed == 1
    assert fresh(row.id).status == "succeeded"


def test_a_failing_one_off_run_is_retried_then_dead_lettered_with_an_alert_of_its_project(app, clock):
    row = run({"task": "always_fail", "max_attempts": 2}, clock).execution
    drain(app, clock)
    assert fresh(row.id).status == "retry_scheduled"
    clock.advance(seconds=60)  # past the default backoff (10 s)
    drain(app, clock)
    done = fresh(row.id)
    assert (done.status, done.attempts) == ("failed", 2)
    [dead] = db.session.scalars(select(DeadLetter).where(DeadLetter.execution_id == row.id)).all()
    assert dead.job_id is None
    [alert] = db.session.scalars(select(Alert).where(Alert.execution_id == row.id)).all()
    assert alert.kind == "dead_letter" and alert.project_id == row.project_id and alert.job_id is None


def test_a_one_off_run_times_out_at_its_own_timeout(app, clock):
    row = run({"task": "sleep_for_seconds", "config": {"seconds": 30}, "timeout_seconds": 1, "max_attempts": 1}, clock)
    drain(app, clock)
    done = fresh(row.execution.id)
    assert done.status == "timed_out"


def test_a_one_off_run_follows_its_queue_pause_and_limit(app, clock):
    queues.add_queue({"name": "narrow", "concurrency_limit": 1}, now=clock(), actor="test")
    first = run({"task": "always_succeed", "queue": "narrow"}, clock).execution
    second = run({"task": "always_succeed", "queue": "narrow"}, clock).execution
    queues.pause_queue("narrow", now=clock(), actor="test", reason="maintenance")
    assert drain(app, clock).claimed == 0
    queues.resume_queue("narrow", now=clock(), actor="test")
    assert drain(app, clock).claimed == 2  # one at a time: the second after the first gave its slot back
    assert {fresh(first.id).status, fresh(second.id).status} == {"succeeded"}


def test_an_unknown_queue_task_or_bad_config_is_refused_naming_the_field(app, clock):
    with pytest.raises(ValidationFailed) as refused:
        run({"task": "echo", "queue": "nowhere"}, clock)
    assert "unknown queue 'nowhere'" in refused.value.errors["queue"]
    with pytest.raises(ValidationFailed) as refused:
        run({"task": "no_such_task"}, clock)
    assert "task" in refused.value.errors
    with pytest.raises(ValidationFailed) as refused:
        run({"task": "sleep_for_seconds", "config": {"seconds": "long"}}, clock)
    assert "config" in refused.value.errors
    with pytest.raises(ValidationFailed) as refused:
        run({"task": "echo", "in": "30s", "at": "2026-06-01T13:00:00Z"}, clock)
    assert "at" in refused.value.errors
    assert count() == 0


def test_the_same_idempotency_key_gives_the_first_run_back(app, clock):
    first = run({"task": "echo", "idempotency_key": "report-42"}, clock)
    again = run({"task": "echo", "idempotency_key": "report-42"}, clock)
    assert first.created and not again.created and again.execution.id == first.execution.id
    assert count() == 1


def test_a_list_is_all_or_nothing_and_names_the_bad_item(app, clock):
    items = [{"task": "echo", "config": {"message": str(n)}} for n in range(20)]
    items[7] = {"task": "sleep_for_seconds", "config": {"seconds": "x"}}
    with pytest.raises(ValidationFailed) as refused:
        one_off_runs.create_runs(items, now=clock(), actor="test")
    assert list(refused.value.errors) == ["[7].config"]
    items[7] = {"task": "echo", "queue": "nowhere"}
    with pytest.raises(ValidationFailed) as refused:
        one_off_runs.create_runs(items, now=clock(), actor="test")
    assert list(refused.value.errors) == ["[7].queue"]
    assert count() == 0
    items[7] = {"task": "echo"}
    created = one_off_runs.create_runs(items, now=clock(), actor="test")
    assert len(created) == 20 and all(item.created for item in created) and count() == 20


def test_a_list_of_a_thousand_is_one_transaction(app, clock):
    items = [{"task": "echo", "config": {"message": str(n)}} for n in range(1000)]
    items[999] = {"task": "echo", "priority": 5000}  # the last one is out of range: nothing is created
    with pytest.raises(ValidationFailed) as refused:
        one_off_runs.create_runs(items, now=clock(), actor="test")
    assert list(refused.value.errors) == ["[999].priority"]
    assert count() == 0
    items[999] = {"task": "echo"}
    assert len(one_off_runs.create_runs(items, now=clock(), actor="test")) == 1000
    assert count() == 1000
    with pytest.raises(ValidationFailed):
        one_off_runs.create_runs(items + [{"task": "echo"}], now=clock(), actor="test")


def test_lists_filter_by_task_and_show_one_off_runs_beside_jobs(app, clock):
    job = make_job(now=clock(), task="echo", every="1h")
    from app.services.use_cases import runs as job_runs

    of_job = job_runs.trigger_run(job.id, {}, now=clock(), actor="test")
    one_off = run({"task": "echo"}, clock).execution
    other = run({"task": "always_succeed"}, clock).execution
    listed = executions.list_executions(task="echo")
    assert {e.id for e in listed} == {of_job.id, one_off.id}
    assert {e.id for e in executions.list_executions()} == {of_job.id, one_off.id, other.id}
    rows = db.session.execute(executions_query(ExecutionFilters(task="always_succeed"))).all()
    assert [(r.id, r.job_id, r.task) for r in rows] == [(other.id, None, "always_succeed")]


def test_tenancy_scopes_a_one_off_run_by_its_own_project(app, clock):
    from app.services.use_cases import tenancy

    system = Caller.system()
    tenancy.add_organization("acme", now=clock(), caller=system)
    acme = tenancy.add_project("acme", "web", now=clock(), caller=system)
    mine = run({"task": "echo", "project": "acme/web"}, clock).execution
    theirs = run({"task": "echo"}, clock).execution
    assert mine.project_id == acme.id
    narrowed = Caller.cli(project_id=acme.id)
    assert {e.id for e in executions.list_executions(caller=narrowed)} == {mine.id}
    with pytest.raises(NotFound):
        executions.get_execution(theirs.id, caller=narrowed)
    with pytest.raises(NotFound):
        run({"task": "echo", "project": "nobody/nothing"}, clock)


def test_retry_of_a_finished_one_off_run_is_a_new_one_off_run(app, clock):
    row = run({"task": "always_fail", "max_attempts": 1, "config": {}}, clock).execution
    drain(app, clock)
    assert fresh(row.id).status == "failed"
    retried = executions.retry_execution(row.id, now=clock(), actor="test")
    assert (retried.job_id, retried.task, retried.trigger, retried.retry_of_id) == (
        None,
        "always_fail",
        "retry",
        row.id,
    )


def test_cancel_a_waiting_one_off_run(app, clock):
    row = run({"task": "echo", "in": "1h"}, clock).execution
    cancelled = executions.cancel_execution(row.id, now=clock(), actor="test")
    assert cancelled.status == "cancelled"


def test_queued_ttl_expires_a_one_off_run_and_result_ttl_prunes_it(app, clock):
    app.config["DEFAULT_QUEUED_TTL_SECONDS"] = 60
    app.config["DEFAULT_SUCCESS_TTL_SECONDS"] = 0
    waiting = run({"task": "echo", "in": "1s"}, clock).execution
    assert waiting.queued_ttl_seconds == 60
    clock.advance(seconds=62)
    Scheduler(app, clock=clock).tick()
    assert fresh(waiting.id).status == "expired"
    done = run({"task": "echo"}, clock).execution
    drain(app, clock)
    from app.services.engine.retention import prune_history

    report = prune_history(now=clock() + timedelta(seconds=5))
    assert report["by_job"] == {"one-off": 1}
    assert fresh(done.id) is None  # success TTL 0: gone at the next retention pass
