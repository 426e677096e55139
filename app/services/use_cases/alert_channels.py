"""Alert channels: where a project's alerts go (signed webhooks, Slack, Teams, email), routed by
alert kind.

The CLI (`flask alerts channel ...`), the web pages (app/alerts) and the API call these. A
channel's webhook secret is generated when none is given and shown once, at creation. Each field
is checked in channel_fields.py, the same way for a new channel and for an edit.

A stored URL or secret that no listed key opens reads as a marker (app/secret_box.py): the
channel lists and shows with `unreadable` saying why, an edit of its other fields keeps the stored
value as it was, and setting the URL (or secret) again replaces it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm.attributes import flag_modified

from app.clock import iso_z
from app.database import begin_write
from app.domain.permissions import Action
from app.extensions import db
from app.models import AlertChannel, AlertDelivery
from app.models.alerting import unreadable_reason
from app.secret_box import UNREADABLE_HINT
from app.services import audit_trail, scoping
from app.services.caller import Caller
from app.services.engine import wakeups
from app.services.errors import NotFound, ValidationFailed
from app.services.events import record_event
from app.services.use_cases import notify_routes, tenancy
from app.services.use_cases.channel_fields import check_channel, check_edit


def _require(caller: Caller | None, action: Action) -> None:
    if caller is not None:
        caller.require(action)


def list_channels(caller: Caller | None = None) -> list[AlertChannel]:
    query = select(AlertChannel).order_by(AlertChannel.id)
    projects = scoping.project_ids(caller)
    if projects is not None:
        query = query.where(AlertChannel.project_id.in_(projects))
    return list(db.session.scalars(query))


def get_channel(channel_id: int, caller: Caller | None = None, *, lock: bool = False) -> AlertChannel:
    """The channel `channel_id` if the caller may see it; `lock` (in a write transaction) reads
    it afresh and holds its row until the commit (PostgreSQL: FOR UPDATE; SQLite's write
    transaction already excludes every other writer)."""
    query = select(AlertChannel).where(AlertChannel.id == channel_id)
    projects = scoping.project_ids(caller)
    if projects is not None:
        query = query.where(AlertChannel.project_id.in_(projects))
    if lock:
        query = query.with_for_update().execution_options(populate_existing=True)
    channel = db.session.scalar(query)
    if channel is None:
        raise NotFound(f"alert channel {channel_id} does not exist")
    return channel


def unreadable_summary(channels: list[AlertChannel]) -> str | None:
    """One line naming the channels whose stored URL or secret cannot be decrypted, and what to do
    (None: every one reads). A listing prints it after the list and fails, so a script notices."""
    broken = [channel for channel in channels if channel.unreadable]
    if not broken:
        return None
    if len(broken) == 1:
        return f"channel {broken[0].name!r} (project {broken[0].project_id}): {broken[0].unreadable}"
    names = ", ".join(f"{channel.name!r} (project {channel.project_id})" for channel in broken)
    hint = UNREADABLE_HINT.format(it="them")
    return f"channels {names}: their URL, address or signing secret cannot be decrypted: {hint}"


def find_channel(name: str, project: str | None = None, caller: Caller | None = None) -> AlertChannel:
    """The channel called `name` in `project` (ORG/PROJECT; default: the caller's working project)."""
    target_project = tenancy.find_project(project, caller) if project else tenancy.working_project(caller)
    channel = db.session.scalar(
        select(AlertChannel).where(AlertChannel.project_id == target_project.id, AlertChannel.name == name)
    )
    if channel is None:
        raise NotFound(f"no channel named {name!r} in project {target_project.name!r}")
    return channel


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
    """The web form's edit: a channel's name, target, alert kinds (comma text) or secret; an empty
    target or secret keeps the current one (the page never shows them in full), and the kind
    stays what it was."""
    edit: dict = {}
    if data.get("name") is not None:
        edit["name"] = str(data["name"])
    for field in ("target", "secret"):
        if str(data.get(field) or "").strip():
            edit[field] = str(data[field])
    kinds = data.get("kinds")
    if kinds is not None:
        edit["kinds"] = [k.strip() for k in kinds.split(",") if k.strip()] if isinstance(kinds, str) else kinds
    return change_channel(channel_id, edit, now=now, actor=actor, caller=caller)


def change_channel(
    channel_id: int,
    data: dict,
    *,
    now: datetime,
    actor: str,
    caller: Caller | None = None,
    precondition: Callable[[AlertChannel], None] | None = None,
) -> AlertChannel:
    """Change the fields given (`channel_fields.EDITABLE`: name, target, secret, kinds, enabled,
    group_minutes, quiet, quiet_timezone); the others stay. Any refused field refuses the whole
    edit (ValidationFailed, per field). `precondition` is called with the channel as stored, once
    its row is held and before anything changes, and may raise to refuse: the API checks If-Match
    there, so an edit made meanwhile cannot slip between the check and the write. An edit that
    changes nothing writes nothing (no audit row, the same ETag)."""
    _require(caller, Action.ADMINISTER)
    begin_write(db.session)
    try:
        channel = get_channel(channel_id, caller, lock=True)
        if precondition is not None:
            precondition(channel)
        values = check_edit(channel, data)
        changed = {key: value for key, value in values.items() if getattr(channel, key) != value}
        if changed:
            _apply_edit(channel, changed, now=now, actor=actor, caller=caller)
        db.session.commit()
    except BaseException:
        db.session.rollback()  # release the row (and SQLite's write lock) at once
        raise
    return channel


def _apply_edit(channel: AlertChannel, changed: dict, *, now: datetime, actor: str, caller: Caller | None) -> None:
    if "name" in changed and db.session.scalar(
        select(AlertChannel.id).where(
            AlertChannel.project_id == channel.project_id,
            AlertChannel.name == changed["name"],
            AlertChannel.id != channel.id,
        )
    ):
        raise ValidationFailed({"name": f"a channel named {changed['name']!r} already exists in this project"})
    before = _audited(channel)
    for key, value in changed.items():
        setattr(channel, key, value)
    channel.updated_at = now
    _seal_on_write(channel)
    db.session.flush()
    record_event(
        "alert_channel_updated", now=now, actor=actor, channel_id=channel.id, name=channel.name, fields=sorted(changed)
    )
    # The fields changed, named: a new URL may look the same masked, and a secret is only "(hidden)".
    audit_trail.record_change(
        caller or actor,
        "updated",
        "channel",
        channel.id,
        before,
        _audited(channel),
        now=now,
        extra={"fields": sorted(changed)},
        **_about(channel),
    )


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


@dataclass(frozen=True)
class Resealed:
    """What `reseal_channels` did: how many channels it sealed with the first key, and the ones it
    left as they were because no listed key opens their URL or secret (name -> why)."""

    count: int
    unreadable: dict[str, str]


def reseal_channels(*, now: datetime, actor: str) -> Resealed:
    """Encrypt every channel's target and secret again with the first CHANNEL_SECRET_KEY (after a
    rotation put a new key first). Each value is read with whichever listed key opens it, so the
    old key can go once this has run, unless some value opened with none: those stay as stored
    (and are reported), so listing their key later still recovers them."""
    begin_write(db.session)
    table = AlertChannel.__table__
    rows = db.session.execute(
        select(table.c.id, table.c.name, table.c.kind, table.c.target, table.c.secret).order_by(table.c.id)
    ).all()
    unreadable: dict[str, str] = {}
    for row in rows:
        why = unreadable_reason(row.kind, row.target, row.secret)
        if why:
            unreadable[row.name] = why
            continue
        # Written through the column type: sealed with the first key, whatever sealed it before.
        db.session.execute(table.update().where(table.c.id == row.id).values(target=row.target, secret=row.secret))
    resealed = len(rows) - len(unreadable)
    record_event("alert_channels_resealed", now=now, actor=actor, channels=resealed, unreadable=len(unreadable))
    db.session.commit()
    return Resealed(resealed, unreadable)


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
        "unreadable": channel.unreadable,
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
