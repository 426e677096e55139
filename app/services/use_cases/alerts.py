"""Alerts and dead letters: raising them (engine) and resolving them (operators)."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import delete, select, update

from app.database import begin_write
from app.extensions import db
from app.models import Alert, DeadLetter
from app.services.audit import record_event
from app.services.errors import NotFound, ValidationFailed

log = logging.getLogger("cronwell.alerts")


def list_alerts(*, include_resolved: bool = False, limit: int = 200) -> list[Alert]:
    query = select(Alert).order_by(Alert.id.desc()).limit(limit)
    if not include_resolved:
        query = query.where(Alert.resolved_at.is_(None))
    return list(db.session.scalars(query))


def list_dead_letters(*, limit: int = 200) -> list[DeadLetter]:
    return list(db.session.scalars(select(DeadLetter).order_by(DeadLetter.id.desc()).limit(limit)))


def resolve_alerts(alert_ids: list[int], *, now: datetime, actor: str) -> int:
    """Resolve the given open alerts; returns how many changed. Unknown ids are an error."""
    if not alert_ids:
        raise ValidationFailed({"alert_ids": "select at least one alert"})
    begin_write(db.session)
    found = set(db.session.scalars(select(Alert.id).where(Alert.id.in_(alert_ids))))
    missing = sorted(set(alert_ids) - found)
    if missing:
        raise NotFound(f"alert {', '.join(map(str, missing))} does not exist")
    result = db.session.execute(
        update(Alert)
        .where(Alert.id.in_(alert_ids), Alert.resolved_at.is_(None))
        .values(resolved_at=now, resolved_by=actor)
    )
    record_event("alerts_resolved", now=now, actor=actor, alert_ids=sorted(alert_ids), changed=result.rowcount)
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
