"""Explain read model: gathers a job's evidence and asks app/domain/explain.py for the fates.

`explain_job(job_id, at=T, now=...)` or `explain_job(job_id, start=A, end=B, now=...)` returns one
JSON-ready document: the CLI (`flask job explain`), the job page's panel and the API print the same.
For an instant with no expected occurrence it explains the nearest ones before and after it. A
run of a workflow job, and a step's execution, also say per step why it runs, waits or will not
run (`details.steps`, app/services/read/workflow_explain.py).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select

from app.clock import iso_z
from app.domain.explain import EventRecord, Evidence, Fate, Span, explain_occurrence, explain_run
from app.extensions import db
from app.models import Event, Execution, Heartbeat, Job
from app.scheduling import ScheduleError, parse_schedule
from app.scheduling.timezones import resolve_timezone
from app.services import scoping
from app.services.caller import Caller
from app.services.errors import NotFound, ValidationFailed
from app.services.read.explain_evidence import queue_state, room, run_record
from app.services.read.workers import list_workers
from app.services.read.workflow_explain import explain_runs

MAX_OCCURRENCES = 500
MAX_WINDOW = timedelta(days=366)
# How far before a window runs are read, to find the run that blocked an overlap-skipped one.
_LOOK_BACK = timedelta(days=2)
# How far the search for the nearest occurrences goes before giving up.
_NEAREST_HORIZON = timedelta(days=3660)


def explain_job(
    job_id: int,
    *,
    now: datetime,
    at: datetime | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    caller: Caller | None = None,
) -> dict[str, Any]:
    """What became of a job's occurrences at `at`, or in [start, end]; see app/domain/explain.py."""
    job = db.session.scalar(scoping.jobs(select(Job).where(Job.id == job_id), caller))
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    if (at is None) == (start is None or end is None):
        raise ValidationFailed({"at": "give either an instant (at) or a window (from and to)"})
    if at is None and end < start:
        raise ValidationFailed({"to": "the window ends before it starts"})
    if at is None and end - start > MAX_WINDOW:
        raise ValidationFailed({"to": f"a window may span at most {MAX_WINDOW.days} days"})
    try:
        schedule = parse_schedule(job.schedule_type, job.schedule, job.timezone)
    except (ScheduleError, ValueError) as exc:
        raise ValidationFailed({"schedule": f"the job's schedule cannot be read: {exc}"}) from None
    zone = resolve_timezone(job.timezone)
    document: dict[str, Any] = {
        "job": {"id": job.id, "name": job.name, "timezone": job.timezone, "enabled": job.enabled},
        "now": iso_z(now),
    }

    def shown(fates: list[Fate]) -> list[dict[str, Any]]:
        _with_steps(fates, now)
        items = [fate.to_json() for fate in fates]
        for item, fate in zip(items, fates):
            item["local"] = fate.scheduled_for.astimezone(zone).isoformat()
        return items

    if at is not None:
        fire = schedule.fire_after(at - timedelta(microseconds=1))
        evidence_from, evidence_to = at, at
        nearest_before = _latest_at_or_before(schedule, at - timedelta(microseconds=1))
        nearest_after = schedule.fire_after(at)
        document["at"] = iso_z(at)
        if fire is not None and fire.instant == at:
            evidence = _evidence(job, at, at, now)
            [document["occurrence"]] = shown([explain_occurrence(at, evidence, dst_note=fire.note)])
            document["nearest"] = None
            return document
        document["occurrence"] = None
        points = [f for f in (nearest_before, nearest_after) if f is not None]
        if points:
            evidence_from = min(evidence_from, *(f.instant for f in points))
            evidence_to = max(evidence_to, *(f.instant for f in points))
        evidence = _evidence(job, evidence_from, evidence_to, now)
        nearest = {
            side: explain_occurrence(fire.instant, evidence, dst_note=fire.note)
            for side, fire in (("before", nearest_before), ("after", nearest_after))
            if fire is not None
        }
        document["nearest"] = dict.fromkeys(("before", "after")) | dict(
            zip(nearest, shown(list(nearest.values())), strict=True)
        )
        document["summary"] = f"No occurrence of job {job.id} is expected at {iso_z(at)}; the nearest are shown."
        return document

    fires = []
    current = start - timedelta(microseconds=1)
    truncated = False
    while True:
        fire = schedule.fire_after(current)
        if fire is None or fire.instant > end:
            break
        if len(fires) == MAX_OCCURRENCES:
            truncated = True
            break
        fires.append(fire)
        current = fire.instant
    evidence = _evidence(job, start, end, now)
    document.update(
        {
            "from": iso_z(start),
            "to": iso_z(end),
            "occurrences": shown([explain_occurrence(f.instant, evidence, dst_note=f.note) for f in fires]),
            "truncated": truncated,
            "other_runs": [
                {
                    "execution_id": r.id,
                    "scheduled_for": iso_z(r.scheduled_for),
                    "trigger": r.trigger,
                    "status": r.status,
                }
                for r in evidence.runs
                if start <= r.scheduled_for <= end and r.scheduled_for not in {f.instant for f in fires}
            ],
        }
    )
    return document


def _latest_at_or_before(schedule, instant: datetime):
    """The last fire at or before `instant` (searching back in widening windows), or None."""
    window = timedelta(days=1)
    while window <= _NEAREST_HORIZON:
        current, found = instant - window, None
        while True:
            fire = schedule.fire_after(current)
            if fire is None or fire.instant > instant:
                break
            found, current = fire, fire.instant
        if found is not None:
            return found
        window *= 4
    return None


