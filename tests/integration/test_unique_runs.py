"""Unique jobs on SQLite and PostgreSQL: while a run of the job's key is pending or running, a
trigger returns that run (`deduplicated`) and a scheduled occurrence is recorded as missed
naming it; once it has ended, the key is free again. The partial unique index decides, so
twenty triggers racing on real connections from several processes create one run."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, text

from app.extensions import db
from app.models import Event, Execution
from app.services.engine.scheduler import Scheduler
from app.services.engine.worker import Worker
from app.services.errors import ValidationFailed
from app.services.read.ledger import verify
from app.services.use_cases import jobs, runs
from tests.factories import make_due_job, make_job, make_user
from tests.helpers.api import PASSWORD, ApiClient
from tests.helpers.databases import app_env_for
from tests.helpers.racers import race_triggers


def events(type_: str) -> list[Event]:
    db.session.rollback()
    return list(db.session.scalars(select(Event).where(Event.type == type_).order_by(Event.id)))


def test_a_second_trigger_returns_the_pending_run_until_it_has_ended(app, clock):
    job = make_job(now=clock(), every="1h", unique=True)
    first = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    assert (first.status, first.deduplicated, first.unique_key) == ("pending", False, f"job:{job.id}")

    second = runs.trigger_run(job.id, {"in": "5m"}, now=clock(), actor="someone")
    assert (second.id, second.deduplicated) == (first.id, True)
    [event] = events("deduplicated")
    assert (event.job_id, event.execution_id, event.actor) == (job.id, first.id, "someone")
    assert len(list(db.session.scalars(select(Execution.id)))) == 1

    Worker(app, worker_id="w-unique", clock=clock).run(burst=True)
    db.session.rollback()
    assert db.session.get(Execution, first.id).status == "succeeded"
    third = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    assert (third.deduplicated, third.id != first.id) == (False, True)


def test_a_job_that_is_not_unique_queues_every_trigger(app, clock):
    job = make_job(now=clock(), every="1h", overlap_policy="queue")
    ids = {runs.trigger_run(job.id, {}, now=clock(), actor="test").id for _ in range(3)}
    assert len(ids) == 3 and not events("deduplicated")


def test_a_named_key_is_shared_by_the_jobs_of_a_project_that_name_it(app, clock):
    export = make_job(now=clock(), every="1h", unique=True, unique_key="orders")
    rebuild = make_job(now=clock(), every="1h", unique=True, unique_key="orders")
    other = make_job(now=clock(), every="1h", unique=True)
    first = runs.trigger_run(export.id, {}, now=clock(), actor="test")
    assert runs.trigger_run(rebuild.id, {}, now=clock(), actor="test").id == first.id
    assert not runs.trigger_run(other.id, {}, now=clock(), actor="test").deduplicated


def test_a_unique_key_needs_unique_and_is_refused_otherwise(app, clock):
    with pytest.raises(ValidationFailed) as refused:
        make_job(now=clock(), unique_key="orders")
    assert refused.value.errors == {"unique_key": "a unique key needs unique: true"}


def test_a_scheduled_occurrence_while_a_run_waits_is_missed_naming_it_and_the_ledger_balances(app, clock):
    job = make_due_job(next_run_at=clock(), every="1m", unique=True, overlap_policy="allow")
    held = runs.trigger_run(job.id, {}, now=clock(), actor="test")
    scheduler = Scheduler(app, scheduler_id="s-unique", clock=clock)
    report = scheduler.tick(clock())
    assert (report.created, report.missed) == (0, 1)
    db.session.rollback()
    [occurrence] = db.session.scalars(select(Execution).where(Execution.trigger == "schedule"))
    assert occurrence.status == "missed"
    assert occurrence.reason == f"deduplicated: execution {held.id} holds the unique key"
    [event] = events("deduplicated")
    assert (event.execution_id, event.payload["trigger"]) == (held.id, "schedule")
    assert db.session.get(type(job), job.id).runs_created == 0

    Worker(app, worker_id="w-unique", clock=clock).run(burst=True)
    clock.advance(minutes=1)
    assert scheduler.tick(clock()).created == 1  # the key is free again
    assert verify(now=clock()).ok


def test_cli_and_api_report_a_deduplicated_trigger(app, clock):
    job = make_job(every="1h", unique=True)
    runner = app.test_cli_runner()
    created = runner.invoke(args=["job", "trigger", str(job.id), "--json"])
    assert created.exit_code == 0, created.output
    first = json.loads(created.output)
    assert first["deduplicated"] is False
    again = json.loads(runner.invoke(args=["job", "trigger", str(job.id), "--json"]).output)
    assert (again["id"], again["deduplicated"], again["status"]) == (first["id"], True, "pending")
    text_answer = runner.invoke(args=["job", "trigger", str(job.id)]).output
    assert f"Deduplicated: job {job.id}" in text_answer and f"execution {first['id']} is already pending" in text_answer

    make_user("operator", PASSWORD, role="operator")
    api_client = ApiClient(app)
    api_client.login("operator")
    answer = api_client.post(f"/api/v1/jobs/{job.id}/trigger", json={})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    assert (answer.json["id"], answer.json["deduplicated"]) == (first["id"], True)


def test_unique_round_trips_through_edit(app, clock):
    job = make_job(now=clock(), every="1h")
    edited = jobs.update_job(job.id, {"unique": True, "rate_limit": "5 / minutes"}, now=clock(), actor="test")
    assert (edited.unique, edited.unique_key, edited.rate_limit) == (True, None, "5/minute")


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_twenty_triggers_racing_from_four_processes_create_one_run(pg_app, pg_url, tmp_path):
    job = make_job(every="1h", unique=True, overlap_policy="allow")
    env = app_env_for(pg_url, tmp_path / "instance")
    answers = race_triggers(env, job.id, processes=4, threads=5, report_dir=tmp_path / "race")
    assert len(answers) == 20
    ids = {answer["id"] for answer in answers}
    assert len(ids) == 1, answers
    assert sum(not answer["deduplicated"] for answer in answers) == 1
    db.session.rollback()
    assert db.session.execute(text("SELECT count(*) FROM executions")).scalar() == 1
    assert len(events("deduplicated")) == 19


def test_flask_job_add_and_queue_add_take_the_new_fields(app):
    runner = app.test_cli_runner()
    added = runner.invoke(
        args=[
            "job",
            "add",
            "export",
            "always_succeed",
            "interval",
            "--every",
            "1h",
            "--unique",
            "true",
            "--unique-key",
            "orders",
            "--rate-limit",
            "10/minute",
            "--json",
        ]
    )
    assert added.exit_code == 0, added.output
    job = json.loads(added.output)
    assert (job["unique"], job["unique_key"], job["rate_limit"]) == (True, "orders", "10/minute")
    refused = runner.invoke(
        args=["job", "add", "x", "always_succeed", "interval", "--every", "1h", "--rate-limit", "9/day"]
    )
    assert refused.exit_code == 1 and "rate_limit: must be N/second, N/minute or N/hour" in refused.output
    queue = runner.invoke(args=["queue", "add", "partner", "--rate-limit", "5/second", "--json"])
    assert queue.exit_code == 0, queue.output
    assert json.loads(queue.output)["rate_window"] == {"limit": "5/second", "starts_in_window": 0, "room": 5}
    cleared = runner.invoke(args=["queue", "edit", "partner", "--rate-limit", "none", "--json"])
    assert json.loads(cleared.output)["rate_limit"] is None
