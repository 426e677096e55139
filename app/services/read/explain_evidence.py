"""Evidence for explain, as app/domain/explain.py reads it: an execution as a run record, a queue
with its live workers and its rate limit. Shared by the job and execution explain
(app/services/read/explain.py) and the per-step explain of workflow runs
(app/services/read/workflow_explain.py)."""

from __future__ import annotations

from datetime import datetime

from app.domain.explain import QueueState, RunRecord
from app.domain.rate_limits import allowance, parse_rate_limit
from app.models import Execution, Queue
from app.services.read.workers import WorkerView, live_serving


def run_record(execution: Execution) -> RunRecord:
    """An execution as evidence."""
    return RunRecord(
        id=execution.id,
        scheduled_for=execution.scheduled_for,
        trigger=execution.trigger,
        status=execution.status,
        reason=execution.reason,
        created_at=execution.created_at,
        available_at=execution.available_at,
        finished_at=execution.finished_at,
        cancel_requested_by=execution.cancel_requested_by,
        task=task_forked(execution),
    )


def task_forked(execution: Execution) -> str | None:
    """The task a run forks (what a worker must offer to claim it), as the claim reads it; None
    for a workflow's own run, which forks none (the scheduler starts its steps)."""
    if execution.callback_task is None and execution.task is None and execution.job is not None:
        if execution.job.steps is not None:
            return None
    return execution.task_name


def queue_state(queue: Queue | None, workers: list[WorkerView], now: datetime) -> QueueState:
    """A queue as evidence: paused (by whom, why), the live workers among `workers` serving it
    and the tasks they offer, its rate limit and the room left in it. A run whose queue was
    deleted (or that has none) gets an empty one, `(deleted)`."""
    if queue is None:
        return QueueState(name="(deleted)")
    live = live_serving(workers, queue.name)
    return QueueState(
        name=queue.name,
        paused=queue.paused,
        paused_at=queue.paused_at,
        paused_by=queue.paused_by,
        paused_reason=queue.paused_reason,
        live_workers=len(live),
        offered_tasks=offered(live),
        rate_limit=queue.rate_limit,
        rate_room=room(queue.rate_limit, queue.rate_starts, now),
    )


def offered(live: list[WorkerView]) -> frozenset[str] | None:
    """Every task the live workers `live` advertise; None when one advertises nothing (it claims any)."""
    if any(view.tasks is None for view in live):
        return None
    return frozenset(name for view in live for name in view.tasks or {})


def room(rate_limit: str | None, rate_starts: list | None, now: datetime) -> int | None:
    """How many more starts a rate limit allows at `now`; None without one."""
    if not rate_limit:
        return None
    return allowance(parse_rate_limit(rate_limit), [float(at) for at in rate_starts or []], now.timestamp())
