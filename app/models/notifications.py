"""Notification routing: what a project's jobs notify about and where, and the notices raised.

A notice is one fact worth telling someone: a run failed, a job recovered (its first success
after failures or an overdue), a run succeeded. Dead letters and overdue jobs are alerts
(app/models/operations.py) and are routed by the same rules. The notice pass
(app/services/engine/notices.py) raises notices from finished runs, once each (the dedup key),
and turns each routed one into a delivery, grouped per channel, job and event.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from app.clock import utcnow
from app.extensions import Model
from app.models.types import JSONType, UTCDateTime

NOTICE_EVENTS = ("failure", "recovery", "success")


class NotificationRoute(Model):
    """A project's default routing (job_id NULL) or one job's override of it."""

    __tablename__ = "notification_routes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    # The events notified: failure, dead_letter, overdue, recovery, success (an empty list: none).
    events: Mapped[list] = mapped_column(JSONType, default=list)
    # The channels (ids, of the project) they go to; NULL: every channel of the project (a job's
    # override: the channels of the project's default).
    channel_ids: Mapped[list | None] = mapped_column(JSONType)
    updated_by: Mapped[str] = mapped_column(String(200), default="system")
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    __table_args__ = (
        # One default per project and one override per job.
        Index(
            "uq_notification_routes_project_default",
            "project_id",
            unique=True,
            postgresql_where=text("job_id IS NULL"),
            sqlite_where=text("job_id IS NULL"),
        ),
        Index(
            "uq_notification_routes_job",
            "job_id",
            unique=True,
            postgresql_where=text("job_id IS NOT NULL"),
            sqlite_where=text("job_id IS NOT NULL"),
        ),
        {"sqlite_autoincrement": True},
    )


class Notice(Model):
    """A finished run worth telling someone about, raised once (its dedup key) by the notice pass."""

    __tablename__ = "notices"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int | None] = mapped_column(ForeignKey("projects.id", ondelete="SET NULL"), index=True)
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL"), index=True)
    # A plain column, like the event log's: the notice outlives its run's retention.
    execution_id: Mapped[int | None] = mapped_column(Integer)
    event: Mapped[str] = mapped_column(String(20))
    message: Mapped[str] = mapped_column(Text, default="")
    # "failure:execution:41": a run is noticed once, however many passes or schedulers see it.
    dedup_key: Mapped[str] = mapped_column(String(200), unique=True)
    # A recovery: the alerts it closed.
    details: Mapped[dict] = mapped_column(JSONType, default=dict)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)

    __table_args__ = (
        CheckConstraint("event IN ('failure', 'recovery', 'success')", name="event"),
        {"sqlite_autoincrement": True},
    )


class JobNotifyState(Model):
    """Whether a job is failing (its last noticed run failed): the next success is a recovery."""

    __tablename__ = "job_notify_state"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    failing_since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class NoticeCursor(Model):
    """How far the notice pass has read finished runs (one row, `executions`)."""

    __tablename__ = "notice_cursors"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    scanned_until: Mapped[datetime] = mapped_column(UTCDateTime)