def _evidence(job: Job, start: datetime, end: datetime, now: datetime) -> Evidence:
    runs = db.session.scalars(
        select(Execution)
        .where(
            Execution.job_id == job.id, Execution.scheduled_for >= start - _LOOK_BACK, Execution.scheduled_for <= end
        )
        .order_by(Execution.scheduled_for, Execution.id)
    ).all()
    events = db.session.scalars(
        select(Event)
        .where(
            Event.job_id == job.id,
            or_(
                Event.type.in_(("job_created", "job_enabled", "job_disabled")),
                Event.created_at >= start - _LOOK_BACK,
            ),
        )
        .order_by(Event.id)
    ).all()
    beats = db.session.scalars(select(Heartbeat).where(Heartbeat.kind == "scheduler")).all()
    return Evidence(
        now=now,
        job_created_at=job.created_at,
        next_run_at=job.next_run_at,
        runs=[run_record(r) for r in runs],
        events=[_event_record(e) for e in events],
        scheduler_spans=[Span(b.id, b.started_at, b.last_seen) for b in beats],
        queue=queue_state(job.queue_row, list_workers(now), now),
        job_rate_limit=job.rate_limit,
        job_rate_room=room(job.rate_limit, job.rate_starts, now),
    )


def _event_record(event: Event) -> EventRecord:
    return EventRecord(
        id=event.id,
        type=event.type,
        at=event.created_at,
        actor=event.actor,
        payload=event.payload or {},
        execution_id=event.execution_id,
    )


def explain_execution(execution_id: int, *, now: datetime, caller: Caller | None = None) -> dict[str, Any]:
    """What became of one execution and why (`flask execution explain`): for a one-off run, which
    has no job and so no occurrences to explain, the same answer as a job's run gets: ran, waiting
    (not yet available, queue paused, no live worker serving its queue), expired, cancelled..."""
    execution = db.session.scalar(scoping.executions(select(Execution).where(Execution.id == execution_id), caller))
    if execution is None:
        raise NotFound(f"execution {execution_id} does not exist")
    events = db.session.scalars(select(Event).where(Event.execution_id == execution.id).order_by(Event.id)).all()
    beats = db.session.scalars(select(Heartbeat).where(Heartbeat.kind == "scheduler")).all()
    run = run_record(execution)
    job = execution.job
    evidence = Evidence(
        now=now,
        job_created_at=execution.created_at,
        next_run_at=None,
        runs=[run],
        events=[_event_record(e) for e in events],
        scheduler_spans=[Span(b.id, b.started_at, b.last_seen) for b in beats],
        queue=queue_state(execution.queue_row, list_workers(now), now),
        job_rate_limit=job.rate_limit if job is not None else None,
        job_rate_room=room(job.rate_limit, job.rate_starts, now) if job is not None else None,
    )
    fate = explain_run(run, evidence)
    if _is_workflow_occurrence(execution) and fate.fate in ("no_worker", "no_worker_for_task", "queue_paused"):
        fate = _waiting_workflow(execution, fate)
    if execution.workflow_run_id is not None and execution.step is not None:
        _as_step(fate, execution.workflow_run_id, execution.step, now)
    else:
        _with_steps([fate], now)
    return {
        "execution": {
            "id": execution.id,
            "job_id": execution.job_id,
            "job_name": execution.job_label,
            "task": execution.task_name,
            "one_off": execution.is_one_off,
        },
        "now": iso_z(now),
        **fate.to_json(),
    }


def _is_workflow_occurrence(execution: Execution) -> bool:
    """A workflow job's own run: no queue, no worker claims it; the scheduler starts its steps."""
    return (
        execution.job is not None
        and execution.job.steps is not None
        and execution.workflow_run_id is None
        and execution.callback_task is None
    )


def _waiting_workflow(execution: Execution, fate: Fate) -> Fate:
    """Why a due workflow occurrence waits: behind its job's run in flight, or for the scheduler."""
    blocking = db.session.scalar(
        select(Execution.id)
        .where(
            Execution.job_id == execution.job_id,
            Execution.exclusive,
            Execution.status.in_(["claimed", "running"]),
            Execution.id != execution.id,
        )
        .limit(1)
    )
    if execution.exclusive and blocking is not None:
        summary = (
            f"Waiting: workflow run #{blocking} of this job is still running (overlap policy "
            f"{execution.job.overlap_policy}); this run starts when it ends."
        )
    else:
        summary = "Waiting: a workflow run is started by the scheduler, within about a second of its time."
    details = {**fate.details, "queue": None, "blocking_execution_id": blocking}
    return replace(fate, fate="waiting", summary=summary, details=details)


def _with_steps(fates: list[Fate], now: datetime) -> None:
    """Per-step explain for the fates whose execution is a workflow run: `details` gets the run's
    id and each step's fate (app/services/read/workflow_explain.py), the summary a count of where
    the steps stand."""
    explained = explain_runs([fate.execution_id for fate in fates if fate.execution_id is not None], now=now)
    for fate in fates:
        run = explained.get(fate.execution_id) if fate.execution_id is not None else None
        if run is not None:
            fate.details.update({"workflow_run_id": run["workflow_run_id"], "steps": run["steps"]})
            fate.summary += " " + run["summary"]


def _as_step(fate: Fate, run_id: int, step: str, now: datetime) -> None:
    """Per-step explain for a step's execution: which run and step it is, and every step of the run."""
    run = explain_runs([run_id], now=now).get(run_id)
    fate.details.update({"workflow_run_id": run_id, "step": step, "steps": run["steps"] if run else []})
    fate.summary += f" It is step `{step}` of workflow run #{run_id}."
