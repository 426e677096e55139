"""The shapes rows travel in between the store, the worker and its turn, and the builders of new
execution rows: plain dataclasses and dicts, no I/O. Nothing here imports SQLAlchemy, Flask or
the models (ADR 0012: the worker parent uses them on a bare DB-API connection); app/store/rows.py
adds what needs the tables and re-exports the rest.

The claimed-row shape is declared here once (`ClaimedExecution` and its `column` metadata); each
statement renders its SELECT / RETURNING list from that declaration (`claimed_sql_list`, and
`claimed_columns` in the store) and reads rows back by name (`ClaimedExecution.from_mapping`),
never by position.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from operator import itemgetter
from typing import Any, Protocol

from app.clock import iso_z
from app.domain.limits import OUTPUT_LIMIT_CHARS
from app.domain.one_off import job_column_sql
from app.domain.retry import RetryPolicy
from app.domain.states import INITIAL, AttemptStatus, ExecutionStatus
from app.domain.states import ExecutionStatus as S

DISABLED_BEFORE_RUN = "job disabled before it could run"


def truncate(text_value: str | None, limit: int = OUTPUT_LIMIT_CHARS) -> str:
    """Cap stored output and errors at `limit` characters, saying that it was cut."""
    text_value = text_value or ""
    if len(text_value) <= limit:
        return text_value
    marker = f"\n[... truncated: {len(text_value)} characters in all]"
    return text_value[: limit - len(marker)] + marker


# --- creating -------------------------------------------------------------------------------


def occurrence_key(job_id: int, scheduled_for: datetime) -> str:
    """The idempotency key of a scheduled occurrence: the same on every scheduler."""
    return f"job:{job_id}:at:{iso_z(scheduled_for, 'microseconds')}"


def unique_key_of(job: JobColumns) -> str | None:
    """The key a unique job's runs hold while they wait or run: the job itself, or its named key
    within its project (jobs naming one key share it); None for a job that is not unique."""
    if not getattr(job, "unique", False):
        return None
    named = getattr(job, "unique_key", None)
    return f"key:{getattr(job, 'project_id', None)}:{named}" if named else f"job:{job.id}"


class JobColumns(Protocol):
    """What the row builders read of a job: a `Job`, a jobs row or a record of its columns."""

    @property
    def id(self) -> int: ...
    @property
    def max_attempts(self) -> int: ...
    @property
    def queue_id(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def overlap_policy(self) -> str: ...


def _new_row(
    job: JobColumns, *, scheduled_for: datetime, trigger: str, key: str, status: S, now: datetime
) -> dict[str, Any]:
    if S(status) not in INITIAL:
        raise ValueError(f"an execution cannot be created as {status}")
    return dict(
        job_id=job.id,
        scheduled_for=scheduled_for,
        trigger=trigger,
        idempotency_key=key,
        status=S(status).value,
        reason=None,
        attempts=0,
        max_attempts=job.max_attempts,
        # A workflow job's occurrence runs as its steps' executions: with no queue no worker
        # claims it (app/services/engine/workflows.py starts it). Its callbacks run in the queue.
        queue_id=None if getattr(job, "steps", None) and trigger != "callback" else job.queue_id,
        priority=job.priority,
        exclusive=job.overlap_policy != "allow",
        available_at=scheduled_for,
        retry_of_id=None,
        finished_at=now if S(status) is S.MISSED else None,
        output="",
        error="",
        unique_key=None,
        created_at=now,
        updated_at=now,
    )


def occurrence_row(
    job: JobColumns, scheduled_for: datetime, *, trigger: str, status: S, now: datetime, reason: str | None = None
) -> dict[str, Any]:
    """The execution row for one scheduled occurrence of `job` (a jobs row or Job)."""
    row = _new_row(
        job,
        scheduled_for=scheduled_for,
        trigger=trigger,
        key=occurrence_key(job.id, scheduled_for),
        status=status,
        now=now,
    )
    row["reason"] = reason
    # A backfill is an operator's explicit list of past occurrences: each is created, as asked.
    row["unique_key"] = unique_key_of(job) if trigger in ("schedule", "catch_up") else None
    return row


def manual_row(
    job: JobColumns,
    *,
    now: datetime,
    trigger: str = "manual",
    retry_of_id: int | None = None,
    available_at: datetime | None = None,
    config_override: dict[str, Any] | None = None,
    callback_task: str | None = None,
    parent_id: int | None = None,
) -> dict[str, Any]:
    """A manual (or operator retry) execution, runnable now or, with `available_at`, not before then
    (a delayed ad-hoc run: its scheduled_for is that instant too). An operator's retry of a
    callback keeps what makes it one (`callback_task`, its parent): one attempt, not exclusive."""
    key = f"job:{job.id}:{trigger}:{uuid.uuid4().hex}"
    at = max(now, available_at) if available_at is not None else now
    row = _new_row(job, scheduled_for=at, trigger=trigger, key=key, status=S.PENDING, now=now)
    row["retry_of_id"] = retry_of_id
    row["config_override"] = config_override
    if callback_task is not None:
        row.update(callback_task=callback_task, parent_id=parent_id, max_attempts=1, exclusive=False)
    else:
        row["unique_key"] = unique_key_of(job)
    return row


def one_off_key(project_id: int, idempotency_key: str | None) -> str:
    """The idempotency key of a one-off run: the caller's key within its project (a second run
    with it is not created: the unique column refuses it), or a fresh one."""
    if idempotency_key:
        return f"run:{project_id}:{idempotency_key}"
    return f"run:{project_id}:{uuid.uuid4().hex}"


def one_off_row(
    *,
    task: str,
    config: dict[str, Any],
    project_id: int,
    queue_id: int,
    priority: int,
    max_attempts: int,
    timeout_seconds: int | None,
    queued_ttl_seconds: int | None,
    success_ttl_seconds: int | None,
    failure_ttl_seconds: int | None,
    now: datetime,
    available_at: datetime | None = None,
    idempotency_key: str | None = None,
) -> dict[str, Any]:
    """A one-off run: `task` with `config` (its whole config, stored as the override), no job,
    runnable now or, with `available_at`, not before then. Not exclusive: it has no overlap
    policy; its queue's concurrency limit is how to throttle such runs."""
    at = max(now, available_at) if available_at is not None else now
    return dict(
        job_id=None,
        task=task,
        project_id=project_id,
        scheduled_for=at,
        trigger="manual",
        idempotency_key=one_off_key(project_id, idempotency_key),
        status=S.PENDING.value,
        reason=None,
        attempts=0,
        max_attempts=max_attempts,
        queue_id=queue_id,
        priority=priority,
        exclusive=False,
        available_at=at,
        retry_of_id=None,
        config_override=config,
        timeout_seconds=timeout_seconds,
        queued_ttl_seconds=queued_ttl_seconds,
        success_ttl_seconds=success_ttl_seconds,
        failure_ttl_seconds=failure_ttl_seconds,
        finished_at=None,
        output="",
        error="",
        created_at=now,
        updated_at=now,
    )


