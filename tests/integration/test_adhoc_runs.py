"""Ad-hoc runs on SQLite and PostgreSQL: immediate, delayed (`in`) or at an instant (`at`), with a
config override that is checked against the task's schema, stored on the execution and merged over
the job's config when the task starts."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import Event, Execution
from app.services.engine.scheduler import Scheduler
from app.services.engine.worker import Worker
from app.services.errors import Conflict, ValidationFailed
from app.services.read.ledger import verify
from app.services.use_cases import executions, jobs, runs
from tests.factories import make_job


def fresh(execution_id: int) -> Execution:
    db.session.rollback()
    return db.session.get(Execution, execution_id)


def drain(app, clock, **kwargs):
    return Worker(app, worker_id=kwargs.pop("worker_id", "w-adhoc"), clock=clock, **kwargs).run(burst=True)


def execution_count() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(Execution))


def test_a_delayed_run_does_not_start_before_its_time_and_starts_within_a_second_after(app, clock):
    job = make_job(now=clock(), task="echo", every="1h")
    execution = runs.trigger_run(job.id, {"in": "10s"}, now=clock(), actor="test")
    due = clock() + timedelta(seconds=10)
    assert (execution.status, execution.trigger) == ("pending", "manual")
    assert execution.available_at == due and execution.scheduled_for == due

    clock.advance(seconds=9, milliseconds=900)
    assert drain(app, clock).claimed == 0
    assert fresh(execution.id).status == "pending"

    clock.advance(milliseconds=100)  # exactly its time: a worker's next turn starts it
    assert drain(app, clock).claimed == 1
    row = fresh(execution.id)
    assert row.status == "succeeded"
    assert timedelta(0) <= row.started_at - due < timedelta(seconds=1)


def test_an_instant_within_the_grace_runs_now_and_one_older_is_refused(app, clock):
    job = make_job(now=clock(), task="echo", every="1h", misfire_grace_seconds=300)
    later = runs.trigger_run(job.id, {"at": "2026-06-01T13:00:00Z"}, now=clock(), actor="test")
    assert later.available_at == clock().replace(hour=13)
    local = runs.trigger_run(job.id, {"at": "2026-06-01T13:58:00+02:00"}, now=clock(), actor="test")
    assert local.available_at == clock()  # 11:58 UTC is two minutes past, inside the grace: it runs now
    with pytest.raises(ValidationFailed, match="in the past"):
        runs.trigger_run(job.id, {"at": "2026-06-01T12:30:00+02:00"}, now=clock(), actor="test")
    naive = runs.trigger_run(job.id, {"at": "2026-06-01T12:00:05"}, now=clock(), actor="test")
    assert naive.available_at == clock() + timedelta(seconds=5)  # no offset: UTC


def test_a_config_override_reaches_the_task_and_is_stored_on_the_execution(app, clock):
    job = make_job(now=clock(), task="echo", every="1h", config={"message": "from the job"})
    plain = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    override = runs.trigger_run(
        job.id, {"config_override": '{"message": "from the override"}'}, now=clock(), actor="test"
    )
    assert override.config_override == {"message": "from the override"} and plain.config_override is None
    drain(app, clock)
    assert json.loads(fresh(plain.id).output) == {"message": "from the job"}
    assert json.loads(fresh(override.id).output) == {"message": "from the override"}
    assert fresh(override.id).config_override == {"message": "from the override"}
    db.session.rollback()
    [event] = db.session.scalars(
        select(Event).where(Event.type == "job_triggered", Event.execution_id == override.id)
    ).all()
    assert event.payload["config_override"] == {"message": "from the override"}


def test_an_override_is_merged_over_the_job_config_key_by_key(app, clock):
    job = make_job(now=clock(), task="echo", every="1h", config={"message": "kept"}, max_attempts=1)
    execution = runs.trigger_run(job.id, {"config_override": {"fail": True}}, now=clock(), actor="test")
    drain(app, clock)
    row = fresh(execution.id)
    assert row.status == "failed"
    assert json.loads(row.output.splitlines()[0]) == {"fail": True, "message": "kept"}
    assert "kept" in row.error


@pytest.mark.parametrize(
    "data, field, fragment",
    [
        ({"config_override": {"seconds": 1}}, "config_override", "invalid config for task 'echo'"),
        ({"config_override": {"message": 5}}, "config_override", "message"),
        ({"config_override": "{nope"}, "config_override", "not valid JSON"),
        ({"config_override": "[1, 2]"}, "config_override", "must be a JSON object"),
        ({"in": "soon"}, "in", "soon"),
        ({"in": "0s"}, "in", ""),
        ({"in": "5m", "at": "2026-06-01T13:00:00Z"}, "at", "not both"),
        ({"at": "tomorrow"}, "at", "ISO 8601"),
        ({"at": "9999-01-01T00:00:00Z"}, "at", "within 3650 days"),
    ],
)
def test_bad_runs_are_refused_and_nothing_is_stored(app, clock, data, field, fragment):
    job = make_job(now=clock(), task="echo", every="1h")
    before = execution_count()
    with pytest.raises(ValidationFailed) as refused:
        runs.trigger_run(job.id, data, now=clock(), actor="test")
    assert field in refused.value.errors and fragment in refused.value.errors[field]
    assert execution_count() == before


def test_a_disabled_job_cannot_be_triggered(app, clock):
    job = make_job(now=clock(), task="echo", every="1h", enabled=False)
    with pytest.raises(Conflict):
        runs.trigger_run(job.id, {"in": "1m"}, now=clock(), actor="test")


def test_a_delayed_run_can_be_cancelled_and_never_runs(app, clock):
    job = make_job(now=clock(), task="echo", every="1h")
    execution = runs.trigger_run(job.id, {"in": "1m"}, now=clock(), actor="test")
    cancelled = executions.cancel_execution(execution.id, now=clock(), actor="ops", reason="not today")
    assert cancelled.status == "cancelled"
    clock.advance(minutes=2)
    assert drain(app, clock).claimed == 0
    assert fresh(execution.id).attempts == 0


def test_a_waiting_delayed_run_does_not_make_a_skip_job_miss_its_schedule(app, clock):
    job = make_job(now=clock(), task="echo", every="1m", overlap_policy="skip")
    runs.trigger_run(job.id, {"in": "1h"}, now=clock(), actor="test")
    clock.advance(minutes=1)
    Scheduler(app, clock=clock).tick(clock())
    db.session.rollback()
    scheduled = db.session.scalars(
        select(Execution).where(Execution.job_id == job.id, Execution.trigger == "schedule")
    ).all()
    assert [row.status for row in scheduled] == ["pending"]  # not missed for overlap


def test_disabling_the_job_cancels_its_delayed_runs(app, clock):
    job = make_job(now=clock(), task="echo", every="1h")
    execution = runs.trigger_run(job.id, {"in": "1h"}, now=clock(), actor="test")
    jobs.disable_job(job.id, now=clock(), actor="test")
    assert fresh(execution.id).status == "cancelled"


def test_the_ledger_stays_clean_with_ad_hoc_runs(app, clock):
    job = make_job(now=clock(), task="echo", every="1h", max_attempts=1)
    runs.trigger_run(job.id, {"config_override": {"fail": True}}, now=clock(), actor="test")
    runs.trigger_run(job.id, {}, now=clock(), actor="test")
    runs.trigger_run(job.id, {"in": "1d"}, now=clock(), actor="test")
    drain(app, clock)
    db.session.rollback()
    report = verify(now=clock())
    assert report.ok, report.violations
