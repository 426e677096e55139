"""A person's own settings: the time zone every page shows their times in.

Stored UTC is never touched: the zone only changes how the web writes an instant (with the zone
named, the UTC instant on hover). Anyone may change their own; the CLI (the host operator) and
superusers may change anyone's.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from app.database import begin_write
from app.extensions import db
from app.models import User
from app.scheduling.timezones import resolve_timezone
from app.services import audit_trail
from app.services.caller import Caller
from app.services.errors import Forbidden, NotFound, ValidationFailed
from app.services.events import record_event

ZONE_MAX = 64


def check_time_zone(zone) -> str:
    """An IANA zone name (`Asia/Tokyo`, `UTC`), else ValidationFailed on `time_zone`."""
    try:
        if not isinstance(zone, str) or len(zone) > ZONE_MAX or "\x00" in zone:
            raise ValueError
        resolve_timezone(zone)
    except Exception:  # ScheduleError, or not text at all
        shown = zone[:80] if isinstance(zone, str) else zone
        raise ValidationFailed(
            {"time_zone": f"must be an IANA time zone such as Asia/Tokyo or Europe/Paris, got {shown!r}"}
        ) from None
    return zone.strip()


def set_time_zone(username: str, zone: str, *, now: datetime, caller: Caller) -> User:
    """Set `username`'s display time zone; audited."""
    zone = check_time_zone(zone)
    begin_write(db.session)
    user = db.session.scalar(select(User).where(User.username == username)) if isinstance(username, str) else None
    if user is None:
        raise NotFound(f"user {username!r} does not exist")
    if user.id != caller.user_id and not caller.superuser:
        raise Forbidden("you may change only your own time zone")
    if user.time_zone != zone:
        before, user.time_zone = user.time_zone, zone
        record_event("user_time_zone_changed", now=now, actor=caller.actor, username=user.username, time_zone=zone)
        audit_trail.record_change(
            caller, "updated", "user", user.id, {"time_zone": before}, {"time_zone": zone}, now=now, label=user.username
        )
    db.session.commit()
    return user
