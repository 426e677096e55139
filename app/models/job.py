"""A job: a registered task + its config + a schedule + policies."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, CheckConstraint, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.clock import utcnow
from app.domain.states import AlertMode, MisfirePolicy, OverlapPolicy, ScheduleType, values
from app.extensions import db
from app.models.types import JSONType, UTCDateTime


def _in(column: str, allowed: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in allowed)})"


class Job(db.Model):
    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    description: Mapped[str] = mapped_column(Text, default="", server_default="")
    task: Mapped[str] = mapped_column(String(100))
    config: Mapped[dict] = mapped_column(JSONType, default=dict)
    schedule_type: Mapped[str] = mapped_column(String(20))
    schedule: Mapped[dict] = mapped_column(JSONType)
    timezone: Mapped[str] = mapped_column(String(64), default="UTC", server_default="UTC")
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default=text("true"))
    # UTC instant of the next occurrence; NULL when the schedule has no more (a fired one_time).
    next_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    overlap_policy: Mapped[str] = mapped_column(String(10), default="skip", server_default="skip")
    misfire_policy: Mapped[str] = mapped_column(String(10), default="coalesce", server_default="coalesce")
    misfire_grace_seconds: Mapped[int] = mapped_column(Integer, default=60, server_default="60")
    max_attempts: Mapped[int] = mapped_column(Integer, default=3, server_default="3")
    retry_backoff_seconds: Mapped[int] = mapped_column(Integer, default=10, server_default="10")
    timeout_seconds: Mapped[int] = mapped_column(Integer, default=30, server_default="30")
    alert_mode: Mapped[str] = mapped_column(String(10), default="web", server_default="web")
    retention_count: Mapped[int] = mapped_column(Integer, default=500, server_default="500")
    retention_days: Mapped[int] = mapped_column(Integer, default=30, server_default="30")
    # The queue its runs go to (a row: naming an unknown queue is an error, not a starved job).
    queue_id: Mapped[int] = mapped_column(ForeignKey("queues.id", ondelete="RESTRICT"), index=True)
    priority: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    __table_args__ = (
        CheckConstraint(_in("schedule_type", values(ScheduleType)), name="schedule_type"),
        CheckConstraint(_in("overlap_policy", values(OverlapPolicy)), name="overlap_policy"),
        CheckConstraint(_in("misfire_policy", values(MisfirePolicy)), name="misfire_policy"),
        CheckConstraint(_in("alert_mode", values(AlertMode)), name="alert_mode"),
        CheckConstraint("misfire_grace_seconds >= 0", name="misfire_grace_nonnegative"),
        CheckConstraint("max_attempts >= 1", name="max_attempts_positive"),
        CheckConstraint("retry_backoff_seconds >= 0", name="retry_backoff_nonnegative"),
        CheckConstraint("timeout_seconds >= 1", name="timeout_positive"),
        CheckConstraint("retention_count >= 0 AND retention_days >= 0", name="retention_nonnegative"),
        CheckConstraint("length(name) > 0", name="name_not_empty"),
        # The due query (`enabled AND next_run_at <= now`) scans only enabled jobs in time order.
        Index("ix_jobs_due", "next_run_at", postgresql_where=text("enabled"), sqlite_where=text("enabled")),
        {"sqlite_autoincrement": True},  # never reuse an id a bookmark or script may still hold
    )

    queue_row = relationship("Queue", lazy="joined", innerjoin=True)

    @property
    def queue(self) -> str:
        """The name of its queue (what people and scripts use)."""
        return self.queue_row.name

    @property
    def exclusive(self) -> bool:
        """Whether at most one run of this job may be in flight at a time."""
        return self.overlap_policy != OverlapPolicy.ALLOW.value

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.name!r}>"
