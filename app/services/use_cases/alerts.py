"""Alerts and dead letters: raising them (engine) and resolving them (operators).

Lists and resolves take the `caller` (None: the system): an alert is the caller's when its job is;
another organization's alert is a NotFound like a missing one; resolving needs `Action.OPERATE`."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import delete, select, update

from app.database import begin_write
from app.domain.permissions import Action
from app.extensions import db
from app.models import Alert, DeadLetter
from app.services import audit_trail, scoping
from app.services.caller import Caller
from app.services.errors import NotFound, ValidationFailed
from app.services.events import record_event

log = logging.getLogger("cronwell.alerts")


def list_alerts(*, include_resolved: bool = False, limit: int = 200, caller: Caller | None = None) -> list[Alert]:
    query = scoping.alerts(select(Alert), caller).order_by(Alert.id.desc()).limit(limit)
    if not include_resolved:
        query = query.where(Alert.resolved_at.is_(None))
    return list(db.session.scalars(query))


def dead_letters_query(caller: Caller | None = None):
    """The dead letters the caller may see, newest first (for a paged list)."""
    return scoping.dead_letters(select(DeadLetter).order_by(DeadLetter.id.desc()), caller)


def list_dead_letters(*, limit: int = 200, caller: Caller | None = None) -> list[DeadLetter]:
    return list(db.session.scalars(dead_letters_query(caller).limit(limit)))


def resolve_alerts(alert_ids: list[int], *, now: datetime, actor: str, caller: Caller | None = None) -> int:
    """Resolve the given open alerts; returns how many changed. Unknown ids (and ids of alerts the
    caller may not see) are an error, and then nothing is resolved."""
    if caller is not None:
        caller.require(Action.OPERATE)
    if not alert_ids:
        raise ValidationFailed({"alert_ids": "select at least one alert"})
    begin_write(db.session)
    found = set(db.session.scalars(scoping.alerts(select(Alert.id).where(Alert.id.in_(alert_ids)), caller)))
    missing = sorted(set(alert_ids) - found)
    if missing:
        raise NotFound(f"alert {', '.join(map(str, missing))} does not exist")
    opening = list(
        db.session.execute(
            select(Alert.id, Alert.kind, Alert.job_id).where(Alert.id.in_(alert_ids), Alert.resolved_at.is_(None))
        )
    )
    result = db.session.execute(
        update(Alert)
        .where(Alert.id.in_(alert_ids), Alert.resolved_at.is_(None))
        .values(resolved_at=now, resolved_by=actor)
    )
    record_event("alerts_resolved", now=now, actor=actor, alert_ids=sorted(alert_ids), changed=result.rowcount)
    for alert_id, kind, job_id in sorted(opening):
        audit_trail.record_change(
            actor,
            "resolved",
            "alert",
            alert_id,
            {"resolved_at": None, "resolved_by": None},
            {"resolved_at": now, "resolved_by": actor},
            now=now,
            label=kind,
            job_id=job_id,
        )
    db.session.commit()
    return result.rowcount


def delete_alerts_of_jobs(job_ids: list[int]) -> int:
    """Delete every alert of these jobs (alerts outlive a deleted job otherwise); returns how many.

    For `flask demo`, which removes everything it made; operators resolve alerts instead.
    """
    if not job_ids:
        return 0
    begin_write(db.session)
    deleted = db.session.execute(delete(Alert).where(Alert.job_id.in_(job_ids))).rowcount
    db.session.commit()
    return deleted


def delete_alerts_of_queue(queue_id: int, *, since: datetime) -> int:
    """Delete the alerts about queue `queue_id` raised at or after `since` (a backlog the demo's
    own runs caused); returns how many. For `flask demo` only, like `delete_alerts_of_jobs`."""
    begin_write(db.session)
    deleted = db.session.execute(delete(Alert).where(Alert.queue_id == queue_id, Alert.created_at >= since)).rowcount
    db.session.commit()
    return deleted
