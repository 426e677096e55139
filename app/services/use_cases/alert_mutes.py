"""Muting a job's alerts for a while: nothing is opened or counted for it until then (the dead
letters and ALERT log lines are still written). Takes the `caller` like the other use cases."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, select

from app.database import begin_write
from app.domain.permissions import Action
from app.extensions import db
from app.models import AlertMute, Job
from app.services import audit_trail, scoping
from app.services.caller import Caller
from app.services.errors import NotFound, ValidationFailed
from app.services.events import record_event

# The periods offered (hours); any whole number of hours up to a month is accepted.
CHOICES_HOURS = (1, 4, 24, 24 * 7)
MAX_HOURS = 24 * 31


def _job(job_id: int, caller: Caller | None) -> Job:
    job = db.session.scalar(scoping.jobs(select(Job).where(Job.id == job_id), caller))
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    return job


def muted_until(job_id: int, now: datetime) -> datetime | None:
    """When the job's alert mute ends, or None when it is not muted."""
    until = db.session.scalar(select(AlertMute.until).where(AlertMute.job_id == job_id))
    return until if until is not None and until > now else None


def mute(job_id: int, *, hours: int, now: datetime, actor: str, caller: Caller | None = None) -> datetime:
    """Mute the job's alerts for `hours` from now; returns when the mute ends."""
    if caller is not None:
        caller.require(Action.OPERATE)
    if not isinstance(hours, int) or not 1 <= hours <= MAX_HOURS:
        raise ValidationFailed({"hours": f"must be a whole number of hours from 1 to {MAX_HOURS}"})
    job = _job(job_id, caller)
    until = now + timedelta(hours=hours)
    begin_write(db.session)
    db.session.execute(delete(AlertMute).where(AlertMute.job_id == job.id))
    db.session.add(AlertMute(job_id=job.id, until=until, muted_by=actor, created_at=now))
    record_event("alerts_muted", now=now, actor=actor, job_id=job.id, until=until.isoformat())
    audit_trail.record_change(
        caller or actor,
        "updated",
        "job",
        job.id,
        {"alerts_muted_until": None},
        {"alerts_muted_until": until},
        now=now,
        label=job.name,
        job_id=job.id,
    )
    db.session.commit()
    return until


def unmute(job_id: int, *, now: datetime, actor: str, caller: Caller | None = None) -> bool:
    """End the job's alert mute; returns whether it was muted."""
    if caller is not None:
        caller.require(Action.OPERATE)
    job = _job(job_id, caller)
    before = muted_until(job.id, now)
    begin_write(db.session)
    db.session.execute(delete(AlertMute).where(AlertMute.job_id == job.id))
    if before is not None:
        record_event("alerts_unmuted", now=now, actor=actor, job_id=job.id)
        audit_trail.record_change(
            caller or actor,
            "updated",
            "job",
            job.id,
            {"alerts_muted_until": before},
            {"alerts_muted_until": None},
            now=now,
            label=job.name,
            job_id=job.id,
        )
    db.session.commit()
    return before is not None
