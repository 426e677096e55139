"""Operational records: dead letters, alerts, the event log and process heartbeats."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.clock import utcnow
from app.domain.event_kinds import WORKER_ID_MAX
from app.extensions import Model
from app.models.types import JSONType, UTCDateTime


class DeadLetter(Model):
    """An execution that exhausted its attempts; kept until an operator deals with it."""

    __tablename__ = "dead_letters"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    execution_id: Mapped[int] = mapped_column(ForeignKey("executions.id", ondelete="CASCADE"), unique=True)
    # NULL for a one-off run (no job).
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    reason: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    execution = relationship("Execution")
    job = relationship("Job")


class Alert(Model):
    __tablename__ = "alerts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"), index=True)
    execution_id: Mapped[int | None] = mapped_column(ForeignKey("executions.id", ondelete="SET NULL"))
    # The project the alert belongs to (migration 0007), kept when its job is deleted, so the
    # alert stays visible to that project's organization and to nobody else.
    project_id: Mapped[int | None] = mapped_column(ForeignKey("projects.id", ondelete="SET NULL"), index=True)
    kind: Mapped[str] = mapped_column(String(40))
    message: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    resolved_by: Mapped[str | None] = mapped_column(String(200))
    # What the alert is about, for deduplication: one open alert per key ("overdue:job:3").
    dedup_key: Mapped[str | None] = mapped_column(String(200))
    # The queue a queue_backlog alert is about (routes it to the queue's project).
    queue_id: Mapped[int | None] = mapped_column(ForeignKey("queues.id", ondelete="SET NULL"))
    # Grouping (app/services/engine/alert_grouping.py): how often the same thing happened while
    # the alert stayed open, and when it last did ("failed 12 times since 20:42").
    occurrences: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    last_seen_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    job = relationship("Job")

    __table_args__ = (
        CheckConstraint("(resolved_at IS NULL) = (resolved_by IS NULL)", name="resolved_pair"),
        Index(
            "ix_alerts_open",
            "created_at",
            postgresql_where=text("resolved_at IS NULL"),
            sqlite_where=text("resolved_at IS NULL"),
        ),
        # Deleting an execution sets its alerts' execution_id to NULL (retention, migration 0003).
        Index("ix_alerts_execution_id", "execution_id"),
        # At most one open alert per dedup key (overdue, consecutive failures, backlog, worker lost).
        Index(
            "uq_alerts_open_dedup_key",
            "dedup_key",
            unique=True,
            postgresql_where=text("resolved_at IS NULL AND dedup_key IS NOT NULL"),
            sqlite_where=text("resolved_at IS NULL AND dedup_key IS NOT NULL"),
        ),
        Index("ix_alerts_queue_id", "queue_id"),
        {"sqlite_autoincrement": True},  # never reuse an id a bookmark or script may still hold
    )


class Event(Model):
    """Structured event log and audit trail. Ids are plain columns so history survives deletes."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    type: Mapped[str] = mapped_column(String(60))
    job_id: Mapped[int | None] = mapped_column(Integer)
    execution_id: Mapped[int | None] = mapped_column(Integer, index=True)
    actor: Mapped[str] = mapped_column(String(200), default="system")
    payload: Mapped[dict] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    # The worker the event names (`worker_named(payload)`, which keeps it too), copied out by the
    # writers so that the events list's worker filter reads an index instead of every payload.
    worker_id: Mapped[str | None] = mapped_column(String(WORKER_ID_MAX))

    # The events list walks these backwards from its cursor (newest first, by kind, job, worker or
    # kind and job). Few events name a worker: its index holds only those.
    __table_args__ = (
        Index("ix_events_type_id", "type", "id"),
        Index("ix_events_job_id_id", "job_id", "id"),
        Index("ix_events_job_id_type_id", "job_id", "type", "id"),
        Index(
            "ix_events_worker_id_id",
            "worker_id",
            "id",
            postgresql_where=text("worker_id IS NOT NULL"),
            sqlite_where=text("worker_id IS NOT NULL"),
        ),
    )


class Heartbeat(Model):
    __tablename__ = "heartbeats"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_seen: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    info: Mapped[dict] = mapped_column(JSONType, default=dict)
    # The tasks a worker advertises, {name: code version}: it claims only runs of these. NULL for a
    # scheduler, and for a worker of a release before advertising (which claims every task).
    tasks: Mapped[dict | None] = mapped_column(JSONType)

    __table_args__ = (CheckConstraint("kind IN ('scheduler', 'worker')", name="kind"),)


class WorkerCommand(Model):
    """An operator's order to one worker (drain, stop now or reload), stored so it survives a missed
    NOTIFY: the worker reads its unacted commands on every wake and stamps `acted_at`."""

    __tablename__ = "worker_commands"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    worker_id: Mapped[str] = mapped_column(String(200), index=True)
    command: Mapped[str] = mapped_column(String(16))
    issued_by: Mapped[str] = mapped_column(String(200))
    issued_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    acted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    __table_args__ = (
        CheckConstraint("command IN ('drain', 'stop', 'reload')", name="command"),
        {"sqlite_autoincrement": True},
    )