def batch_item_key(batch_id: int, index: int) -> str:
    return f"batch:{batch_id}:item:{index}"


def batch_item_row(
    job: JobColumns, *, batch_id: int, index: int, config_override: dict[str, Any], now: datetime
) -> dict[str, Any]:
    """Item `index` of a batch: a run of `job` with its own config override, runnable now. Items
    of a batch run side by side (not exclusive): the job's overlap policy is about its scheduled
    runs; a queue's concurrency limit is how to throttle a batch."""
    row = _new_row(
        job, scheduled_for=now, trigger="batch", key=batch_item_key(batch_id, index), status=S.PENDING, now=now
    )
    row.update(batch_id=batch_id, config_override=config_override, exclusive=False)
    return row


def callback_key(*, parent_id: int | None = None, batch_id: int | None = None, kind: str) -> str:
    """The idempotency key of a callback: one per parent (execution or batch) and kind, so a crash
    or a second recorder can never create two (INSERT ... ON CONFLICT DO NOTHING)."""
    return f"callback:{kind}:execution:{parent_id}" if parent_id is not None else f"callback:{kind}:batch:{batch_id}"


def callback_row(
    job: JobColumns,
    *,
    kind: str,
    task: str,
    config: dict[str, Any],
    now: datetime,
    parent_id: int | None = None,
    batch_id: int | None = None,
) -> dict[str, Any]:
    """A callback execution: `task` (not the job's) with `config` (the parent's outcome under
    `parent`), one attempt, never exclusive, runnable now, linked to its parent execution or batch."""
    key = callback_key(parent_id=parent_id, batch_id=batch_id, kind=kind)
    row = _new_row(job, scheduled_for=now, trigger="callback", key=key, status=S.PENDING, now=now)
    row.update(
        max_attempts=1,
        exclusive=False,
        parent_id=parent_id,
        batch_id=batch_id,
        callback_task=task,
        config_override=config,
    )
    return row


