"""Per-step explain of workflow runs: what `flask job explain` and `flask execution explain` (and
the API and the job page behind them) add for a run of a workflow job, or for one of its steps.

For each step of the run, in the definition's order: its status, a fate code and a sentence
(app/domain/workflow_explain.py), with the evidence: the upstream steps it still waits for, the
steps whose bad end holds it back, and for a step waiting in its queue the queue's reason (paused,
no live worker serving it or offering the step's task, rate limit reached, no free slot).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import select

from app.domain.explain import Evidence, explain_run
from app.domain.workflow import CANCELLED, nodes_of, step_statuses
from app.domain.workflow_explain import QUEUED, WAITING, StepEvidence, explain_steps, steps_summary
from app.extensions import db
from app.models import Execution, WorkflowRun
from app.services.read.explain_evidence import queue_state, room, run_record
from app.services.read.workers import WorkerView, list_workers


def explain_runs(run_ids: Iterable[int], *, now: datetime) -> dict[int, dict[str, Any]]:
    """{run id: {"workflow_run_id", "steps", "summary"}} for those of `run_ids` that are started
    workflow runs (the others are left out): "steps" is one entry per step (`StepFate.to_json`),
    "summary" a sentence counting where they stand."""
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    runs = list(db.session.scalars(select(WorkflowRun).where(WorkflowRun.id.in_(ids))))
    if not runs:
        return {}
    referenced = {
        entry["execution_id"]
        for run in runs
        for entry in run.state.values()
        if isinstance(entry.get("execution_id"), int)
    }
    executions = (
        {row.id: row for row in db.session.scalars(select(Execution).where(Execution.id.in_(referenced)))}
        if referenced
        else {}
    )
    workers: list[WorkerView] | None = None  # read once, only if a step waits in a queue
    explained: dict[int, dict[str, Any]] = {}
    for run in runs:
        nodes = nodes_of(run.steps)
        statuses = step_statuses(nodes, run.state, {row.id: row.status for row in executions.values()})
        evidence = []
        for step in run.steps:
            entry = run.state.get(step["name"]) or {}
            execution = executions.get(entry["execution_id"]) if isinstance(entry.get("execution_id"), int) else None
            if execution is not None and execution.status in QUEUED and workers is None:
                workers = list_workers(now)
            evidence.append(_step_evidence(run, step, entry, statuses, execution, workers or [], now))
        fates = explain_steps(nodes, statuses, evidence)
        explained[run.id] = {
            "workflow_run_id": run.id,
            "steps": [fate.to_json() for fate in fates],
            "summary": f"Workflow run #{run.id}: {steps_summary(fates)}.",
        }
    return explained


def _step_evidence(
    run: WorkflowRun,
    step: dict[str, Any],
    entry: dict[str, Any],
    statuses: dict[str, str],
    execution: Execution | None,
    workers: list[WorkerView],
    now: datetime,
) -> StepEvidence:
    name = step["name"]
    after = tuple(step.get("after") or ())
    status = statuses.get(name, WAITING)
    if execution is None:
        execution_id = entry.get("execution_id") if isinstance(entry.get("execution_id"), int) else None
        by = run.anchor.cancel_requested_by if status == CANCELLED else None
        return StepEvidence(
            name, after, status, execution_id=execution_id, cancel_requested_by=by, pruned=execution_id is not None
        )
    queued = None
    if execution.status in QUEUED:
        record = run_record(execution)
        job = execution.job
        queued = explain_run(
            record,
            Evidence(
                now=now,
                job_created_at=execution.created_at,
                next_run_at=None,
                runs=[record],
                events=[],
                scheduler_spans=[],
                queue=queue_state(execution.queue_row, workers, now),
                job_rate_limit=job.rate_limit if job is not None else None,
                job_rate_room=room(job.rate_limit, job.rate_starts, now) if job is not None else None,
            ),
        )
    return StepEvidence(
        name,
        after,
        status,
        execution_id=execution.id,
        attempts=execution.attempts,
        max_attempts=execution.max_attempts,
        worker=execution.claimed_by,
        available_at=execution.available_at,
        reason=execution.reason,
        cancel_requested_by=execution.cancel_requested_by,
        kept_from_run=execution.workflow_run_id if execution.workflow_run_id != run.id else None,
        queued=queued,
    )
