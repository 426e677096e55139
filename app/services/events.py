"""The event log: a structured record of what happened and who did it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime

from sqlalchemy import select

from app.domain.event_kinds import worker_named
from app.extensions import db
from app.models import Event
from app.sql.events import insert_event  # noqa: F401 - engine code's writer, named here with the rest

log = logging.getLogger("cronwell.events")

# Set while a dry run does its writes only to roll them back: its events are never stored, so
# they are not logged either (a log line saying `job_created` would claim what did not happen).
_rehearsing: ContextVar[bool] = ContextVar("cronwell_events_rehearsing", default=False)


@contextmanager
def rehearsal() -> Iterator[None]:
    """Within it, record_event adds events to the session (to be rolled back) but logs nothing."""
    token = _rehearsing.set(True)
    try:
        yield
    finally:
        _rehearsing.reset(token)


def record_event(
    type_: str,
    *,
    now: datetime,
    actor: str = "system",
    job_id: int | None = None,
    execution_id: int | None = None,
    session=None,
    **payload,
) -> Event:
    """Add an Event to the session (committed with the caller's transaction) and log it."""
    event = Event(
        type=type_,
        actor=actor,
        job_id=job_id,
        execution_id=execution_id,
        worker_id=worker_named(payload),
        payload=payload,
        created_at=now,
    )
    (session or db.session).add(event)
    if _rehearsing.get():
        return event
    # Payload keys go under one field: they could clash with LogRecord attributes ("name"...).
    log.info(
        type_,
        extra={"event": type_, "actor": actor, "job_id": job_id, "execution_id": execution_id, "payload": payload},
    )
    return event


def list_events(type_: str, *, job_id: int | None = None, execution_id: int | None = None) -> list[Event]:
    """The events of one type, oldest first, optionally of one job and/or one execution."""
    query = select(Event).where(Event.type == type_).order_by(Event.id)
    if job_id is not None:
        query = query.where(Event.job_id == job_id)
    if execution_id is not None:
        query = query.where(Event.execution_id == execution_id)
    return list(db.session.scalars(query))
