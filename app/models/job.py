"""A job: a registered task + its config + a schedule + policies."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    event,
    inspect,
    select,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.clock import utcnow
from app.domain.retry import RetryKind
from app.domain.states import AlertMode, Isolation, MisfirePolicy, OverlapPolicy, ScheduleType, values
from app.extensions import Model
from app.models.types import JSONType, UTCDateTime


def _in(column: str, allowed: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in allowed)})"


class Job(Model):
    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Unique within its project, not site-wide (uq_jobs_project_id_name; the use case also refuses
    # a name differing only in case).
    name: Mapped[str] = mapped_column(String(200))
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
    # NULL: no hard timeout (the worker renews the lease while the task runs).
    timeout_seconds: Mapped[int | None] = mapped_column(Integer, default=30, server_default="30")
    alert_mode: Mapped[str] = mapped_column(String(10), default="web", server_default="web")
    # process: a fresh forked process per attempt; pool: a reused pool process (app/executor/pool.py).
    isolation: Mapped[str] = mapped_column(String(10), default="process", server_default="process")
    retention_count: Mapped[int] = mapped_column(Integer, default=500, server_default="500")
    retention_days: Mapped[int] = mapped_column(Integer, default=30, server_default="30")
    # The queue its runs go to (a row: naming an unknown queue is an error, not a starved job).
    queue_id: Mapped[int] = mapped_column(ForeignKey("queues.id", ondelete="RESTRICT"), index=True)
    # Always its queue's project (set from the queue on insert). Indexed by uq_jobs_project_id_name,
    # which leads with it.
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="RESTRICT"))
    priority: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Run limits, retry kinds and TTLs (app/domain/run_limits.py, app/domain/retry.py).
    start_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # no occurrence before it
    end_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # no occurrence after it
    max_runs: Mapped[int | None] = mapped_column(Integer)  # NULL: forever
    # Scheduled occurrences created as runnable executions (missed rows do not count).
    runs_created: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    retry_kind: Mapped[str] = mapped_column(String(12), default="exponential", server_default="exponential")
    retry_max_delay_seconds: Mapped[int | None] = mapped_column(Integer)  # NULL: no cap of its own
    retry_jitter: Mapped[float] = mapped_column(Float, default=0.0, server_default="0.0")
    success_ttl_seconds: Mapped[int] = mapped_column(Integer, default=-1, server_default="-1")  # -1: forever
    failure_ttl_seconds: Mapped[int] = mapped_column(Integer, default=-1, server_default="-1")
    queued_ttl_seconds: Mapped[int | None] = mapped_column(Integer)  # NULL: waits as long as it takes
    # Callbacks: a task run as its own execution (trigger callback) when a run of this job ends
    # succeeded, or failed for good (after its last attempt); NULL: none.
    on_success: Mapped[str | None] = mapped_column(String(100))
    on_success_config: Mapped[dict] = mapped_column(JSONType, default=dict, server_default="{}")
    on_failure: Mapped[str | None] = mapped_column(String(100))
    on_failure_config: Mapped[dict] = mapped_column(JSONType, default=dict, server_default="{}")
    # Operator insight (docs/insight.md). 0 turns each off.
    # Runs become available this many seconds after their nominal time, at most: a deterministic
    # offset from the job id (app/domain/jitter.py), so a thousand `0 * * * *` jobs spread out.
    jitter_seconds: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Disable the job after this many consecutive failed runs (auto-pause), with disabled_reason.
    pause_after_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Dead-man's switch: an `overdue` alert when no run succeeded within this many seconds.
    expect_success_within_seconds: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # A `consecutive_failures` alert after this many failed runs in a row.
    alert_after_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Why the system disabled the job (auto-pause, or a run limit reached: max_runs, end_at);
    # cleared when it is enabled again.
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    # The job file (or API source) that owns the job: `flask job apply` sets it, `--prune` deletes
    # only jobs of the source it applies; NULL for a job made by hand (app/services/use_cases/job_files.py).
    managed_by: Mapped[str | None] = mapped_column(String(300))
    # While a run of its unique key (`unique_key`, or the job itself) waits or runs, a trigger
    # returns that run instead of adding one (`deduplicated`).
    unique: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    unique_key: Mapped[str | None] = mapped_column(String(200))
    # At most N starts per period (`10/minute`), across all workers; NULL: no limit. `rate_starts`
    # holds the last N start instants (epoch seconds, newest first), kept by the worker's claim.
    rate_limit: Mapped[str | None] = mapped_column(String(32))
    rate_starts: Mapped[list | None] = mapped_column(JSONType)
    # A workflow's steps (app/definitions/workflow.py); NULL: not a workflow.
    steps: Mapped[list | None] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    __table_args__ = (
        CheckConstraint(_in("schedule_type", values(ScheduleType)), name="schedule_type"),
        CheckConstraint(_in("overlap_policy", values(OverlapPolicy)), name="overlap_policy"),
        CheckConstraint(_in("misfire_policy", values(MisfirePolicy)), name="misfire_policy"),
        CheckConstraint(_in("alert_mode", values(AlertMode)), name="alert_mode"),
        CheckConstraint(_in("isolation", values(Isolation)), name="isolation"),
        CheckConstraint("misfire_grace_seconds >= 0", name="misfire_grace_nonnegative"),
        CheckConstraint("max_attempts >= 1", name="max_attempts_positive"),
        CheckConstraint("retry_backoff_seconds >= 0", name="retry_backoff_nonnegative"),
        CheckConstraint("timeout_seconds IS NULL OR timeout_seconds >= 1", name="timeout_positive"),
        CheckConstraint("max_runs IS NULL OR max_runs >= 1", name="max_runs_positive"),
        CheckConstraint("runs_created >= 0", name="runs_created_nonnegative"),
        CheckConstraint(_in("retry_kind", values(RetryKind)), name="retry_kind"),
        CheckConstraint("retry_max_delay_seconds IS NULL OR retry_max_delay_seconds >= 1", name="retry_max_delay"),
        CheckConstraint("retry_jitter >= 0 AND retry_jitter <= 1", name="retry_jitter_fraction"),
        CheckConstraint("success_ttl_seconds >= -1 AND failure_ttl_seconds >= -1", name="result_ttl_range"),
        CheckConstraint("queued_ttl_seconds IS NULL OR queued_ttl_seconds >= 1", name="queued_ttl_positive"),
        CheckConstraint("retention_count >= 0 AND retention_days >= 0", name="retention_nonnegative"),
        CheckConstraint("length(name) > 0", name="name_not_empty"),
        UniqueConstraint("project_id", "name"),
        CheckConstraint(
            "jitter_seconds >= 0 AND pause_after_failures >= 0 AND expect_success_within_seconds >= 0"
            " AND alert_after_failures >= 0",
            name="insight_nonnegative",
        ),
        # The due query (`enabled AND next_run_at <= now`) scans only enabled jobs in time order.
        Index("ix_jobs_due", "next_run_at", postgresql_where=text("enabled"), sqlite_where=text("enabled")),
        # The workflow passes look at workflow jobs only: none at all on most installations.
        Index(
            "ix_jobs_workflows",
            "id",
            postgresql_where=text("steps IS NOT NULL"),
            sqlite_where=text("steps IS NOT NULL"),
        ),
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


def _project_of_queue(connection, queue_id: int) -> int | None:
    from app.models.queue import Queue

    return connection.scalar(select(Queue.project_id).where(Queue.id == queue_id))


@event.listens_for(Job, "before_insert")
def _project_from_queue(mapper, connection, job: Job) -> None:
    """A job lies in its queue's project: a row added with only a queue gets the queue's project."""
    if job.project_id is None:
        job.project_id = _project_of_queue(connection, job.queue_id)


@event.listens_for(Job, "before_update")
def _project_follows_queue(mapper, connection, job: Job) -> None:
    """A row given another queue follows it into the queue's project (the job use case only ever
    offers queues of the job's own project; this keeps direct writes from splitting the two)."""
    if inspect(job).attrs.queue_id.history.has_changes():
        job.project_id = _project_of_queue(connection, job.queue_id)
