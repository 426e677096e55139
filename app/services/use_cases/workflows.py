"""What operators do to workflow runs: read them, cancel one, resume a failed one from a step.

A run's id is its occurrence's execution id (app/models/workflow.py), so tenancy and
permissions are the anchor execution's. Retry never changes the run it resumes: it is a new run
(trigger `retry`, `retry_of_id` the old anchor) over the old run's steps, taking over the steps
that succeeded (their executions and results) and running the rest.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Select, select

from app import cache
from app.database import begin_write
from app.domain.permissions import Action
from app.domain.workflow import downstream, nodes_of, step_statuses
from app.extensions import db
from app.models import Execution, WorkflowRun
from app.services import audit_trail
from app.services.caller import Caller
from app.services.engine import callbacks, wakeups, workflows
from app.services.errors import Conflict, NotFound, ValidationFailed
from app.services.events import record_event
from app.services.use_cases.executions import get_execution
from app.services.use_cases.jobs import get_job
from app.sql import follow_ups
from app.sql import workflows as statements
from app.store import store_for
from app.store.rows import manual_row


def get_run(run_id: int, *, caller: Caller | None = None) -> WorkflowRun:
    """The workflow run `run_id` (its anchor execution's id), scoped like that execution."""
    try:
        anchor = get_execution(run_id, caller=caller)
    except NotFound:
        raise NotFound(f"workflow run {run_id} does not exist") from None
    run = db.session.get(WorkflowRun, anchor.id)
    if run is None:
        if anchor.job is not None and anchor.job.steps is not None and anchor.status == "pending":
            raise NotFound(f"workflow run {run_id} has not started yet (execution {run_id} is pending)")
        raise NotFound(f"execution {run_id} is not a workflow run")
    return run


def step_executions(run: WorkflowRun) -> dict[int, Execution]:
    """The executions the run's state points at (its own steps and those it took over)."""
    ids = [entry["execution_id"] for entry in run.state.values() if isinstance(entry.get("execution_id"), int)]
    if not ids:
        return {}
    return {row.id: row for row in db.session.scalars(select(Execution).where(Execution.id.in_(ids)))}


def list_query(job_id: int, *, caller: Caller | None = None) -> Select:
    """A workflow job's runs, newest first (the job scoped like any job read)."""
    job = get_job(job_id, caller=caller)
    return select(WorkflowRun).where(WorkflowRun.job_id == job.id).order_by(WorkflowRun.id.desc())


def list_runs(job_id: int, *, limit: int = 50, before: int | None = None, caller: Caller | None = None) -> list:
    """A workflow job's runs, newest first (`before`: ids below it, the next page)."""
    query = list_query(job_id, caller=caller).limit(limit)
    if before is not None:
        query = query.where(WorkflowRun.id < before)
    return list(db.session.scalars(query))


def cancel_run(
    run_id: int, *, now: datetime, actor: str, reason: str | None = None, caller: Caller | None = None
) -> WorkflowRun:
    """Cancel a running workflow run: its waiting and queued steps never run, its running ones
    are asked to stop (their workers kill them); the run ends `cancelled` once none runs."""
    if caller is not None:
        caller.require(Action.OPERATE)
    begin_write(db.session)
    run = get_run(run_id, caller=caller)
    anchor = run.anchor
    if anchor.status != "running" or run.finished_at is not None:
        raise Conflict(f"workflow run {run_id} is {anchor.status}; only a running workflow run can be cancelled")
    if anchor.cancel_requested_at is not None:
        raise Conflict(f"workflow run {run_id} is already being cancelled (asked by {anchor.cancel_requested_by})")
    why = f"cancelled by {actor}" + (f": {reason}" if reason else "") + f" with workflow run {run_id}"
    anchor.cancel_requested_at = now
    anchor.cancel_requested_by = actor
    db.session.flush()
    conn = db.session.connection()
    store = store_for(conn)
    stopped: list[int] = []
    for step in statements.live_steps(conn, [run.id]):
        if step.status in ("pending", "retry_scheduled", "claimed"):
            if store.cancel_execution(conn, step.id, now=now, reason=why):
                stopped.append(step.id)
        elif (worker_id := store.request_cancel(conn, step.id, now=now, requested_by=actor, reason=why)) is not None:
            wakeups.notify(conn, wakeups.CONTROL_CHANNEL, worker_id)  # its worker looks at once
    moved = workflows.hand_off(conn, [run.id], now=now)  # waiting steps: cancelled; maybe the end
    if moved.ended:
        callbacks.after_final(conn, moved.ended, now=now)
    record_event("workflow_cancelled", now=now, actor=actor, job_id=run.job_id, execution_id=run.id, reason=reason)
    audit_trail.record_change(
        caller or actor,
        "cancelled",
        "workflow_run",
        run.id,
        now=now,
        extra={"reason": reason, "steps_cancelled": stopped},
        **audit_trail.about_job(run.job),
    )
    cache.invalidate_on_commit(db.session, cache.keys_for_job_change(run.job_id))
    db.session.commit()
    db.session.expire_all()
    return get_run(run_id)


def retry_run(
    run_id: int, *, now: datetime, actor: str, from_step: str | None = None, caller: Caller | None = None
) -> WorkflowRun:
    """Resume a failed or cancelled workflow run as a new run: every step that did not succeed
    runs again, and with `from_step` that step and everything downstream of it too; the steps
    that succeeded are taken over with their results. Returns the new run (started at once
    unless its job's previous run is still in flight: then it waits, as any run of the job)."""
    if caller is not None:
        caller.require(Action.OPERATE)
    begin_write(db.session)
    old = get_run(run_id, caller=caller)
    anchor = old.anchor
    if old.finished_at is None or anchor.status not in ("failed", "cancelled"):
        raise Conflict(
            f"workflow run {run_id} is {anchor.status}; only a failed or cancelled workflow run can be retried"
        )
    job = old.job
    if not job.enabled:
        raise Conflict(f"job {job.id} ({job.name}) is disabled; enable it before retrying its runs")
    nodes = nodes_of(old.steps)
    names = [node.name for node in nodes]
    executions = step_executions(old)
    statuses = step_statuses(nodes, old.state, {row.id: row.status for row in executions.values()})
    rerun = {name for name in names if statuses.get(name) != "succeeded"}
    if from_step is not None:
        if from_step not in names:
            raise ValidationFailed(
                {"from": f"workflow run {run_id} has no step {from_step!r} (its steps: {', '.join(names)})"}
            )
        node = next(node for node in nodes if node.name == from_step)
        blocked = [up for up in node.after if statuses.get(up) != "succeeded"]
        if blocked:
            raise ValidationFailed(
                {"from": f"step {from_step!r} waits for {', '.join(blocked)}, which did not succeed: retry from there"}
            )
        rerun |= {from_step, *downstream(nodes, from_step)}
    kept = {name: dict(old.state[name]) for name in names if name not in rerun}
    conn = db.session.connection()
    row = manual_row(job, now=now, trigger="retry", retry_of_id=anchor.id)
    new_id = follow_ups.insert_execution(conn, row)
    assert new_id is not None  # a retry's key is new (a uuid)
    statements.insert_run(
        conn,
        run_id=new_id,
        job_id=job.id,
        steps=list(old.steps),
        state=kept,
        now=now,
        retry_of_id=old.id,
        retry_from=from_step,
    )
    workflows.start_job_now(conn, job.id, now=now)
    record_event(
        "workflow_retried",
        now=now,
        actor=actor,
        job_id=job.id,
        execution_id=new_id,
        retry_of=old.id,
        retry_from=from_step,
        rerun=sorted(rerun),
        kept=sorted(kept),
    )
    audit_trail.record_change(
        caller or actor,
        "retried",
        "workflow_run",
        old.id,
        now=now,
        extra={"retry_run_id": new_id, "from": from_step, "rerun": sorted(rerun)},
        **audit_trail.about_job(job),
    )
    cache.invalidate_on_commit(db.session, cache.keys_for_job_change(job.id))
    wakeups.notify_on_commit(db.session, work=True)
    db.session.commit()
    db.session.expire_all()
    new = db.session.get(WorkflowRun, new_id)
    assert new is not None  # written above
    return new


def is_run(execution: Execution) -> bool:
    """Whether `execution` is a workflow run's anchor (started)."""
    return db.session.get(WorkflowRun, execution.id) is not None
