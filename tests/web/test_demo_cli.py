"""`flask demo single-fire | misfire | timeout` through Click's runner, on SQLite and PostgreSQL.

Each demo must pass on a healthy engine, print what it proved, clean up after itself, leave the
operator's own jobs alone, and exit 1 with one line on stderr when its claim does not hold.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import select

from app.clock import utcnow
from app.extensions import db
from app.models import Alert, Event, Execution, Heartbeat, Job
from app.services.engine import scheduler as scheduler_service
from tests.factories import make_due_job

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def cli(app):
    runner = app.test_cli_runner()
    return lambda *args: runner.invoke(args=list(args))


def ok(result) -> str:
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result.stdout


def assert_cleaned_up() -> None:
    db.session.rollback()
    assert db.session.scalars(select(Job.name).where(Job.name.like("demo-%"))).all() == []
    assert db.session.scalars(select(Execution.id)).all() == []
    assert db.session.scalars(select(Heartbeat.id).where(Heartbeat.id.like("demo-%"))).all() == []
    assert db.session.scalars(select(Alert.id)).all() == []


@pytest.mark.slow
def test_single_fire_races_schedulers_and_workers_and_each_occurrence_runs_once(app, backend, cli):
    out = ok(cli("demo", "single-fire"))
    if backend == "postgres":
        assert "FOR UPDATE SKIP LOCKED" in out and "starting gate" in out
    else:
        assert "SQLite cannot show skip-locked" in out and "unique-key guarantee" in out
    assert "4 jobs, 12 occurrences due" in out
    assert re.search(r"3 schedulers ticking at once created \d+ \+ \d+ \+ \d+ = 12 executions", out), out
    assert "creates nothing: the unique (job, scheduled_for) key" in out
    assert re.search(
        r"3 workers racing claimed \d+ \+ \d+ \+ \d+ = 12; every one of the 12 executions "
        r"succeeded with exactly one attempt",
        out,
    ), out
    assert out.rstrip().endswith("each execution ran exactly once.")
    assert_cleaned_up()
    # The demo's writes are in the audit trail like any operator's.
    actors = db.session.scalars(select(Event.actor).where(Event.type == "job_deleted")).all()
    assert actors == ["demo"] * 4


def test_misfire_demo_shows_each_policy_without_touching_other_jobs(app, cli):
    overdue = make_due_job(next_run_at=utcnow() - timedelta(minutes=10), name="operators-own")
    out = ok(cli("demo", "misfire"))
    assert "injected clock" in out
    assert re.search(r"coalesce +1 run for the latest occurrence \(-30s\); 1 misfire event folds the other 4", out)
    assert re.search(
        r"catch_up +5 runs, one per occurrence \(-4m30s -3m30s -2m30s -1m30s -30s\); 4 marked catch_up", out
    )
    assert re.search(r"skip +4 recorded missed, 1 run \(-30s, within the grace\)", out)
    assert "a second pass at the same instant finds nothing due" in out
    assert_cleaned_up()
    db.session.rollback()
    assert db.session.get(Job, overdue.id).next_run_at == overdue.next_run_at  # not fired by the demo


def test_a_demo_whose_claim_does_not_hold_exits_1_with_one_line_on_stderr(app, cli, monkeypatch):
    real_plan = scheduler_service.plan_occurrences
    # A broken engine that treats every misfire policy as catch_up.
    monkeypatch.setattr(scheduler_service, "plan_occurrences", lambda **kw: real_plan(**{**kw, "policy": "catch_up"}))
    result = cli("demo", "misfire")
    assert result.exit_code == 1
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith("Error: misfire demo FAILED: coalesce: got ")
    assert_cleaned_up()


@pytest.mark.slow
def test_timeout_demo_kills_retries_and_dead_letters(app, cli):
    out = ok(cli("demo", "timeout"))
    attempts = re.findall(r"attempt (\d): timed_out after (\d+\.\d+) s; task process \d+ was killed", out)
    assert [number for number, _ in attempts] == ["1", "2"], out
    assert all(1.0 <= float(took) < 10 for _, took in attempts)
    assert "retried once, then kept its truthful status timed_out and was dead-lettered with an alert" in out
    assert out.rstrip().endswith("the exhausted execution was flagged.")
    assert_cleaned_up()


def test_demo_commands_are_listed_with_examples(app, cli):
    out = ok(cli("demo", "--help"))
    for command in ("single-fire", "misfire", "timeout"):
        assert command in out
    assert "Example:" in ok(cli("demo", "misfire", "--help"))