# --- claiming -------------------------------------------------------------------------------


def _col(table: str, name: str) -> Any:
    return field(metadata={"table": table, "column": name})


@dataclass(frozen=True)
class ClaimedExecution:
    """A row a worker's turn started (or cancelled): the execution and what of its job the
    worker needs. Each field says where it comes from (`executions` or `jobs`, which column);
    the backends render their column lists from this declaration."""

    id: int = _col("executions", "id")
    job_id: int | None = _col("executions", "job_id")  # None: a one-off run (app/domain/one_off.py)
    job_name: str = _col("jobs", "name")
    task: str = _col("jobs", "task")
    config: dict[str, Any] = _col("jobs", "config")
    timeout_seconds: int | None = _col("jobs", "timeout_seconds")
    job_enabled: bool = _col("jobs", "enabled")
    attempts: int = _col("executions", "attempts")
    max_attempts: int = _col("executions", "max_attempts")
    idempotency_key: str = _col("executions", "idempotency_key")
    lease_expires_at: datetime = _col("executions", "lease_expires_at")
    scheduled_for: datetime = _col("executions", "scheduled_for")
    trigger: str = _col("executions", "trigger")
    retry_backoff_seconds: int = _col("jobs", "retry_backoff_seconds")
    alert_mode: str = _col("jobs", "alert_mode")
    queue_id: int | None = _col("executions", "queue_id")
    # The job's retry kind, cap and jitter (app/domain/retry.py), with retry_backoff_seconds above.
    retry_kind: str = _col("jobs", "retry_kind")
    retry_max_delay_seconds: int | None = _col("jobs", "retry_max_delay_seconds")
    retry_jitter: float = _col("jobs", "retry_jitter")
    # Ad-hoc runs, batch items and callbacks: the override merged over `config` (a
    # callback's whole config), the task a callback runs instead of `task`, the batch of an item,
    # and the job's callback tasks (whether finishing this run may create a callback).
    config_override: dict[str, Any] | None = _col("executions", "config_override")
    callback_task: str | None = _col("executions", "callback_task")
    batch_id: int | None = _col("executions", "batch_id")
    on_success: str | None = _col("jobs", "on_success")
    on_failure: str | None = _col("jobs", "on_failure")
    isolation: str = _col("jobs", "isolation")  # process | pool: how the executor runs it
    # A workflow step: its run, its name and what the steps it waited for returned. Its task and
    # timeout are its own (`task`, `timeout_seconds` above read the row's value over the job's).
    workflow_run_id: int | None = _col("executions", "workflow_run_id")
    step: str | None = _col("executions", "step")
    upstream_results: dict[str, Any] | None = _col("executions", "upstream_results")

    @property
    def task_to_run(self) -> str:
        """The task this execution runs: a callback's own task, otherwise its job's."""
        return self.callback_task or self.task

    @property
    def config_to_run(self) -> dict[str, Any]:
        """The config the task gets: a callback's or a workflow step's own config; otherwise the job's config with the
        run's override merged over it (top-level keys of the override win)."""
        if self.callback_task or self.step:
            return dict(self.config_override or {})  # a callback's or a step's whole config
        return {**(self.config or {}), **(self.config_override or {})}

    @classmethod
    def from_mapping(cls, row: Mapping[str, Any]) -> ClaimedExecution:
        """Build from a row read by name (`row._mapping`)."""
        item = cls(*_by_name(row))
        if item.config is None or not isinstance(item.job_enabled, bool):
            item = replace(item, config=item.config or {}, job_enabled=bool(item.job_enabled))
        return item


