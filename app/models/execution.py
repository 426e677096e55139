"""Executions (one per occurrence or manual run) and their attempts."""

from __future__ import annotations

import json
from datetime import datetime

from sqlalchemy import Boolean, CheckConstraint, ForeignKey, Index, Integer, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.clock import utcnow
from app.domain.one_off import LABEL as ONE_OFF_LABEL
from app.domain.states import TERMINAL, UNIQUE_HELD, AttemptStatus, ExecutionStatus, Trigger, values
from app.extensions import Model
from app.models.types import JSONType, UTCDateTime

_TERMINAL_SQL = ", ".join(repr(s.value) for s in sorted(TERMINAL, key=lambda s: s.value))
_STATUS_SQL = ", ".join(repr(v) for v in values(ExecutionStatus))
_TRIGGER_SQL = ", ".join(repr(v) for v in values(Trigger))
_ATTEMPT_SQL = ", ".join(repr(v) for v in values(AttemptStatus))

# Rows a worker may claim. Kept in a partial index so finished history (the bulk of the table)
# never bloats the index the claim query walks.
_CLAIMABLE_WHERE = text("status IN ('pending', 'retry_scheduled')")
_IN_FLIGHT_WHERE = text("status IN ('claimed', 'running')")
# Where a unique key is held: at most one such row per key (the trigger's ON CONFLICT names it).
UNIQUE_HELD_WHERE = "unique_key IS NOT NULL AND status IN ({})".format(
    ", ".join(repr(s.value) for s in sorted(UNIQUE_HELD, key=lambda s: s.value))
)


# The foreign keys that point at executions.id. On PostgreSQL triggers enforce them instead
# (migration 0016, ADR 0011): one set-based statement per DELETE where the constraints ran five
# queries per deleted row. The models still declare them: SQLite keeps them, the ORM joins on them.
REFERENCES_BY_TRIGGER = frozenset(
    {
        "fk_attempts_execution_id_executions",
        "fk_dead_letters_execution_id_executions",
        "fk_alerts_execution_id_executions",
        "fk_executions_retry_of_id_executions",
        "fk_executions_parent_id_executions",
    }
)


def autogenerate_filter(dialect_name: str):
    """Alembic's `include_object` for a database of `dialect_name`: on PostgreSQL the foreign keys
    in REFERENCES_BY_TRIGGER are not compared (the schema has triggers in their place)."""

    def include_object(obj, name, type_, reflected, compare_to) -> bool:
        return not (
            dialect_name == "postgresql" and type_ == "foreign_key_constraint" and name in REFERENCES_BY_TRIGGER
        )

    return include_object


