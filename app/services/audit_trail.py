"""The audit trail: who changed what, for every organization. Not the event log (app/services/events.py),
which tells what the system did; this one is the record of people's (and the system's) changes to
objects, with the before/after of the changed fields only.

Every use case that changes something calls `record_change` before it commits, so the audit row
and the change share one transaction: both are stored or neither. Rows are append-only: nothing
here or anywhere else updates them, the database refuses it (migration 0011), and only
`prune_audit` (the retention pass) deletes the ones older than AUDIT_RETENTION_DAYS.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from datetime import UTC, date, datetime, timedelta
from enum import Enum
from typing import Any

from sqlalchemy import delete, func, insert, select, text
from sqlalchemy.engine import Connection

from app.clock import iso_z
from app.extensions import db
from app.models import Job, Project, Queue
from app.models.audit import AUDIT_SOURCES, AuditEvent, AuditPruneGate
from app.sensitive import SECRET_NAME
from app.services.errors import ValidationFailed
from app.services.events import insert_event

# The address of the web or API client whose request is being served, for callers that pass a
# plain actor name instead of a Caller (set and cleared around each request by app/audit/routes.py).
client_address: ContextVar[str | None] = ContextVar("cronwell_audit_client_address", default=None)

LABEL_MAX = 200
REDACTED = "(hidden)"
ADDRESS_MAX = 100


def source_of(actor: str) -> str:
    """The source an actor name implies: "web:alice" -> web, "api:bob"/"token:ci" -> api,
    "system" -> system, anything else (cli, demo) -> cli."""
    prefix = actor.split(":", 1)[0]
    if prefix in ("web", "api", "system"):
        return prefix
    if prefix == "token":
        return "api"
    return "cli"


def jsonable(value: Any) -> Any:
    """A value as the `changes` JSON stores it: datetimes as ISO 8601 UTC with Z, enums by value."""
    if isinstance(value, datetime):
        return iso_z(value) if value.tzinfo else value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def diff(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The fields whose value differs, as {field: {"before": old, "after": new}}.

    A creation (no `before`) lists every field of `after` that has a value; a deletion (no `after`)
    every field of `before` that had one.
    """
    before = {k: jsonable(v) for k, v in (before or {}).items()}
    after = {k: jsonable(v) for k, v in (after or {}).items()}
    changes: dict[str, dict[str, Any]] = {}
    for field in sorted(before.keys() | after.keys()):
        old, new = before.get(field), after.get(field)
        if old != new:
            changes[field] = {"before": old, "after": new}
    return changes


def _is_secret(key: str) -> bool:
    return bool(SECRET_NAME.search(key)) or "password" in key.lower()


