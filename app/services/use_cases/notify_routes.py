"""Notification routing: a project's default (what its jobs notify, and to which channels), a
job's override of it, and a channel's grouping and quiet window.

The CLI (`flask job set-notify`, `flask project set-notify`, `flask channel set`), the web pages
and the API call these. Events are named as app/domain/notify_routing.py names them; channels by
name, within the project. Setting a project default needs an admin (like channels); a job's
override an operator (like editing the job).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select

from app.database import begin_write
from app.domain import notify_routing
from app.domain.notify_routing import Route
from app.domain.permissions import Action
from app.extensions import db
from app.models import AlertChannel, Job, NotificationRoute, Project
from app.services import audit_trail
from app.services.caller import Caller
from app.services.errors import ValidationFailed
from app.services.use_cases import tenancy
from app.services.use_cases.jobs import get_job

GROUP_MINUTES_MAX = 24 * 60
# The longest quiet-window time zone name the column holds: IANA names are far shorter, and a
# longer one would fail in the database instead of here.
ZONE_MAX = int(getattr(AlertChannel.__table__.c.quiet_timezone.type, "length"))  # noqa: B009 - String has it, TypeEngine does not declare it


def _require(caller: Caller | None, action: Action) -> None:
    if caller is not None:
        caller.require(action)


def _project(project: str | None, caller: Caller | None, project_id: int | None = None) -> Project:
    if project_id is not None:
        return tenancy.get_project(project_id, caller)
    return tenancy.find_project(project, caller) if project else tenancy.working_project(caller)


def _channels_of(project_id: int) -> list[AlertChannel]:
    return list(
        db.session.scalars(select(AlertChannel).where(AlertChannel.project_id == project_id).order_by(AlertChannel.id))
    )


def _route_row(project_id: int, job_id: int | None) -> NotificationRoute | None:
    query = select(NotificationRoute).where(NotificationRoute.project_id == project_id)
    query = query.where(NotificationRoute.job_id.is_(None) if job_id is None else NotificationRoute.job_id == job_id)
    return db.session.scalar(query)


def _as_route(row: NotificationRoute | None) -> Route | None:
    if row is None:
        return None
    channels = tuple(row.channel_ids) if row.channel_ids is not None else None
    return Route(tuple(row.events or ()), channels, "job" if row.job_id else "project")


def _channel_names(ids: tuple[int, ...] | None, project_id: int) -> list[str] | None:
    if ids is None:
        return None
    names = {c.id: c.name for c in _channels_of(project_id)}
    return [names[i] for i in ids if i in names]


def _route_dict(route: Route, project_id: int) -> dict[str, Any]:
    return {
        "events": list(route.events),
        "channels": _channel_names(route.channel_ids, project_id),
        "source": route.source,
    }


def clean_route(data: dict[str, Any], project_id: int) -> dict[str, Any]:
    """Validate `{"events": ..., "channels": ...}`: events a list or "failure,recovery" ("none"
    for none); channels a list of names or comma text, absent/None/"all" for every channel.
    Returns events and channel ids; errors are keyed by field."""
    errors: dict[str, str] = {}
    events: tuple[str, ...] = ()
    raw_events = data.get("events")
    if raw_events is None:
        errors["events"] = f"is required: some of {', '.join(notify_routing.EVENTS)}, or none"
    elif not isinstance(raw_events, (str, list)):
        errors["events"] = "must be a list of events or comma-separated text"
    else:
        try:
            events = notify_routing.parse_events(raw_events)
        except ValueError as exc:
            errors["events"] = str(exc)
    channel_ids: list[int] | None = None
    raw = data.get("channels")
    if isinstance(raw, str):
        raw = None if raw.strip() in ("", "all") else [n.strip() for n in raw.split(",") if n.strip()]
    if raw is not None:
        if not isinstance(raw, list) or not all(isinstance(n, str) for n in raw):
            errors["channels"] = "must be a list of channel names"
        else:
            by_name = {c.name: c.id for c in _channels_of(project_id)}
            unknown = [n for n in raw if n not in by_name]
            if unknown:
                known = ", ".join(sorted(by_name)) or "none yet"
                errors["channels"] = f"no channel named {', '.join(map(repr, unknown))} in this project; known: {known}"
            else:
                channel_ids = list(dict.fromkeys(by_name[n] for n in raw))
    if errors:
        raise ValidationFailed(errors)
    return {"events": list(events), "channel_ids": channel_ids}


def project_routing(
    project: str | None = None, caller: Caller | None = None, *, project_id: int | None = None
) -> dict[str, Any]:
    """The project's default routing (the built-in one when none is set); the project named
    ORG/PROJECT, or by id, or the caller's working project."""
    target = _project(project, caller, project_id)
    route = notify_routing.effective_route(None, _as_route(_route_row(target.id, None)))
    return {"project": target.full_name, "project_id": target.id, **_route_dict(route, target.id)}


