"""Alert channels: where a project's alerts go (signed webhooks, Slack, Teams, email), routed by
alert kind.

The CLI (`flask alerts channel ...`), the web pages (app/alerts) and the API call these. A
channel's webhook secret is generated when none is given and shown once, at creation.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm.attributes import flag_modified

from app.clock import iso_z
from app.database import begin_write
from app.definitions import text_limits
from app.domain.permissions import Action
from app.extensions import db
from app.models import AlertChannel, AlertDelivery
from app.models.alerting import CHANNEL_KINDS, ENV_PREFIX, RECEIVABLE_KINDS, URL_CHANNEL_KINDS
from app.sensitive import is_own_secret
from app.services import audit_trail, scoping
from app.services.caller import Caller
from app.services.engine import wakeups
from app.services.errors import NotFound, ValidationFailed
from app.services.events import record_event
from app.services.use_cases import notify_routes, tenancy

NAME_MAX, TARGET_MAX, SECRET_MAX = text_limits.CHANNEL_NAME.maximum, text_limits.CHANNEL_TARGET.maximum, 200
URL_KINDS = URL_CHANNEL_KINDS  # shown in full only in the answer to the channel's creation
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def _require(caller: Caller | None, action: Action) -> None:
    if caller is not None:
        caller.require(action)


def list_channels(caller: Caller | None = None) -> list[AlertChannel]:
    query = select(AlertChannel).order_by(AlertChannel.id)
    projects = scoping.project_ids(caller)
    if projects is not None:
        query = query.where(AlertChannel.project_id.in_(projects))
    return list(db.session.scalars(query))


def get_channel(channel_id: int, caller: Caller | None = None) -> AlertChannel:
    query = select(AlertChannel).where(AlertChannel.id == channel_id)
    projects = scoping.project_ids(caller)
    if projects is not None:
        query = query.where(AlertChannel.project_id.in_(projects))
    channel = db.session.scalar(query)
    if channel is None:
        raise NotFound(f"alert channel {channel_id} does not exist")
    return channel


def find_channel(name: str, project: str | None = None, caller: Caller | None = None) -> AlertChannel:
    """The channel called `name` in `project` (ORG/PROJECT; default: the caller's working project)."""
    target_project = tenancy.find_project(project, caller) if project else tenancy.working_project(caller)
    channel = db.session.scalar(
        select(AlertChannel).where(AlertChannel.project_id == target_project.id, AlertChannel.name == name)
    )
    if channel is None:
        raise NotFound(f"no channel named {name!r} in project {target_project.name!r}")
    return channel


def check_channel(data: dict) -> dict:
    """Validate a channel's fields; returns them cleaned. Errors are keyed by field."""
    errors: dict[str, str] = {}
    name = str(data.get("name") or "").strip()
    kind = str(data.get("kind") or "").strip()
    target = str(data.get("target") or "").strip()
    secret = data.get("secret")
    kinds = data.get("kinds") or []
    if isinstance(kinds, str):
        kinds = [k.strip() for k in kinds.split(",") if k.strip()]
    if not name or len(name) > NAME_MAX or not name.isprintable():
        errors["name"] = f"must be 1-{NAME_MAX} printable characters"
    if kind not in CHANNEL_KINDS:
        errors["kind"] = f"must be one of {', '.join(CHANNEL_KINDS)}"
    if not target or len(target) > TARGET_MAX or "\x00" in target:
        errors["target"] = f"is required (at most {TARGET_MAX} characters)"
    elif kind in URL_KINDS and target.startswith(ENV_PREFIX):
        name = target[len(ENV_PREFIX) :]
        if not _ENV_NAME.match(name):
            errors["target"] = "env:NAME needs an environment variable name (letters, digits, _)"
        elif is_own_secret(name):
            errors["target"] = f"{name} holds Cronwell's own credentials and cannot be a channel's URL"
    elif kind in URL_KINDS:
        parts = urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.netloc or not target.isprintable():
            errors["target"] = f"a {kind} channel needs an http:// or https:// URL"
    elif kind == "email" and not _EMAIL.match(target):
        errors["target"] = "must be an email address"
    if secret is not None and (len(str(secret)) > SECRET_MAX or "\x00" in str(secret)):
        errors["secret"] = f"must be at most {SECRET_MAX} characters"
    unknown = [k for k in kinds if k not in RECEIVABLE_KINDS]
    if unknown:
        errors["kinds"] = f"unknown kind(s) {', '.join(unknown)}; known: {', '.join(RECEIVABLE_KINDS)}"
    settings: dict = {}
    try:
        settings = notify_routes.clean_channel_settings(data)
    except ValidationFailed as exc:
        errors.update(exc.errors)
    if errors:
        raise ValidationFailed(errors)
    if kind == "webhook" and not secret:
        secret = secrets.token_urlsafe(32)
    cleaned = {
        "name": name,
        "kind": kind,
        "target": target,
        "secret": secret or None,
        "kinds": list(dict.fromkeys(kinds)),
    }
    return {**cleaned, **settings}


def add_channel(
    data: dict, *, now: datetime, actor: str, project: str | None = None, caller: Caller | None = None
) -> AlertChannel:
    """Create a channel in `project` (ORG/PROJECT; default: the caller's working project)."""
    _require(caller, Action.ADMINISTER)
    cleaned = check_channel(data)
    target_project = tenancy.find_project(project, caller) if project else tenancy.working_project(caller)
    begin_write(db.session)
    if db.session.scalar(
        select(AlertChannel.id).where(
            AlertChannel.project_id == target_project.id, AlertChannel.name == cleaned["name"]
        )
    ):
        raise ValidationFailed({"name": f"a channel named {cleaned['name']!r} already exists in this project"})
    channel = AlertChannel(**cleaned, project_id=target_project.id, enabled=True, created_at=now, updated_at=now)
    db.session.add(channel)
    db.session.flush()
    record_event(
        "alert_channel_created", now=now, actor=actor, channel_id=channel.id, kind=channel.kind, kinds=channel.kinds
    )
    audit_trail.record_change(
        caller or actor, "created", "channel", channel.id, None, _audited(channel), now=now, **_about(channel)
    )
    db.session.commit()
    return channel


def update_channel(
    channel_id: int, data: dict, *, now: datetime, actor: str, caller: Caller | None = None
) -> AlertChannel:
    """Change a channel's grouping (`group_minutes`), quiet window (`quiet`, "22:00-07:00" or
    "off") and its time zone (`quiet_timezone`); the fields not given stay."""
    _require(caller, Action.ADMINISTER)
    values = notify_routes.clean_channel_settings(data)
    begin_write(db.session)
    channel = get_channel(channel_id, caller)
    before = _audited(channel)
    for key, value in values.items():
        setattr(channel, key, value)
    channel.updated_at = now
    _seal_on_write(channel)
    db.session.flush()
    audit_trail.record_change(
        caller or actor, "changed", "channel", channel.id, before, _audited(channel), now=now, **_about(channel)
    )
    db.session.commit()
    return channel


def edit_channel(
    channel_id: int, data: dict, *, now: datetime, actor: str, caller: Caller | None = None
) -> AlertChannel:
    """Change a channel's name, target, alert kinds or secret; an empty target or secret keeps the
    current one (the page never shows them in full), and the kind stays what it was."""
    _require(caller, Action.ADMINISTER)
    begin_write(db.session)
    channel = get_channel(channel_id, caller)
    secret = (data.get("secret") or "").strip() or channel.secret
    cleaned = check_channel(
        {
            "name": data.get("name") if data.get("name") is not None else channel.name,
            "kind": channel.kind,
            "target": (data.get("target") or "").strip() or channel.target,
            "secret": secret,
            "kinds": data.get("kinds") if data.get("kinds") is not None else channel.kinds,
        }
    )
    if cleaned["name"] != channel.name and db.session.scalar(
        select(AlertChannel.id).where(
            AlertChannel.project_id == channel.project_id, AlertChannel.name == cleaned["name"]
        )
    ):
        raise ValidationFailed({"name": f"a channel named {cleaned['name']!r} already exists in this project"})
    before = _audited(channel)
    channel.name, channel.target, channel.kinds = cleaned["name"], cleaned["target"], cleaned["kinds"]
    channel.secret = cleaned["secret"]
    channel.updated_at = now
    _seal_on_write(channel)
    db.session.flush()
    record_event("alert_channel_updated", now=now, actor=actor, channel_id=channel.id, name=channel.name)
    audit_trail.record_change(
        caller or actor, "updated", "channel", channel.id, before, _audited(channel), now=now, **_about(channel)
    )
    db.session.commit()
    return channel


def delete_channel(channel_id: int, *, now: datetime, actor: str, caller: Caller | None = None) -> None:
    _require(caller, Action.ADMINISTER)
    begin_write(db.session)
    channel = get_channel(channel_id, caller)
    record_event("alert_channel_deleted", now=now, actor=actor, channel_id=channel.id, name=channel.name)
    audit_trail.record_change(
        caller or actor, "deleted", "channel", channel.id, _audited(channel), None, now=now, **_about(channel)
    )
    db.session.delete(channel)
    db.session.commit()


def reseal_channels(*, now: datetime, actor: str) -> int:
    """Encrypt every channel's target and secret again with the first CHANNEL_SECRET_KEY (after a
    rotation put a new key first); returns how many channels were rewritten. Each value is read
    with whichever listed key opens it, so the old key can go once this has run."""
    begin_write(db.session)
    table = AlertChannel.__table__
    rows = db.session.execute(select(table.c.id, table.c.target, table.c.secret).order_by(table.c.id)).all()
    for row in rows:
        # Written through the column type: sealed with the first key, whatever sealed it before.
        db.session.execute(table.update().where(table.c.id == row.id).values(target=row.target, secret=row.secret))
    record_event("alert_channels_resealed", now=now, actor=actor, channels=len(rows))
    db.session.commit()
    return len(rows)


def send_test(channel_id: int, *, now: datetime, actor: str, caller: Caller | None = None) -> AlertDelivery:
    """Queue a test message to the channel (the delivery loop sends it, like any alert)."""
    _require(caller, Action.OPERATE)
    begin_write(db.session)
    channel = get_channel(channel_id, caller)
    delivery = AlertDelivery(
        channel_id=channel.id,
        alert_id=None,
        kind="test",
        payload={
            "type": "test",
            "message": f"Test message for channel {channel.name!r}, sent by {actor}",
            "channel_id": channel.id,
            "created_at": iso_z(now),
        },
        status="pending",
        attempts=0,
        next_attempt_at=now,
        created_at=now,
        updated_at=now,
    )
    db.session.add(delivery)
    db.session.flush()
    record_event("alert_channel_tested", now=now, actor=actor, channel_id=channel.id, delivery_id=delivery.id)
    # A test send changes no setting, but it sends a message on the operator's behalf (a webhook
    # call, a mail): who did that, and which delivery it was, belongs in the audit log.
    audit_trail.record_change(
        caller or actor,
        "tested",
        "channel",
        channel.id,
        now=now,
        extra={"delivery_id": delivery.id, "kind": channel.kind},
        **_about(channel),
    )
    wakeups.notify(db.session.connection(), wakeups.ALERTS_CHANNEL)  # the delivery loop sends it now
    db.session.commit()
    return delivery


def delivery_log(
    *, channel_id: int | None = None, limit: int = 100, caller: Caller | None = None
) -> list[AlertDelivery]:
    """The newest deliveries (of one channel, or of every channel the caller may see)."""
    ids = [channel_id] if channel_id is not None else [c.id for c in list_channels(caller)]
    if channel_id is not None:
        get_channel(channel_id, caller)
    if not ids:
        return []
    return list(
        db.session.scalars(
            select(AlertDelivery)
            .where(AlertDelivery.channel_id.in_(ids))
            .order_by(AlertDelivery.id.desc())
            .limit(limit)
        )
    )


def _seal_on_write(channel: AlertChannel) -> None:
    """Write the target and secret with the row even when unchanged: a plaintext value (from before
    sealing) is sealed, and one sealed with an older key is sealed with the first."""
    flag_modified(channel, "target")
    flag_modified(channel, "secret")


def _audited(channel: AlertChannel) -> dict:
    """A channel's settings as its audit before/after (the secret only as "(hidden)")."""
    audited = {k: v for k, v in channel_to_dict(channel, show_secret=True).items() if k not in ("id", "created_at")}
    return {**audited, "target": shown_target(channel)}


def _about(channel: AlertChannel) -> dict:
    return {"label": channel.name, "project_id": channel.project_id}


def shown_target(channel: AlertChannel) -> str:
    """The channel's target as shown after creation: a URL masked, an email address as it is."""
    return channel.shown_target


def channel_to_dict(channel: AlertChannel, *, show_secret: bool = False) -> dict:
    """The channel as the CLI and API show it; `show_secret` (the answer to its creation only)
    shows the signing secret and the whole URL."""
    return {
        "id": channel.id,
        "project_id": channel.project_id,
        "name": channel.name,
        "kind": channel.kind,
        "target": channel.target if show_secret else shown_target(channel),
        "kinds": list(channel.kinds or []),
        "enabled": channel.enabled,
        **notify_routes.channel_settings_dict(channel),
        "created_at": iso_z(channel.created_at),
        **({"secret": channel.secret} if show_secret else {}),
    }


def delivery_to_dict(delivery: AlertDelivery) -> dict:
    return {
        "id": delivery.id,
        "channel_id": delivery.channel_id,
        "alert_id": delivery.alert_id,
        "kind": delivery.kind,
        "grouped": delivery.grouped,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "response_status": delivery.response_status,
        "last_error": delivery.last_error,
        "next_attempt_at": iso_z(delivery.next_attempt_at),
        "created_at": iso_z(delivery.created_at),
        "delivered_at": iso_z(delivery.delivered_at),
    }
