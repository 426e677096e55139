"""Plain-dict views of the models for `--json`, the JSON API and HTMX fragments.

Pure functions of the model objects they are given: no queries of their own beyond the loaded
relationships, no clock (callers pass `now` where an age is shown). Field names are the column
names, so `--json`, the API and the database speak one vocabulary; every datetime is ISO 8601 UTC
with a `Z` suffix.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from app.clock import iso_z
from app.definitions import dump_job
from app.domain.states import WorkerState, process_state, process_status, serves
from app.models import Alert, Attempt, DeadLetter, Execution, Heartbeat, Job


def iso(value: datetime | None) -> str | None:
    """An aware datetime as ISO 8601 UTC with `Z` (`2026-06-01T12:00:00Z`); None stays None."""
    return iso_z(value)


def job_to_dict(job: Job) -> dict[str, Any]:
    """Every stored field of a job, as the job definition declares them."""
    return dump_job(job)


def execution_to_dict(
    execution: Execution, *, include_output: bool = True, attempts: Iterable[Attempt] | None = None
) -> dict[str, Any]:
    """An execution; `attempts` is its attempt count, `attempt_history` (when rows are given)
    the tries themselves. Lists leave out output and error with include_output=False."""
    data: dict[str, Any] = {
        "id": execution.id,
        "job_id": execution.job_id,  # None: a one-off run
        "job_name": execution.job_label,  # "one-off" for a run without a job
        "task": execution.task_name,
        "one_off": execution.is_one_off,
        "scheduled_for": iso(execution.scheduled_for),
        "trigger": execution.trigger,
        "idempotency_key": execution.idempotency_key,
        "status": execution.status,
        "reason": execution.reason,
        "attempts": execution.attempts,
        "max_attempts": execution.max_attempts,
        "queue": execution.queue,
        "priority": execution.priority,
        "available_at": iso(execution.available_at),
        "claimed_by": execution.claimed_by,
        "lease_expires_at": iso(execution.lease_expires_at),
        "started_at": iso(execution.started_at),
        "finished_at": iso(execution.finished_at),
        "duration_seconds": execution.duration_seconds,
        "exit_code": execution.exit_code,
        "retry_of_id": execution.retry_of_id,
        "config_override": execution.config_override,
        "batch_id": execution.batch_id,
        "parent_id": execution.parent_id,
        "callback_task": execution.callback_task,
        "task_version": execution.task_version,
        "project_id": execution.project_id if execution.job is None else execution.job.project_id,
        "timeout_seconds": execution.timeout_seconds if execution.job is None else execution.job.timeout_seconds,
        "cancel_requested_at": iso(execution.cancel_requested_at),
        "cancel_requested_by": execution.cancel_requested_by,
        "created_at": iso(execution.created_at),
        "updated_at": iso(execution.updated_at),
    }
    if include_output:
        data["output"] = execution.output
        data["error"] = execution.error
        data["result"] = decoded_result(execution.result)
    if attempts is not None:
        data["attempt_history"] = [attempt_to_dict(a, include_output=include_output) for a in attempts]
    return data


def decoded_result(text: str | None) -> Any:
    """An execution's stored result (JSON text) as its value; None when there is none."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:  # not written by a worker (stored results are always JSON)
        return text


def attempt_to_dict(attempt: Attempt, *, include_output: bool = True) -> dict[str, Any]:
    """One try of an execution."""
    duration = None
    if attempt.finished_at is not None:
        duration = (attempt.finished_at - attempt.started_at).total_seconds()
    data: dict[str, Any] = {
        "id": attempt.id,
        "execution_id": attempt.execution_id,
        "number": attempt.number,
        "worker_id": attempt.worker_id,
        "pid": attempt.pid,
        "status": attempt.status,
        "started_at": iso(attempt.started_at),
        "finished_at": iso(attempt.finished_at),
        "duration_seconds": duration,
        "exit_code": attempt.exit_code,
    }
    if include_output:
        data["output"] = attempt.output
        data["error"] = attempt.error
    return data


def alert_to_dict(alert: Alert) -> dict[str, Any]:
    return {
        "id": alert.id,
        "job_id": alert.job_id,
        "job_name": alert.job.name if alert.job is not None else None,
        "execution_id": alert.execution_id,
        "kind": alert.kind,
        "message": alert.message,
        "created_at": iso(alert.created_at),
        "resolved_at": iso(alert.resolved_at),
        "resolved_by": alert.resolved_by,
    }


def dead_letter_to_dict(dead_letter: DeadLetter) -> dict[str, Any]:
    return {
        "id": dead_letter.id,
        "execution_id": dead_letter.execution_id,
        "job_id": dead_letter.job_id,
        "job_name": dead_letter.job.name if dead_letter.job is not None else None,
        "reason": dead_letter.reason,
        "created_at": iso(dead_letter.created_at),
    }


def heartbeat_to_dict(heartbeat: Heartbeat, now: datetime, *, stale_after_seconds: int | None = None) -> dict[str, Any]:
    """A process heartbeat with its age at `now`; with a staleness threshold also its `state`
    (running | draining | stopped | stale), its `status` (alive | stopped | lost: the words of
    `flask worker list`), whether it `serving` (an alive worker that is not draining), and the
    `stopped` and `stale` flags."""
    age = max(0.0, (now - heartbeat.last_seen).total_seconds())
    data: dict[str, Any] = {
        "id": heartbeat.id,
        "kind": heartbeat.kind,
        "host": heartbeat.host,
        "pid": heartbeat.pid,
        "started_at": iso(heartbeat.started_at),
        "last_seen": iso(heartbeat.last_seen),
        "age_seconds": round(age, 3),
        "info": heartbeat.info or {},
    }
    if stale_after_seconds is not None:
        # A worker that said it stopped is not stale: it left, it did not die or hang.
        state = process_state((heartbeat.info or {}).get("state"), age, stale_after_seconds)
        data["state"] = state.value
        data["status"] = process_status(state).value
        data["serving"] = serves(state)
        data["stopped"] = state is WorkerState.STOPPED
        data["stale"] = state is WorkerState.STALE
    return data
