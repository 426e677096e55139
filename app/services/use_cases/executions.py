"""Execution operations for operators: list, inspect, retry, cancel (queued or running).

Each function takes the `caller` (None: the system): an execution is the caller's when its job is
(`app.services.scoping`); another organization's is a NotFound like a missing one, and retry and
cancel need `Action.OPERATE`."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import defer, selectinload

from app import cache
from app.clock import iso_z
from app.database import begin_write
from app.definitions import text_limits
from app.domain.permissions import Action
from app.domain.states import CANCELLABLE, RETRYABLE, RUNNING_CANCELLABLE, ExecutionStatus, values
from app.extensions import db
from app.models import Execution, Job, WorkflowRun
from app.models.execution import ONE_OFF_LABEL, runs_task
from app.services import audit_trail, scoping
from app.services.caller import Caller
from app.services.engine import callbacks, wakeups
from app.services.errors import Conflict, NotFound, ValidationFailed
from app.services.events import record_event
from app.store import store_for
from app.store.rows import one_off_row


def get_execution(execution_id: int, *, with_attempts: bool = False, caller: Caller | None = None) -> Execution:
    query = scoping.executions(select(Execution).where(Execution.id == execution_id), caller)
    if with_attempts:
        query = query.options(selectinload(Execution.attempt_rows))
    execution = db.session.scalar(query)
    if execution is None:
        raise NotFound(f"execution {execution_id} does not exist")
    return execution


def list_query(
    *,
    status: str | None = None,
    job_id: int | None = None,
    queue_id: int | None = None,
    task: str | None = None,
    caller: Caller | None = None,
):
    """The executions query, newest first, for lists and pagination."""
    if status is not None and status not in values(ExecutionStatus):
        raise ValidationFailed({"status": f"must be one of {', '.join(values(ExecutionStatus))}, got {status!r}"})
    # Lists never show output or error (each up to 20,000 characters): leave them in the table.
    query = select(Execution).options(defer(Execution.output), defer(Execution.error)).order_by(Execution.id.desc())
    if status:
        query = query.where(Execution.status == status)
    if job_id is not None:
        query = query.where(Execution.job_id == job_id)
    if queue_id is not None:
        query = query.where(Execution.queue_id == queue_id)
    if task:
        query = query.where(runs_task(task))
    return scoping.executions(query, caller)


def list_executions(
    *,
    status: str | None = None,
    job_id: int | None = None,
    task: str | None = None,
    limit: int = 50,
    caller: Caller | None = None,
) -> list[Execution]:
    if job_id is not None and db.session.scalar(scoping.jobs(select(Job.id).where(Job.id == job_id), caller)) is None:
        raise NotFound(f"job {job_id} does not exist")
    return list(db.session.scalars(list_query(status=status, job_id=job_id, task=task, caller=caller).limit(limit)))


def retry_execution(execution_id: int, *, now: datetime, actor: str, caller: Caller | None = None) -> Execution:
    """Run a finished execution again as a new execution (history of the old one is kept)."""
    if caller is not None:
        caller.require(Action.OPERATE)
    begin_write(db.session)
    original = get_execution(execution_id, caller=caller)
    _refuse_workflow_parts(original, "retried", "flask workflow retry {run} [--from STEP]")
    if ExecutionStatus(original.status) not in RETRYABLE:
        raise Conflict(
            f"execution {execution_id} is {original.status}; only failed, timed_out, dead_lettered "
            "or cancelled executions can be retried"
        )
    job = original.job
    if job is None:
        return _retry_one_off(original, now=now, actor=actor)
    if not job.enabled:
        raise Conflict(f"job {job.id} ({job.name}) is disabled; enable it before retrying its executions")
    conn = db.session.connection()
    # The retry does the same work: the same override, and a callback's own task and parent.
    new_id = store_for(conn).insert_manual(
        conn,
        job,
        now=now,
        trigger="retry",
        retry_of_id=original.id,
        config_override=original.config_override,
        callback_task=original.callback_task,
        parent_id=original.parent_id,
    )
    record_event("execution_retried", now=now, actor=actor, job_id=job.id, execution_id=new_id, retry_of=original.id)
    audit_trail.record_change(
        actor,
        "retried",
        "execution",
        original.id,
        now=now,
        extra={"retry_execution_id": new_id},
        **_about(original),
    )
    cache.invalidate_on_commit(db.session, cache.keys_for_job_change(job.id))
    wakeups.notify_on_commit(db.session, work=True)
    db.session.commit()
    return get_execution(new_id)


REASON_MAX_CHARS = text_limits.CANCEL_REASON.maximum


def cancel_execution(
    execution_id: int, *, now: datetime, actor: str, reason: str | None = None, caller: Caller | None = None
) -> Execution:
    """Cancel an execution. A queued one (pending, retry_scheduled, legacy claimed) is cancelled
    at once. A running one is asked to stop: its worker sees the request within about a second
    (NOTIFY, or its poll), kills the task's process group (SIGTERM, then SIGKILL after the grace)
    and records it `cancelled`, never retried; returned still running, with the request stamped."""
    if caller is not None:
        caller.require(Action.OPERATE)
    reason = (reason or "").strip() or None
    if reason is not None and "\x00" in reason:
        raise ValidationFailed({"reason": "must be text without NUL characters"})
    if reason is not None and (problem := text_limits.too_long(reason, text_limits.CANCEL_REASON)):
        raise ValidationFailed({"reason": problem})
    begin_write(db.session)
    execution = get_execution(execution_id, caller=caller)
    status = ExecutionStatus(execution.status)
    if status not in CANCELLABLE:
        raise Conflict(
            f"execution {execution_id} is {execution.status}; only pending, retry_scheduled, claimed or running "
            "executions can be cancelled"
        )
    if db.session.get(WorkflowRun, execution_id) is not None:
        raise Conflict(
            f"execution {execution_id} is a workflow run: cancel it with flask workflow cancel {execution_id}"
        )
    why = f"cancelled by {actor}" + (f": {reason}" if reason else "")
    conn = db.session.connection()
    store = store_for(conn)
    if status in RUNNING_CANCELLABLE:
        if execution.cancel_requested_at is not None:
            raise Conflict(
                f"execution {execution_id} is already being cancelled (asked by {execution.cancel_requested_by} "
                f"at {iso_z(execution.cancel_requested_at)})"
            )
        worker_id = store.request_cancel(conn, execution_id, now=now, requested_by=actor, reason=why)
        if worker_id is None:
            raise Conflict(f"execution {execution_id} changed state meanwhile; nothing was cancelled")
        audit_trail.record_change(
            actor,
            "cancel_requested",
            "execution",
            execution_id,
            {"cancel_requested_by": None},
            {"cancel_requested_by": actor},
            now=now,
            extra={"reason": reason, "worker_id": worker_id},
            **_about(execution),
        )
        record_event(
            "execution_cancel_requested",
            now=now,
            actor=actor,
            job_id=execution.job_id,
            execution_id=execution_id,
            worker_id=worker_id,
            reason=reason,
        )
        wakeups.notify(conn, wakeups.CONTROL_CHANNEL, worker_id)  # its worker looks at once
    else:
        if not store.cancel_execution(conn, execution_id, now=now, reason=why):
            raise Conflict(f"execution {execution_id} changed state meanwhile; nothing was cancelled")
        if execution.batch_id is not None or execution.workflow_run_id is not None:
            # It may have been its batch's last item, or a step others wait for.
            callbacks.after_final(conn, [execution_id], now=now)
        audit_trail.record_change(
            actor,
            "cancelled",
            "execution",
            execution_id,
            {"status": status.value},
            {"status": ExecutionStatus.CANCELLED.value},
            now=now,
            extra={"reason": reason},
            **_about(execution),
        )
        record_event(
            "execution_cancelled",
            now=now,
            actor=actor,
            job_id=execution.job_id,
            execution_id=execution_id,
            reason=reason,
        )
    cache.invalidate_on_commit(db.session, cache.keys_for_job_change(execution.job_id))
    db.session.commit()
    db.session.expire_all()
    return get_execution(execution_id)


def _refuse_workflow_parts(execution: Execution, done: str, how: str) -> None:
    """A workflow run and its steps are retried as a run (which keeps the steps that succeeded)."""
    if execution.workflow_run_id is not None:
        raise Conflict(
            f"execution {execution.id} is step {execution.step!r} of workflow run {execution.workflow_run_id}: "
            f"it is {done} with its run: " + how.format(run=execution.workflow_run_id)
        )
    if db.session.get(WorkflowRun, execution.id) is not None:
        raise Conflict(f"execution {execution.id} is a workflow run: " + how.format(run=execution.id))


def _retry_one_off(original: Execution, *, now: datetime, actor: str) -> Execution:
    """An operator's retry of a one-off run: a new one-off run of the same task, config, queue and
    policies (the open write transaction commits it)."""
    if original.queue_id is None or original.project_id is None or original.task is None:
        raise Conflict(f"execution {original.id} has no queue any more (it was deleted); it cannot run again")
    row = one_off_row(
        task=original.task,
        config=dict(original.config_override or {}),
        project_id=original.project_id,
        queue_id=original.queue_id,
        priority=original.priority,
        max_attempts=original.max_attempts,
        timeout_seconds=original.timeout_seconds,
        queued_ttl_seconds=original.queued_ttl_seconds,
        success_ttl_seconds=original.success_ttl_seconds,
        failure_ttl_seconds=original.failure_ttl_seconds,
        now=now,
    )
    row.update(trigger="retry", retry_of_id=original.id)
    conn = db.session.connection()
    [(new_id, _)] = store_for(conn).insert_one_off_runs(conn, [row])
    record_event("execution_retried", now=now, actor=actor, execution_id=new_id, retry_of=original.id)
    audit_trail.record_change(
        actor, "retried", "execution", original.id, now=now, extra={"retry_execution_id": new_id}, **_about(original)
    )
    cache.invalidate_on_commit(db.session, cache.keys_for_job_change(None))
    wakeups.notify_on_commit(db.session, work=True)
    db.session.commit()
    return get_execution(new_id)


def _about(execution: Execution) -> dict:
    """`record_change` keywords for an execution: its job's name and id, and its project (a
    one-off run's own)."""
    if execution.job is None and execution.job_id is None:
        label = f"{ONE_OFF_LABEL} {execution.task} #{execution.id}"
        return {"label": label, "job_id": None, "project_id": execution.project_id}
    about = audit_trail.about_job(execution.job) if execution.job is not None else {"job_id": execution.job_id}
    return {**about, "label": f"{about.get('label') or 'job ' + str(execution.job_id)} #{execution.id}"}
