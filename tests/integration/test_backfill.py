"""Backfill: the dry run equals the real run; no duplicates, even run twice or over scheduled runs."""

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import Event, Execution
from app.services.engine.scheduler import Scheduler
from app.services.errors import Conflict, ValidationFailed
from app.services.use_cases import jobs
from app.services.use_cases.backfill import backfill_job
from tests.factories import make_job, utc

T0 = utc(2026, 6, 1, 0, 0)
NOW = utc(2026, 6, 2, 0, 0)


def count_runs(job_id):
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(Execution).where(Execution.job_id == job_id))


def strip(plan):
    return [(item["scheduled_for"], item["action"]) for item in plan.to_json()["occurrences"]]


def test_dry_run_equals_the_real_run_and_a_second_run_adds_nothing(app):
    job = make_job(now=T0 - timedelta(hours=1), every="1h", overlap_policy="allow")
    # The scheduler already ran the 02:00 occurrence.
    Scheduler(app, scheduler_id="s", clock=lambda: T0 + timedelta(hours=2)).tick(T0 + timedelta(hours=2))
    assert count_runs(job.id) == 1
    window = dict(start=T0, end=T0 + timedelta(hours=5), now=NOW, actor="tester")
    dry = backfill_job(job.id, dry_run=True, **window)
    assert count_runs(job.id) == 1  # nothing written
    real = backfill_job(job.id, **window)
    assert strip(dry) == strip(real)
    assert [a for _, a in strip(real)] == ["create", "create", "exists", "create", "create", "create"]
    assert real.created == 5 and count_runs(job.id) == 6
    rows = db.session.scalars(select(Execution).where(Execution.trigger == "backfill")).all()
    assert len(rows) == 5 and all(r.status == "pending" and r.available_at == NOW for r in rows)
    again = backfill_job(job.id, **window)
    assert again.created == 0 and [a for _, a in strip(again)] == ["exists"] * 6
    assert count_runs(job.id) == 6
    events = db.session.scalars(select(Event).where(Event.type == "job_backfilled")).all()
    assert [e.payload["created"] for e in events] == [5, 0] and events[0].actor == "tester"


def test_max_caps_and_the_next_run_continues(app):
    job = make_job(now=T0 - timedelta(hours=1), every="1h", overlap_policy="queue")
    window = dict(start=T0, end=T0 + timedelta(hours=4), now=NOW, actor="tester", max_runs=2)
    first = backfill_job(job.id, **window)
    assert first.created == 2 and first.capped
    second = backfill_job(job.id, **window)
    assert second.created == 2 and second.capped
    third = backfill_job(job.id, **window)
    assert third.created == 1 and not third.capped
    assert count_runs(job.id) == 5
    assert all(r.exclusive for r in db.session.scalars(select(Execution)).all())


def test_overlap_skip_runs_one_and_records_the_rest_missed(app):
    job = make_job(now=T0 - timedelta(hours=1), every="1h")
    plan = backfill_job(job.id, start=T0, end=T0 + timedelta(hours=2), now=NOW, actor="t", overlap="skip")
    assert [a for _, a in strip(plan)] == ["create", "missed", "missed"]
    db.session.rollback()
    statuses = [r.status for r in db.session.scalars(select(Execution).order_by(Execution.scheduled_for)).all()]
    assert statuses == ["pending", "missed", "missed"]


def test_refusals_write_nothing(app):
    job = make_job(now=T0 - timedelta(hours=1), every="1h")
    with pytest.raises(ValidationFailed, match="past"):
        backfill_job(job.id, start=T0, end=NOW + timedelta(hours=1), now=NOW, actor="t")
    with pytest.raises(ValidationFailed, match="ends before"):
        backfill_job(job.id, start=NOW, end=T0, now=NOW, actor="t")
    jobs.disable_job(job.id, now=NOW, actor="t")
    with pytest.raises(Conflict, match="disabled"):
        backfill_job(job.id, start=T0, end=NOW, now=NOW, actor="t")
    assert count_runs(job.id) == 0