class Execution(Model):
    __tablename__ = "executions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # NULL for a one-off run (`flask task run`, POST /api/v1/runs): it carries its own `task`,
    # `project_id` and per-run policies below instead of a job's.
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    # The occurrence this execution stands for (UTC); for manual runs, when it was requested.
    scheduled_for: Mapped[datetime] = mapped_column(UTCDateTime)
    trigger: Mapped[str] = mapped_column(String(16))
    idempotency_key: Mapped[str] = mapped_column(String(200), unique=True)
    status: Mapped[str] = mapped_column(String(20), default=ExecutionStatus.PENDING.value)
    # Why it ended up where it is, when that is not obvious: "overlap", "misfire", "job disabled"...
    reason: Mapped[str | None] = mapped_column(Text)
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    max_attempts: Mapped[int] = mapped_column(Integer, default=3, server_default="3")
    # Copied from the job at creation so the claim orders and fences work without joining jobs.
    # NULL only for finished history of a queue that was deleted afterwards.
    queue_id: Mapped[int | None] = mapped_column(ForeignKey("queues.id", ondelete="SET NULL"))
    # Started under its queue's concurrency limit: gives the slot back when it leaves running.
    holds_slot: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    # An operator asked to stop it while it runs; its worker kills the task and records `cancelled`.
    cancel_requested_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cancel_requested_by: Mapped[str | None] = mapped_column(String(200))
    priority: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    exclusive: Mapped[bool] = mapped_column(Boolean, default=True, server_default=text("true"))
    available_at: Mapped[datetime] = mapped_column(UTCDateTime)
    claimed_by: Mapped[str | None] = mapped_column(String(200))
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    output: Mapped[str] = mapped_column(Text, default="", server_default="")
    error: Mapped[str] = mapped_column(Text, default="", server_default="")
    # The JSON text of what the task returned (NULL: nothing, or it did not succeed); apart from
    # `output`, which holds only what it printed. At most RESULT_MAX_BYTES.
    result: Mapped[str | None] = mapped_column(Text)
    # The code version of the task that ran the last attempt (app/tasks/loading.py).
    task_version: Mapped[str | None] = mapped_column(String(100))
    retry_of_id: Mapped[int | None] = mapped_column(ForeignKey("executions.id", ondelete="SET NULL"))
    # An ad-hoc run's or a batch item's config, merged over the job's config when the task starts;
    # for a callback, the whole config of its task (with the parent's outcome under `parent`).
    config_override: Mapped[dict | None] = mapped_column(JSONType)
    # The batch this row is an item of (trigger batch) or the on-complete callback of (trigger callback).
    batch_id: Mapped[int | None] = mapped_column(ForeignKey("batches.id", ondelete="CASCADE"))
    # A callback's parent execution (on_success / on_failure of the parent's job).
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("executions.id", ondelete="SET NULL"))
    # The task a callback runs instead of its job's task.
    callback_task: Mapped[str | None] = mapped_column(String(100))
    # A one-off run's task and project (tenancy scopes it by its own project, not a job's), and
    # the policies its job would have given, fixed when it was created (the settings' defaults
    # unless the caller chose): NULL on every job's execution.
    task: Mapped[str | None] = mapped_column(String(100))
    project_id: Mapped[int | None] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"))
    timeout_seconds: Mapped[int | None] = mapped_column(Integer)
    queued_ttl_seconds: Mapped[int | None] = mapped_column(Integer)
    success_ttl_seconds: Mapped[int | None] = mapped_column(Integer)
    failure_ttl_seconds: Mapped[int | None] = mapped_column(Integer)
    # A workflow step's run (the anchor execution's id: app/models/workflow.py), the step's name
    # and what the steps it waited for returned (step name -> result), fixed when it was created.
    # Not a foreign key: workflow_runs.id references executions, and a key each way would be a cycle.
    workflow_run_id: Mapped[int | None] = mapped_column(Integer)
    step: Mapped[str | None] = mapped_column(String(64))
    upstream_results: Mapped[dict | None] = mapped_column(JSONType)
    # The job's unique key (`job:<id>`, or `key:<project>:<name>`) when the job is unique; NULL otherwise.
    unique_key: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    # Not a column: set on the run a trigger returned instead of creating one (its unique key was held).
    deduplicated = False

    job = relationship("Job", lazy="joined")  # outer: a one-off run has no job
    queue_row = relationship("Queue")
    project_row = relationship("Project")  # a one-off run's project (a job's execution: None)
    attempt_rows = relationship(
        "Attempt",
        order_by="Attempt.number",
        cascade="all, delete-orphan",
        passive_deletes=True,
        back_populates="execution",
    )

    __table_args__ = (
        CheckConstraint(f"status IN ({_STATUS_SQL})", name="status"),
        CheckConstraint(f"trigger IN ({_TRIGGER_SQL})", name="trigger"),
        # finished_at is set exactly for terminal statuses.
        CheckConstraint(f"(status IN ({_TERMINAL_SQL})) = (finished_at IS NOT NULL)", name="finished_at_iff_terminal"),
        CheckConstraint("attempts >= 0 AND attempts <= max_attempts", name="attempts_within_max"),
        # A job's execution, or a one-off run of a task in a project.
        CheckConstraint("job_id IS NOT NULL OR (task IS NOT NULL AND project_id IS NOT NULL)", name="job_or_task"),
        # At most one execution per scheduled occurrence, even with several schedulers racing.
        Index(
            "uq_executions_occurrence",
            "job_id",
            "scheduled_for",
            unique=True,
            postgresql_where=text("trigger IN ('schedule', 'catch_up')"),
            sqlite_where=text("trigger IN ('schedule', 'catch_up')"),
        ),
        # At most one run in flight for jobs whose overlap policy is not `allow`.
        Index(
            "uq_executions_one_in_flight",
            "job_id",
            unique=True,
            postgresql_where=text("exclusive AND status IN ('claimed', 'running')"),
            sqlite_where=text("exclusive AND status IN ('claimed', 'running')"),
        ),
        # At most one waiting or running execution per unique key (jobs with `unique`).
        Index(
            "uq_executions_unique_key",
            "unique_key",
            unique=True,
            postgresql_where=text(UNIQUE_HELD_WHERE),
            sqlite_where=text(UNIQUE_HELD_WHERE),
        ),
        Index(
            "ix_executions_claimable",
            "priority",
            "available_at",
            "id",
            postgresql_where=_CLAIMABLE_WHERE,
            sqlite_where=_CLAIMABLE_WHERE,
        ),
        Index(
            "ix_executions_lease", "lease_expires_at", postgresql_where=_IN_FLIGHT_WHERE, sqlite_where=_IN_FLIGHT_WHERE
        ),
        # The lists (newest first, by job or by status) and the per-status counts read these
        # with index-only scans (migration 0002). On PostgreSQL the job's index carries status,
        # finished_at and created_at, so the jobs list's last outcome, its filter and the 24 h
        # success rate read no rows from the table (migration 0017).
        Index("ix_executions_job_id", "job_id", "id", postgresql_include=["status", "finished_at", "created_at"]),
        # The list filtered by queue, newest first; also what deleting a queue follows (SET NULL).
        # On PostgreSQL it carries trigger and status, so a queue list filtered by either counts
        # its rows from the index alone (migration 0014).
        Index("ix_executions_queue_id", "queue_id", "id", postgresql_include=["trigger", "status"]),
        # One queue's waiting rows: its statistics, whatever other queues hold (migration 0014).
        Index(
            "ix_executions_queue_waiting",
            "queue_id",
            "available_at",
            postgresql_where=_CLAIMABLE_WHERE,
            sqlite_where=_CLAIMABLE_WHERE,
        ),
        Index("ix_executions_job_status", "job_id", "status"),
        Index("ix_executions_status_id", "status", "id"),
        # The list filtered by trigger (manual runs, retries: few among many scheduled ones).
        Index("ix_executions_trigger_id", "trigger", "id"),
        Index("ix_executions_created", "created_at"),
        # The list in a date range, newest first: the id bounds of the range and the exact
        # created_at test both read from this index, so counting and stepping over a day of rows
        # is an index-only scan instead of a heap visit per row (migration 0015).
        Index("ix_executions_id_created", "id", "created_at"),
        # What finished lately, per queue: the queue statistics' last hour and 15 minutes.
        # The executions list sorted by finish reads it too (its ties on finished_at are few: an
        # incremental sort by id within each is all it adds, measured as fast as a two-column index).
        Index("ix_executions_finished_at", "finished_at"),
        # The executions list sorted by start, both ways, paged by a keyset on (started_at, id):
        # each page is a range scan of it (migration 0028).
        Index("ix_executions_started_id", "started_at", "id"),
        # Running executions per queue: the queue statistics.
        Index(
            "ix_executions_queue_running",
            "queue_id",
            postgresql_where=text("status = 'running'"),
            sqlite_where=text("status = 'running'"),
        ),
        # Deleting an execution sets retry_of_id to NULL in its retries; without this index each
        # deleted row scanned the whole table (retention, migration 0003). Partial: few rows are retries.
        Index(
            "ix_executions_retry_of_id",
            "retry_of_id",
            postgresql_where=text("retry_of_id IS NOT NULL"),
            sqlite_where=text("retry_of_id IS NOT NULL"),
        ),
        # A batch's items and callback, and a parent's callbacks (partial: most rows have neither).
        Index(
            "ix_executions_batch_id",
            "batch_id",
            "status",
            postgresql_where=text("batch_id IS NOT NULL"),
            sqlite_where=text("batch_id IS NOT NULL"),
        ),
        Index(
            "ix_executions_parent_id",
            "parent_id",
            postgresql_where=text("parent_id IS NOT NULL"),
            sqlite_where=text("parent_id IS NOT NULL"),
        ),
        # One-off runs of a project, newest first (the lists scoped by tenancy), and rows by task
        # (the lists filtered by task): partial, job rows are in neither (migration 0021).
        Index(
            "ix_executions_one_off",
            "project_id",
            "id",
            postgresql_where=text("job_id IS NULL"),
            sqlite_where=text("job_id IS NULL"),
        ),
        Index(
            "ix_executions_task",
            "task",
            "id",
            postgresql_where=text("task IS NOT NULL"),
            sqlite_where=text("task IS NOT NULL"),
        ),
        # A workflow run's steps (the run page, the hand-off's reads); job runs leave it empty.
        Index(
            "ix_executions_workflow_run",
            "workflow_run_id",
            "id",
            postgresql_where=text("workflow_run_id IS NOT NULL"),
            sqlite_where=text("workflow_run_id IS NOT NULL"),
        ),
        {"sqlite_autoincrement": True},  # never reuse an id a bookmark or script may still hold
    )

    @property
    def queue(self) -> str | None:
        """The name of its queue."""
        return self.queue_row.name if self.queue_row is not None else None

    @property
    def result_pretty(self) -> str | None:
        """The stored result as indented JSON (a string result as the JSON string), or None."""
        if self.result is None:
            return None
        try:
            return json.dumps(json.loads(self.result), indent=2, ensure_ascii=False)
        except ValueError:
            return self.result

    @property
    def is_one_off(self) -> bool:
        """A run of a task without a job."""
        return self.job_id is None

    @property
    def task_name(self) -> str | None:
        """The task it runs: a callback's own, a one-off run's, otherwise its job's."""
        if self.callback_task:
            return self.callback_task
        if self.task:
            return self.task
        return self.job.task if self.job is not None else None

    @property
    def job_label(self) -> str:
        """Its job's name, or "one-off" for a run without a job (as every list shows it)."""
        return self.job.name if self.job is not None else ONE_OFF_LABEL

    @property
    def is_terminal(self) -> bool:
        return ExecutionStatus(self.status) in TERMINAL

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None

    def __repr__(self) -> str:
        return f"<Execution {self.id} job={self.job_id} {self.status}>"