def _redact(value: Any) -> Any:
    """Secret-looking keys (a password hash, a task config's `api_token`) keep their place, so a
    change shows, but never their value."""
    if isinstance(value, Mapping):
        return {k: (REDACTED if v is not None else None) if _is_secret(k) else _redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    return value


def _redact_changes(changes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        field: {side: _redact({field: value})[field] for side, value in change.items()}
        for field, change in changes.items()
    }


def snapshot(obj: Any, fields: Iterable[str]) -> dict[str, Any]:
    """The named attributes of `obj`, for `before`/`after`."""
    return {field: jsonable(getattr(obj, field)) for field in fields}


def about_job(job: Any) -> dict[str, Any]:
    """`record_change` keywords naming a job: its name as the label, its id, project and (when its
    queue's project is loaded, as it is after the first job of a project) organization, which
    spares a query per row when one transaction changes many jobs."""
    queue = getattr(job, "queue_row", None)
    project_id = getattr(job, "project_id", None) or getattr(queue, "project_id", None)
    about = {"label": job.name, "job_id": job.id, "project_id": project_id}
    project = getattr(queue, "project", None) if queue is not None else None
    if project is not None and project.id == project_id:
        about["organization_id"] = project.organization_id
    return about


def record_change(
    who: Any,
    action: str,
    obj_kind: str,
    obj_id: Any,
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
    *,
    now: datetime,
    label: str | None = None,
    job_id: int | None = None,
    project_id: int | None = None,
    organization_id: int | None = None,
    address: str | None = None,
    extra: Mapping[str, Any] | None = None,
    session=None,
    conn: Connection | None = None,
) -> dict[str, Any] | None:
    """Add one audit row to the caller's transaction (the ORM session, or `conn` for engine code
    on a Core connection); it commits or rolls back with the change itself.

    `who` is a `Caller` (actor, source, address, organization and project are read from it) or a
    plain actor name ("web:alice", "cli", "system"). `changes` holds the fields that differ between
    `before` and `after`, plus `extra` (facts of the action that are not fields: a cancel's reason)
    as {"after": value}. An "updated" with nothing changed writes nothing and returns None.
    Returns the row's values.
    """
    changes = _redact_changes(diff(before, after))
    if extra:
        changes.update({k: {"before": None, "after": jsonable(v)} for k, v in extra.items() if v is not None})
    if action == "updated" and not changes:
        return None
    if isinstance(who, str):
        actor, source = who, source_of(who)
        caller_address = caller_org = caller_project = None
    else:
        actor, source = who.actor, who.source
        caller_address = getattr(who, "address", None)
        caller_org = getattr(who, "organization_id", None)
        caller_project = getattr(who, "project_id", None)
    if source not in AUDIT_SOURCES:
        source = source_of(actor)
    row = {
        "created_at": now,
        "actor": actor[:200],
        "source": source,
        "object_kind": obj_kind,
        "object_id": str(obj_id)[:200],
        "object_label": label[:LABEL_MAX] if label else None,
        "action": action,
        "changes": changes,
        "address": (address or caller_address or (client_address.get() if source in ("web", "api") else None)),
        "job_id": job_id,
        "project_id": project_id if project_id is not None else caller_project,
        "organization_id": organization_id if organization_id is not None else caller_org,
    }
    if row["address"]:
        row["address"] = row["address"][:ADDRESS_MAX]
    if row["organization_id"] is None:
        row["project_id"], row["organization_id"] = _scope_of(row["project_id"], job_id, session=session, conn=conn)
    if conn is not None:
        conn.execute(insert(AuditEvent).values(**row))
    else:
        (session or db.session).add(AuditEvent(**row))
    return row


def _scope_of(project_id: int | None, job_id: int | None, *, session=None, conn=None) -> tuple[int | None, int | None]:
    """The project (from the job's queue when not given) and its organization, so an
    organization's readers find the row."""
    if project_id is None and job_id is None:
        return None, None
    query = select(Project.id, Project.organization_id)
    if project_id is None:
        query = query.join(Queue, Queue.project_id == Project.id).join(Job, Job.queue_id == Queue.id)
        query = query.where(Job.id == job_id)
    else:
        query = query.where(Project.id == project_id)
    found = (conn or session or db.session).execute(query).first()
    return (found[0], found[1]) if found is not None else (project_id, None)


def list_query(
    *,
    actor: str | None = None,
    object_kind: str | None = None,
    object_id: str | None = None,
    job_id: int | None = None,
    action: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    project_id: int | None = None,
    caller: Any = None,
):
    """Audit events, newest first, filtered. `job_id` matches the job itself and everything done
    to its executions; a caller confined to one organization sees only its rows."""
    given = {"actor": actor, "object_kind": object_kind, "object_id": object_id, "action": action}
    bad = {
        name: f"must be at most {LABEL_MAX} characters, without NUL"
        for name, value in given.items()
        if value and (len(str(value)) > LABEL_MAX or "\x00" in str(value))
    }
    if bad:
        raise ValidationFailed(bad)
    query = select(AuditEvent).order_by(AuditEvent.id.desc())
    if caller is not None and not getattr(caller, "sees_everything", True):
        query = query.where(AuditEvent.organization_id == caller.organization_id)
    if actor:
        query = query.where(AuditEvent.actor == actor)
    if object_kind:
        query = query.where(AuditEvent.object_kind == object_kind)
    if object_id:
        query = query.where(AuditEvent.object_id == str(object_id))
    if job_id is not None:
        query = query.where(AuditEvent.job_id == job_id)
    if action:
        query = query.where(AuditEvent.action == action)
    if project_id is not None:
        query = query.where(AuditEvent.project_id == project_id)
    if since is not None:
        query = query.where(AuditEvent.created_at >= since)
    if until is not None:
        query = query.where(AuditEvent.created_at < until)
    return query


def parse_instant(value: str, what: str) -> datetime:
    """`2026-06-01`, `2026-06-01T12:00`, `2026-06-01T12:00:00Z` or with an offset, as aware UTC
    (no offset means UTC); a ValidationFailed naming `what` otherwise."""
    raw = (value or "").strip()
    try:
        parsed = datetime.fromisoformat(raw[:-1] + "+00:00" if raw[-1:] in ("Z", "z") else raw)
    except ValueError:
        raise ValidationFailed(
            {what: f"must be an ISO 8601 date or time such as 2026-06-01 or 2026-06-01T12:00:00Z, got {raw[:60]!r}"}
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def list_events(*, limit: int = 50, **filters) -> list[AuditEvent]:
    """The newest `limit` audit events matching the filters of `list_query`."""
    return list(db.session.scalars(list_query(**filters).limit(limit)))


def known_values() -> dict[str, list[str]]:
    """The object kinds and actions the log holds, for the page's filter choices."""
    return {
        "object_kinds": list(db.session.scalars(select(AuditEvent.object_kind).distinct().order_by("object_kind"))),
        "actions": list(db.session.scalars(select(AuditEvent.action).distinct().order_by("action"))),
    }


def to_dict(event: AuditEvent) -> dict[str, Any]:
    """An audit event as `flask audit list --json` and the API show it."""
    return {
        "id": event.id,
        "created_at": iso_z(event.created_at),
        "actor": event.actor,
        "source": event.source,
        "object_kind": event.object_kind,
        "object_id": event.object_id,
        "object_label": event.object_label,
        "action": event.action,
        "changes": event.changes or {},
        "address": event.address,
        "job_id": event.job_id,
        "project_id": event.project_id,
        "organization_id": event.organization_id,
    }


def prune_audit(conn: Connection, *, now: datetime, retention_days: int, dry_run: bool = False) -> int:
    """Delete audit events older than `retention_days` (0 keeps them forever); returns how many
    (with `dry_run`, counts them and deletes nothing).

    The only DELETE the database lets through (migration 0011): on PostgreSQL the transaction says
    so with a local setting, on SQLite with a row in `audit_prune_gate` that leaves with the
    transaction. Must run inside a write transaction on `conn`.
    """
    if retention_days <= 0:
        return 0
    cutoff = now - timedelta(days=retention_days)
    if dry_run:
        return conn.execute(select(func.count()).where(AuditEvent.created_at < cutoff)).scalar_one()
    doomed = delete(AuditEvent).where(AuditEvent.created_at < cutoff)
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT set_config('cronwell.audit_prune', 'on', true)"))
        deleted = conn.execute(doomed).rowcount
        conn.execute(text("SELECT set_config('cronwell.audit_prune', 'off', true)"))
    else:
        conn.execute(insert(AuditPruneGate).values(id=1))
        deleted = conn.execute(doomed).rowcount
        conn.execute(delete(AuditPruneGate))
    if deleted:
        insert_event(conn, "audit_pruned", now=now, deleted=deleted, older_than=iso_z(cutoff))
    return deleted