def job_routing(job_id: int, caller: Caller | None = None) -> dict[str, Any]:
    """The job's override (None when it follows its project) and the routing in effect."""
    job = get_job(job_id, caller)
    own = _as_route(_route_row(job.project_id, job.id))
    effective = notify_routing.effective_route(own, _as_route(_route_row(job.project_id, None)))
    return {
        "job_id": job.id,
        "job": job.name,
        "override": None if own is None else _route_dict(own, job.project_id),
        "effective": _route_dict(effective, job.project_id),
    }


def _store(
    project_id: int, job: Job | None, cleaned: dict[str, Any] | None, *, now: datetime, actor: str, who: Any
) -> None:
    """Write (or, with `cleaned` None, delete) a route row, audited."""
    row = _route_row(project_id, job.id if job else None)
    before = None if row is None else {"events": row.events, "channel_ids": row.channel_ids}
    if cleaned is None:
        if row is not None:
            db.session.delete(row)
    elif row is None:
        row = NotificationRoute(
            project_id=project_id, job_id=job.id if job else None, updated_by=actor, updated_at=now, **cleaned
        )
        db.session.add(row)
    else:
        row.events, row.channel_ids, row.updated_by, row.updated_at = (
            cleaned["events"],
            cleaned["channel_ids"],
            actor,
            now,
        )
    db.session.flush()
    if before != cleaned:
        audit_trail.record_change(
            who,
            "changed" if cleaned is not None else "deleted",
            "notify_route",
            job.id if job else project_id,
            before,
            cleaned,
            now=now,
            label=f"job {job.name}" if job else "project default",
            job_id=job.id if job else None,
            project_id=project_id,
        )


def set_project_routing(
    data: dict[str, Any],
    *,
    now: datetime,
    actor: str,
    project: str | None = None,
    caller: Caller | None = None,
    project_id: int | None = None,
) -> dict[str, Any]:
    """Set the project's default routing."""
    _require(caller, Action.ADMINISTER)
    target = _project(project, caller, project_id)
    cleaned = clean_route(data, target.id)
    begin_write(db.session)
    _store(target.id, None, cleaned, now=now, actor=actor, who=caller or actor)
    db.session.commit()
    return project_routing(caller=caller, project_id=target.id)


def set_job_routing(
    job_id: int, data: dict[str, Any] | None, *, now: datetime, actor: str, caller: Caller | None = None
) -> dict[str, Any]:
    """Set the job's override, or with `data` None drop it (the job follows its project again)."""
    _require(caller, Action.OPERATE)
    job = get_job(job_id, caller)
    cleaned = None if data is None else clean_route(data, job.project_id)
    begin_write(db.session)
    _store(job.project_id, job, cleaned, now=now, actor=actor, who=caller or actor)
    db.session.commit()
    return job_routing(job.id, caller)


def clean_channel_settings(data: dict[str, Any]) -> dict[str, Any]:
    """Validate a channel's `group_minutes`, `quiet` ("22:00-07:00" or "off") and `quiet_timezone`
    (each optional); returns the columns to change."""
    errors: dict[str, str] = {}
    values: dict[str, Any] = {}
    if data.get("group_minutes") is not None:
        raw = data["group_minutes"]
        text = str(raw).strip()
        if isinstance(raw, bool) or not text.isdigit() or int(text) > GROUP_MINUTES_MAX:
            errors["group_minutes"] = f"must be a whole number of minutes, 0 (no grouping) to {GROUP_MINUTES_MAX}"
        else:
            values["group_seconds"] = int(text) * 60
    if data.get("quiet") is not None:
        try:
            window = notify_routing.parse_quiet(str(data["quiet"]))
        except ValueError as exc:
            errors["quiet"] = str(exc)
        else:
            values["quiet_start"], values["quiet_end"] = window or (None, None)
    if data.get("quiet_timezone") is not None:
        zone = str(data["quiet_timezone"]).strip()
        try:
            if len(zone) > ZONE_MAX:
                raise ValueError(f"unknown time zone: a zone name has at most {ZONE_MAX} characters")
            values["quiet_timezone"] = notify_routing.check_timezone(zone) if zone else None
        except ValueError as exc:
            errors["quiet_timezone"] = str(exc)
    if errors:
        raise ValidationFailed(errors)
    return values


def channel_settings_dict(channel: AlertChannel) -> dict[str, Any]:
    """A channel's grouping and quiet window as the CLI and API show them."""
    quiet = f"{channel.quiet_start}-{channel.quiet_end}" if channel.quiet_start else None
    return {
        "group_minutes": (channel.group_seconds or 0) // 60,
        "quiet": quiet,
        "quiet_timezone": channel.quiet_timezone or "UTC",
    }


def channel_names(project_id: int) -> list[str]:
    """The names of the project's channels, for the routing forms."""
    return [c.name for c in _channels_of(project_id)]