def runs_task(name: str):
    """A WHERE clause: the execution runs task `name` (a callback's own task, a one-off run's,
    otherwise its job's), for the lists filtered by task."""
    from sqlalchemy import and_, or_, select

    from app.models.job import Job

    of_jobs = select(Job.id).where(Job.task == name)
    return or_(
        Execution.callback_task == name,
        and_(Execution.callback_task.is_(None), or_(Execution.task == name, Execution.job_id.in_(of_jobs))),
    )


class Attempt(Model):
    """One try of an execution, so history stays truthful across retries and crashes."""

    __tablename__ = "attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    execution_id: Mapped[int] = mapped_column(ForeignKey("executions.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    worker_id: Mapped[str] = mapped_column(String(200))
    pid: Mapped[int | None] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default=AttemptStatus.RUNNING.value)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    output: Mapped[str] = mapped_column(Text, default="", server_default="")
    error: Mapped[str] = mapped_column(Text, default="", server_default="")

    execution = relationship("Execution", back_populates="attempt_rows")

    __table_args__ = (
        UniqueConstraint("execution_id", "number"),
        CheckConstraint(f"status IN ({_ATTEMPT_SQL})", name="status"),
        CheckConstraint("(status = 'running') = (finished_at IS NULL)", name="finished_at_iff_done"),
    )
