"""One-off runs: a task run now or later without a job (`flask task run`, `POST /api/v1/runs`).

A one-off run is an execution with no job (`job_id` NULL) that carries its task, config,
project and queue, and fixes at creation what a job would otherwise give: max_attempts, the
timeout (default `DEFAULT_JOB_TIMEOUT_SECONDS`) and the TTLs (`DEFAULT_*_TTL_SECONDS`). From
there it is work like any other: the worker claims it under its queue's pause and concurrency
limit, retries it with the default backoff, times it out, dead-letters it, and the lists, the
detail and explain show it as "one-off".

A list of up to `MAX_RUNS_PER_REQUEST` runs is created in one transaction: every run is
checked first, and one bad run refuses them all, its index in each message (`[3].config`). An
`idempotency_key` makes a run once per project: a second request with it (even concurrently:
the unique key column decides) gets the first run back, `created` False.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flask import current_app
from marshmallow import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app import cache
from app.clock import iso_z
from app.database import begin_write
from app.definitions.job import field_messages
from app.definitions.one_off import MAX_RUNS_PER_REQUEST, load_one_off
from app.domain.permissions import Action
from app.extensions import db
from app.models import Execution, Project, Queue
from app.services import audit_trail, scoping
from app.services.caller import Caller
from app.services.engine import wakeups
from app.services.errors import NotFound, ValidationFailed
from app.services.events import record_event
from app.services.use_cases import queues as queue_service
from app.services.use_cases.tenancy import find_project, working_project
from app.store import store_for
from app.store.rows import one_off_row

EVENTS_LISTED = 20  # a request's event names at most this many of the runs it created


@dataclass(frozen=True)
class CreatedRun:
    """A run a request asked for: the execution, and whether this request created it (False: its
    idempotency key named an existing run)."""

    execution: Execution
    created: bool


def _indexed(index: int | None, errors: dict[str, str]) -> dict[str, str]:
    return errors if index is None else {f"[{index}].{field}": message for field, message in errors.items()}


def _project(reference: str | None, caller: Caller | None, cache_: dict[str | None, Project]) -> Project:
    if reference not in cache_:
        cache_[reference] = find_project(reference, caller) if reference else working_project(caller)
    return cache_[reference]


def _queue(name: str, project: Project, cache_: dict[tuple[int, str], Queue]) -> Queue:
    key = (project.id, name)
    if key not in cache_:
        cache_[key] = queue_service.resolve_for_job(name, project_id=project.id)
    return cache_[key]


def create_runs(
    items: list[Any], *, now: datetime, actor: str, caller: Caller | None = None, single: bool = False
) -> list[CreatedRun]:
    """Create the one-off runs `items` (each a mapping of the run's fields) in one transaction,
    all or none. `single`: one run, its errors keyed by field alone."""
    if caller is not None:
        caller.require(Action.OPERATE)
    if not items:
        raise ValidationFailed({"runs": "give at least one run"})
    if len(items) > MAX_RUNS_PER_REQUEST:
        raise ValidationFailed({"runs": f"at most {MAX_RUNS_PER_REQUEST} runs in one request, got {len(items)}"})
    loaded: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    for index, item in enumerate(items):
        try:
            loaded.append(load_one_off(item, now=now))
        except ValidationError as exc:
            errors.update(_indexed(None if single else index, field_messages(exc)))
    if errors:
        raise ValidationFailed(errors)

    begin_write(db.session)
    settings = current_app.config
    projects: dict[str | None, Project] = {}
    queues: dict[tuple[int, str], Queue] = {}
    rows = []
    for index, run in enumerate(loaded):
        try:
            project = _project(run.get("project"), caller, projects)
            queue = _queue(run["queue"], project, queues)
        except ValidationFailed as exc:
            errors.update(_indexed(None if single else index, exc.errors))
            continue
        except NotFound as exc:
            raise NotFound(str(exc) if single else f"run [{index}]: {exc}") from None
        timeout = run["timeout_seconds"] if "timeout_seconds" in run else settings["DEFAULT_JOB_TIMEOUT_SECONDS"]
        rows.append(
            one_off_row(
                task=run["task"],
                config=run["config"],
                project_id=project.id,
                queue_id=queue.id,
                priority=run["priority"] if run.get("priority") is not None else queue.priority,
                max_attempts=run["max_attempts"],
                timeout_seconds=timeout,
                queued_ttl_seconds=settings["DEFAULT_QUEUED_TTL_SECONDS"],
                success_ttl_seconds=settings["DEFAULT_SUCCESS_TTL_SECONDS"],
                failure_ttl_seconds=settings["DEFAULT_FAILURE_TTL_SECONDS"],
                now=now,
                available_at=run["available_at"],
                idempotency_key=run.get("idempotency_key"),
            )
        )
    if errors:
        db.session.rollback()
        raise ValidationFailed(errors)

    conn = db.session.connection()
    answers = store_for(conn).insert_one_off_runs(conn, rows)
    created = [execution_id for execution_id, new in answers if new]
    if created:
        first = rows[0]
        record_event(
            "one_off_runs_created",
            now=now,
            actor=actor,
            execution_id=created[0] if len(created) == 1 else None,
            count=len(created),
            tasks=sorted({row["task"] for row in rows}),
            execution_ids=created[:EVENTS_LISTED],
            available_at=iso_z(first["available_at"]),
        )
        audit_trail.record_change(
            caller or actor,
            "created",
            "run",
            created[0],
            now=now,
            label=f"one-off {first['task']}" if len(rows) == 1 else f"{len(created)} one-off runs",
            project_id=first["project_id"],
            extra={
                "count": len(created),
                "execution_ids": created[:EVENTS_LISTED],
                "tasks": sorted({r["task"] for r in rows}),
            },
        )
        cache.invalidate_on_commit(db.session, cache.keys_for_job_change(None))
        wakeups.notify_on_commit(db.session, work=True)
    db.session.commit()
    by_id = {
        execution.id: execution
        for execution in db.session.scalars(
            select(Execution).where(Execution.id.in_({execution_id for execution_id, _ in answers}))
        )
    }
    return [CreatedRun(by_id[execution_id], new) for execution_id, new in answers]


def create_run(data: Any, *, now: datetime, actor: str, caller: Caller | None = None) -> CreatedRun:
    """Create one one-off run (see `create_runs`)."""
    return create_runs([data], now=now, actor=actor, caller=caller, single=True)[0]


def get_run(execution_id: int, caller: Caller | None = None) -> Execution:
    """An execution the caller may see (one-off or not), with its attempts."""
    query = scoping.executions(select(Execution).where(Execution.id == execution_id), caller)
    execution = db.session.scalar(query.options(selectinload(Execution.attempt_rows)))
    if execution is None:
        raise NotFound(f"execution {execution_id} does not exist")
    return execution