CLAIMED_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ClaimedExecution))
_by_name = itemgetter(*CLAIMED_FIELDS)  # the row's values in declaration order, looked up by name


def claimed_sql_list(*, execution_alias: str, job_alias: str) -> str:
    """The claimed shape as a text SELECT / RETURNING list, each column labelled by its field.
    The job is LEFT JOINed: a one-off run (no job) reads its job columns from itself and
    app.domain.one_off."""

    def column(f: Any) -> str:
        if f.metadata["table"] == "jobs":
            expression = job_column_sql(f.metadata["column"], execution_alias=execution_alias, job_alias=job_alias)
        else:
            expression = f"{execution_alias}.{f.metadata['column']}"
        return f"{expression} AS {f.name}"

    return ", ".join(column(f) for f in fields(ClaimedExecution))


def claimed_null_list(type_of: Mapping[str, str], *, given: Mapping[str, str]) -> str:
    """The claimed shape as NULLs, for the other arms of a UNION: `given` maps the fields that
    arm does have to their expressions, `type_of` names the type of each NULL that needs a cast."""

    def column(name: str) -> str:
        if name in given:
            return f"{given[name]} AS {name}"
        return f"CAST(NULL AS {type_of[name]}) AS {name}" if name in type_of else f"NULL AS {name}"

    return ", ".join(column(name) for name in CLAIMED_FIELDS)


@dataclass(frozen=True)
class Turn:
    """What one worker turn (`record_and_claim`) did."""

    recorded: set[int]  # finished attempts written; a missing id was lost meanwhile
    started: list[tuple[ClaimedExecution, int]]  # now running, with the attempt number
    cancelled: list[ClaimedExecution]  # due, but their job had been disabled: cancelled instead


# --- recording ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """How one attempt ended, as the worker saw it."""

    status: AttemptStatus  # succeeded | failed | timed_out | cancelled
    exit_code: int | None
    output: str
    error: str
    pid: int | None = None
    result: str | None = None  # the JSON text of what the task returned (None: nothing)
    task_version: str | None = None  # the code version of the task that ran (app/tasks/loading.py)


@dataclass(frozen=True)
class Finished:
    """One attempt that came back from the executor, ready to record."""

    execution_id: int
    attempt_number: int
    outcome: Outcome
    retry_at: datetime | None  # set: attempts remain, run again then; None: the outcome is final

    @property
    def target(self) -> ExecutionStatus:
        """The status recording this moves the execution to."""
        return S.RETRY_SCHEDULED if self.retry_at is not None else S(self.outcome.status.value)


# --- recovery ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExpiredLease:
    """An in-flight row whose lease ran out, with what of its job recovery needs."""

    id: int
    job_id: int | None  # None: a one-off run
    status: str
    attempts: int
    max_attempts: int
    claimed_by: str | None
    job_name: str
    retry_backoff_seconds: int
    alert_mode: str
    cancel_requested_by: str | None = None  # set: an operator asked to cancel it; recovery cancels it
    retry_kind: str = "exponential"  # the job's retry rule (app/domain/retry.py)
    retry_max_delay_seconds: int | None = None
    retry_jitter: float = 0.0

    @property
    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(self.retry_kind, self.retry_backoff_seconds, self.retry_max_delay_seconds, self.retry_jitter)
