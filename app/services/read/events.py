"""The event log as operators read it: `/events`, `flask event list` and `GET /api/v1/events`.

Newest first, filtered by kind, job, queue, worker and time, one page at a time by a cursor (the
id of the last event shown: stable while new events arrive, and cheap at any depth, unlike an
offset). A caller narrowed to an organization sees the events of its jobs only; events that
belong to no job (retention passes, users, organizations) are the site's. Kind and job are
indexed paths: `(type, id)`, `(job_id, id)` and `(job_id, type, id)` walk backwards from the
cursor, and so does `(worker_id, id)`, which holds only the events that name a worker (the writers
copy `worker_id` out of the payload). A time range reads `created_at`; `until` alone, far back,
walks back from the newest event (docs/performance.md, "The events viewer at 1M events").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from app.clock import iso_z
from app.domain.event_kinds import WORKER_ID_MAX, explain_kind, worker_named
from app.extensions import db
from app.models import Event, Job
from app.services import scoping
from app.services.caller import Caller

PAGE_DEFAULT = 50
PAGE_MAX = 500
WORKER_MAX = WORKER_ID_MAX


@dataclass(frozen=True)
class EventFilters:
    kind: str | None = None
    job_id: int | None = None
    queue_id: int | None = None
    worker: str | None = None  # the worker the event names (events.worker_id)
    since: datetime | None = None
    until: datetime | None = None  # exclusive


@dataclass(frozen=True)
class EventPage:
    items: list[Event]
    next_cursor: int | None  # the cursor of the next (older) page; None on the last


def events_query(filters: EventFilters, caller: Caller | None = None):
    """The events matching `filters` that the caller may see, newest first."""
    query = select(Event).order_by(Event.id.desc())
    if filters.kind:
        query = query.where(Event.type == filters.kind)
    if filters.job_id is not None:
        query = query.where(Event.job_id == filters.job_id)
    if filters.queue_id is not None:
        query = query.where(Event.job_id.in_(select(Job.id).where(Job.queue_id == filters.queue_id)))
    if filters.worker:
        query = query.where(Event.worker_id == filters.worker)
    if filters.since is not None:
        query = query.where(Event.created_at >= filters.since)
    if filters.until is not None:
        query = query.where(Event.created_at < filters.until)
    visible = scoping.job_ids(caller)
    if visible is not None:
        query = query.where(Event.job_id.in_(visible))
    return query


def event_page(
    filters: EventFilters, caller: Caller | None = None, *, cursor: int | None = None, limit: int = PAGE_DEFAULT
) -> EventPage:
    """One page of events older than `cursor` (None: the newest)."""
    query = events_query(filters, caller)
    if cursor is not None:
        query = query.where(Event.id < cursor)
    rows = list(db.session.scalars(query.limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    return EventPage(rows, rows[-1].id if more and rows else None)


def get_event(event_id: int, caller: Caller | None = None) -> Event | None:
    """One event the caller may see, or None (another organization's is not there for it)."""
    return db.session.scalar(events_query(EventFilters(), caller).where(Event.id == event_id))


def worker_of(event: Event) -> str | None:
    """The worker an event names, if any (lease recovery, cancels, a worker's own events)."""
    return worker_named(event.payload)


def event_to_dict(event: Event) -> dict[str, Any]:
    """The JSON shape of one event (`flask event list --json`, the API)."""
    return {
        "id": event.id,
        "kind": event.type,
        "created_at": iso_z(event.created_at),
        "actor": event.actor,
        "job_id": event.job_id,
        "execution_id": event.execution_id,
        "worker_id": worker_of(event),
        "payload": event.payload or {},
        "explanation": explain_kind(event.type),
    }
