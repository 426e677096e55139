"""The audit log: who changed what, when, from where, with the before/after of the changed fields.

Append-only. Besides the code (no route or command edits it), the database refuses UPDATE and
DELETE of `audit_events` (migration 0011): on PostgreSQL a trigger lets a DELETE through only in a
transaction that set `cronwell.audit_prune = on` (the retention prune does); on SQLite, which has
no session settings, only while `audit_prune_gate` holds a row, which the prune inserts and removes
inside its own write transaction (SQLite has one writer at a time, so nobody else ever sees it).

Object and project ids are plain columns, not foreign keys: the history of a deleted job, queue
or project must outlive it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.clock import utcnow
from app.extensions import Model
from app.models.types import JSONType, UTCDateTime

AUDIT_SOURCES = ("web", "cli", "api", "system")


class AuditEvent(Model):
    """One change to one object."""

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(200), index=True)  # "web:alice", "cli", "api:bob", "system"
    source: Mapped[str] = mapped_column(String(16))
    object_kind: Mapped[str] = mapped_column(String(40))  # job, execution, queue, user, alert, worker, ...
    object_id: Mapped[str] = mapped_column(String(200))  # text: worker ids and names are not integers
    object_label: Mapped[str | None] = mapped_column(String(200))  # the object's name then (a deleted job's too)
    action: Mapped[str] = mapped_column(String(40))  # created, updated, deleted, enabled, paused, retried, ...
    changes: Mapped[dict] = mapped_column(JSONType, default=dict)  # {field: {"before": x, "after": y}}
    address: Mapped[str | None] = mapped_column(String(100))  # the client's address (web, API)
    job_id: Mapped[int | None] = mapped_column(Integer, index=True)  # the job concerned, for `--job`
    project_id: Mapped[int | None] = mapped_column(Integer)
    organization_id: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        CheckConstraint("source IN ('web', 'cli', 'api', 'system')", name="source"),
        Index("ix_audit_events_object", "object_kind", "object_id"),
        Index("ix_audit_events_organization_id_id", "organization_id", "id"),
        {"sqlite_autoincrement": True},
    )


class AuditPruneGate(Model):
    """SQLite only: a row here, inside the prune's transaction, lets its DELETE through."""

    __tablename__ = "audit_prune_gate"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
