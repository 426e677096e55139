"""Projects and queues: where jobs live and which workers run them.

A project groups queues (and, later, jobs and people); a fresh installation has one, `default`.
A queue is a row, not a string, so a typo is an error instead of a job nobody runs: it carries an
optional concurrency limit across all workers, a pause switch with who/when/why, and the default
priority of its jobs.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, CheckConstraint, ForeignKey, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.clock import utcnow
from app.extensions import Model
from app.models.types import JSONType, UTCDateTime

DEFAULT_PROJECT = "default"
DEFAULT_QUEUE = "default"


class Project(Model):
    __tablename__ = "projects"
    __table_args__ = (
        UniqueConstraint("organization_id", "name", name="uq_projects_organization_name"),
        {"sqlite_autoincrement": True},  # never reuse an id a script may still hold
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # The organization the project belongs to (migration 0007); its name is unique there.
    organization_id: Mapped[int] = mapped_column(ForeignKey("organizations.id", ondelete="RESTRICT"))
    name: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(Text, default="", server_default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    organization = relationship("Organization", lazy="joined", innerjoin=True)

    @property
    def full_name(self) -> str:
        """`ORG/PROJECT`, as callers name a project (CLI --project, the API's `project` field)."""
        return f"{self.organization.name}/{self.name}"

    def __repr__(self) -> str:
        return f"<Project {self.id} {self.name!r}>"


class Queue(Model):
    __tablename__ = "queues"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="RESTRICT"))
    name: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(Text, default="", server_default="")
    # Running executions of this queue across all workers; NULL = no limit.
    concurrency_limit: Mapped[int | None] = mapped_column(Integer)
    # The priority a job of this queue gets unless it names its own (lower runs first).
    priority: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    paused: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    paused_by: Mapped[str | None] = mapped_column(String(200))
    paused_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    paused_reason: Mapped[str | None] = mapped_column(Text)
    # Slots of the concurrency limit held by running executions (`holds_slot`), kept by the
    # PostgreSQL claim in the same statement that starts work (ADR 0008). Unlimited queues never
    # write it, so the busiest queue's row is not a point of contention.
    slots_taken: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # At most N starts per period (`10/minute`) across all workers; NULL: no limit. `rate_starts`
    # holds the last N start instants (epoch seconds, newest first), kept by the worker's claim
    # under this row's lock like `slots_taken`.
    rate_limit: Mapped[str | None] = mapped_column(String(32))
    rate_starts: Mapped[list | None] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    __table_args__ = (
        UniqueConstraint("project_id", "name", name="uq_queues_project_name"),
        CheckConstraint("concurrency_limit IS NULL OR concurrency_limit >= 1", name="concurrency_limit_positive"),
        CheckConstraint("slots_taken >= 0", name="slots_taken_nonnegative"),
        CheckConstraint("priority BETWEEN -1000 AND 1000", name="priority_range"),
        CheckConstraint("(paused) = (paused_at IS NOT NULL)", name="paused_at_iff_paused"),
        CheckConstraint("length(name) > 0", name="name_not_empty"),
        {"sqlite_autoincrement": True},
    )

    project = relationship("Project")

    def __repr__(self) -> str:
        return f"<Queue {self.id} {self.name!r}>"
