"""The scheduler applies jitter to available_at; the occurrence keeps its nominal identity."""

from datetime import timedelta

from sqlalchemy import select

from app.domain.jitter import jitter_offset
from app.extensions import db
from app.models import Execution
from app.services.engine.scheduler import Scheduler
from app.store.rows import occurrence_key
from tests.factories import make_due_job, utc

NOW = utc(2026, 6, 1, 12, 0)


def test_jitter_moves_available_at_not_the_occurrence(app):
    job = make_due_job(next_run_at=NOW, jitter_seconds=60, overlap_policy="allow")
    plain = make_due_job(next_run_at=NOW, overlap_policy="allow")
    scheduler = Scheduler(app, scheduler_id="s1", clock=lambda: NOW)
    scheduler.tick(NOW)
    Scheduler(app, scheduler_id="s2", clock=lambda: NOW).tick(NOW)  # a second scheduler adds nothing
    db.session.rollback()
    [row] = db.session.scalars(select(Execution).where(Execution.job_id == job.id)).all()
    offset = jitter_offset(job.id, 60)
    assert offset > timedelta(0)
    assert row.scheduled_for == NOW and row.idempotency_key == occurrence_key(job.id, NOW)
    assert row.available_at == NOW + offset
    [other] = db.session.scalars(select(Execution).where(Execution.job_id == plain.id)).all()
    assert other.available_at == NOW
