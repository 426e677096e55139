"""DELETE /api/v1/queues/{id}: an unused queue goes; the project's `default` queue and a queue
jobs use are refused with 409 and a problem document, and nothing changes."""

from __future__ import annotations

from sqlalchemy import func, select

from app.extensions import db
from app.models import AuditEvent, Event, Queue
from tests.factories import make_job, make_queue


def _default_queue() -> Queue:
    db.session.rollback()
    return db.session.scalars(select(Queue).where(Queue.name == "default").order_by(Queue.id)).first()


def _count(model) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model))


def test_the_default_queue_cannot_be_deleted_and_nothing_changes(app, api, people):
    default = _default_queue()
    api.login("admin")
    events, audited = _count(Event), _count(AuditEvent)
    refused = api.delete(f"/api/v1/queues/{default.id}")
    assert refused.status_code == 409, refused.get_data(as_text=True)
    assert refused.mimetype == "application/problem+json"
    assert refused.get_json()["detail"] == "the default queue cannot be deleted"
    assert _default_queue() is not None and _default_queue().id == default.id
    assert (_count(Event), _count(AuditEvent)) == (events, audited)


def test_a_queue_jobs_use_is_refused_and_an_unused_one_is_deleted(app, api, people):
    busy = make_queue("busy")
    make_job("nightly", queue="busy")
    spare = make_queue("spare")
    api.login("admin")
    refused = api.delete(f"/api/v1/queues/{busy.id}")
    assert refused.status_code == 409
    assert "is used by 1 job" in refused.get_json()["detail"]
    assert api.delete(f"/api/v1/queues/{spare.id}").status_code == 204
    db.session.rollback()
    assert sorted(db.session.scalars(select(Queue.name))) == ["busy", "default"]
