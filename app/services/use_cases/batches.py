"""Batches: submit (one run of a job per item, each item a config override), list, inspect, cancel.

Items are checked all-or-nothing before anything is stored: one bad item refuses the batch. The
batch row and its items are written in one transaction. Cancel stops what has not started (queued
items end `cancelled`); items already running finish, and the batch reads `cancelled`.
"""

from __future__ import annotations

from datetime import datetime

from marshmallow import ValidationError
from sqlalchemy import select

from app import cache
from app.database import begin_write
from app.definitions.batch import load_batch
from app.definitions.job import field_messages
from app.domain.permissions import Action
from app.extensions import db
from app.models import Batch, Job
from app.services import audit_trail, scoping
from app.services.caller import Caller
from app.services.engine import callbacks, wakeups
from app.services.errors import Conflict, NotFound, ValidationFailed
from app.services.events import record_event
from app.store import store_for
from app.store.rows import batch_item_row


def _scoped(query, caller: Caller | None):
    ids = scoping.job_ids(caller)
    return query if ids is None else query.where(Batch.job_id.in_(ids))


def get_batch(batch_id: int, caller: Caller | None = None) -> Batch:
    """The batch, if the caller may see its job; NotFound otherwise (exactly as for a missing one)."""
    batch = db.session.scalar(_scoped(select(Batch).where(Batch.id == batch_id), caller))
    if batch is None:
        raise NotFound(f"batch {batch_id} does not exist")
    return batch


def list_query(*, job_id: int | None = None, caller: Caller | None = None):
    """Batches the caller may see, newest first (for lists and pagination)."""
    query = _scoped(select(Batch).order_by(Batch.id.desc()), caller)
    if job_id is not None:
        query = query.where(Batch.job_id == job_id)
    return query


def _job(job_id: int, caller: Caller | None) -> Job:
    job = db.session.scalar(scoping.jobs(select(Job).where(Job.id == job_id), caller))
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    return job


def list_batches(*, job_id: int | None = None, limit: int = 50, caller: Caller | None = None) -> list[Batch]:
    """The newest `limit` batches (of one job, when given)."""
    if job_id is not None:
        _job(job_id, caller)
    return list(db.session.scalars(list_query(job_id=job_id, caller=caller).limit(limit)))


def submit_batch(job_id: int, data: dict, *, now: datetime, actor: str, caller: Caller | None = None) -> Batch:
    """Create a batch of an enabled job: `data` holds `items` (a JSON list of objects, or its text),
    and optionally `on_complete` (a task) and `on_complete_config`."""
    if caller is not None:
        caller.require(Action.OPERATE)
    job = _job(job_id, caller)
    try:
        batch_data = load_batch(data, task=job.task, job_config=job.config)
    except ValidationError as exc:
        raise ValidationFailed(field_messages(exc)) from None
    begin_write(db.session)
    job = _job(job_id, caller)
    if not job.enabled:
        raise Conflict(f"job {job.id} ({job.name}) is disabled; enable it before submitting a batch")
    if job.steps is not None:
        raise Conflict(f"job {job.id} ({job.name}) is a workflow; a batch runs a job's own task once per item")
    items = batch_data["items"]
    batch = Batch(
        job_id=job.id,
        item_count=len(items),
        on_complete=batch_data.get("on_complete"),
        on_complete_config=batch_data.get("on_complete_config") or {},
        created_by=actor,
        created_at=now,
    )
    db.session.add(batch)
    db.session.flush()
    conn = db.session.connection()
    rows = [
        batch_item_row(job, batch_id=batch.id, index=index, config_override=item, now=now)
        for index, item in enumerate(items, start=1)
    ]
    store_for(conn).insert_executions(conn, rows)
    record_event(
        "batch_submitted",
        now=now,
        actor=actor,
        job_id=job.id,
        batch_id=batch.id,
        items=len(items),
        on_complete=batch.on_complete,
    )
    audit_trail.record_change(
        caller or actor,
        "created",
        "batch",
        batch.id,
        after={"job_id": job.id, "items": len(items), "on_complete": batch.on_complete},
        now=now,
        **audit_trail.about_job(job),
    )
    cache.invalidate_on_commit(db.session, cache.keys_for_job_change(job.id))
    wakeups.notify_on_commit(db.session, work=True)
    db.session.commit()
    return batch


def cancel_batch(batch_id: int, *, now: datetime, actor: str, caller: Caller | None = None) -> tuple[Batch, int]:
    """Cancel a batch: its items that have not started end `cancelled` (running ones finish).
    Returns the batch and how many items were cancelled."""
    if caller is not None:
        caller.require(Action.OPERATE)
    begin_write(db.session)
    batch = get_batch(batch_id, caller)
    if batch.cancelled_at is not None:
        raise Conflict(f"batch {batch_id} was already cancelled by {batch.cancelled_by}")
    if batch.completed_at is not None:
        raise Conflict(f"batch {batch_id} has already completed; nothing left to cancel")
    batch.cancelled_at, batch.cancelled_by = now, actor
    db.session.flush()
    conn = db.session.connection()
    ids = store_for(conn).cancel_queued_for_batch(conn, batch.id, now=now, reason=f"batch cancelled by {actor}")
    record_event("batch_cancelled", now=now, actor=actor, job_id=batch.job_id, batch_id=batch.id, cancelled=len(ids))
    audit_trail.record_change(
        caller or actor,
        "cancelled",
        "batch",
        batch.id,
        now=now,
        extra={"cancelled_executions": len(ids)},
        **audit_trail.about_job(batch.job),
    )
    # Nothing running: the batch is complete now (its on-complete callback, if any, is created).
    followed = callbacks.settle_batches(conn, now=now, batch_ids=[batch.id])
    cache.invalidate_on_commit(db.session, cache.keys_for_job_change(batch.job_id))
    wakeups.notify_on_commit(db.session, work=bool(followed.callbacks))
    db.session.commit()
    db.session.expire_all()
    return get_batch(batch_id, caller), len(ids)
