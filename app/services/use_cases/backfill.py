"""Backfill: run a job's occurrences of a past window on an operator's request.

Each occurrence becomes an execution with trigger `backfill` and the *same* idempotency key as
the scheduled occurrence (`job:<id>:at:<instant>`), so an occurrence that already has an
execution (scheduled, caught up, missed or backfilled before) is never created twice: the plan
lists it as `exists`, and the insert's ON CONFLICT DO NOTHING holds even against a scheduler or a
second backfill racing this one. The dry run computes the same plan without writing.

Overlap: the job's policy unless overridden. `allow` runs them concurrently, `queue` one at a
time in order (the worker's FIFO for exclusive runs), `skip` runs the first and records the rest
`missed` (reason overlap), as the scheduler's catch-up does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from marshmallow import ValidationError
from sqlalchemy import select

from app import cache
from app.clock import iso_z
from app.database import begin_write
from app.definitions.backfill import MAX_BACKFILL, BackfillSchema, window_errors
from app.definitions.job import field_messages
from app.domain.permissions import Action
from app.domain.states import ExecutionStatus as S
from app.domain.states import OverlapPolicy
from app.extensions import db
from app.models import Execution, Job
from app.scheduling import parse_schedule
from app.services import audit_trail, scoping
from app.services.caller import Caller
from app.services.engine import wakeups
from app.services.errors import Conflict, NotFound, ValidationFailed
from app.services.events import record_event
from app.store import occurrence_row, store_for
from app.store.rows import occurrence_key


@dataclass
class BackfillPlan:
    """What a backfill does (or did): each occurrence of the window and its action."""

    job_id: int
    start: datetime
    end: datetime
    overlap: str
    dry_run: bool
    occurrences: list[dict[str, Any]] = field(default_factory=list)
    capped: bool = False  # more occurrences than --max: the rest were left for another run

    @property
    def created(self) -> int:
        return sum(1 for item in self.occurrences if item["action"] in ("create", "missed"))

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "from": iso_z(self.start),
            "to": iso_z(self.end),
            "overlap": self.overlap,
            "dry_run": self.dry_run,
            "created": self.created,
            "existing": sum(1 for item in self.occurrences if item["action"] == "exists"),
            "capped": self.capped,
            "occurrences": self.occurrences,
        }


def backfill_from_input(
    job_id: int, data: Mapping[str, Any], *, now: datetime, actor: str, caller: Caller | None = None
) -> BackfillPlan:
    """A backfill as an operator gives it (`from`, `to`, `max`, `overlap`, `dry_run` as text or
    JSON values; instants without an offset in the job's zone), parsed by the backfill definition."""
    if caller is not None:
        caller.require(Action.OPERATE)
    job = db.session.scalar(scoping.jobs(select(Job).where(Job.id == job_id), caller))
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    try:
        request = BackfillSchema(now=now, timezone=job.timezone).load(dict(data))
    except ValidationError as exc:
        raise ValidationFailed(field_messages(exc)) from None
    return backfill_job(job.id, now=now, actor=actor, caller=caller, **request)


def backfill_job(
    job_id: int,
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    actor: str,
    dry_run: bool = False,
    max_runs: int | None = None,
    overlap: str | None = None,
    caller: Caller | None = None,
) -> BackfillPlan:
    """Plan (dry run) or create the window's missing occurrences as `backfill` executions."""
    if caller is not None:
        caller.require(Action.OPERATE)
    errors = window_errors(start, end, now=now, max_runs=max_runs, overlap=overlap)
    if errors:
        raise ValidationFailed(errors)
    if not dry_run:
        begin_write(db.session)
    job = db.session.scalar(scoping.jobs(select(Job).where(Job.id == job_id), caller))
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    if not job.enabled and not dry_run:
        raise Conflict(f"job {job.id} ({job.name}) is disabled; enable it before backfilling")
    policy = overlap or job.overlap_policy
    plan = BackfillPlan(job.id, start, end, policy, dry_run)
    limit = max_runs or MAX_BACKFILL
    instants = _occurrences(job, start, end, limit=limit + 1 + _existing_count(job.id, start, end))
    existing = _existing(job.id, instants)
    conn = db.session.connection()
    busy = policy == "skip" and bool(store_for(conn).jobs_with_active_runs(conn, [job.id], now))
    rows = []
    for at in instants:
        if at in existing:
            plan.occurrences.append({"scheduled_for": iso_z(at), "action": "exists", "execution_id": existing[at]})
            continue
        if len(rows) == limit:
            plan.capped = True
            break
        status = S.MISSED if busy else S.PENDING
        row = occurrence_row(
            job,
            at,
            trigger="backfill",
            status=status,
            now=now,
            reason="overlap: backfill with overlap policy skip runs one occurrence at a time" if busy else None,
        )
        row["available_at"] = now  # runs from now on, not ahead of work that is due already
        row["exclusive"] = policy != OverlapPolicy.ALLOW.value
        rows.append(row)
        plan.occurrences.append({"scheduled_for": iso_z(at), "action": "missed" if busy else "create"})
        busy = busy or policy == "skip"
    if dry_run:
        db.session.rollback()
        return plan
    created = dict(store_for(conn).insert_occurrences(conn, rows))
    ids = {row["scheduled_for"]: None for row in rows}
    for execution_id, scheduled_for in db.session.execute(
        select(Execution.id, Execution.scheduled_for).where(Execution.id.in_(list(created)))
    ):
        ids[scheduled_for] = execution_id
    for item in plan.occurrences:
        if item["action"] in ("create", "missed"):
            at = datetime.fromisoformat(item["scheduled_for"].replace("Z", "+00:00"))
            item["execution_id"] = ids.get(at)
            if item["execution_id"] is None:
                item["action"] = "exists"  # created by someone else since the plan was read
    summary = {
        "from": iso_z(start),
        "to": iso_z(end),
        "overlap": policy,
        "created": plan.created,
        "existing": len(plan.occurrences) - plan.created,
        "capped": plan.capped,
    }
    record_event("job_backfilled", now=now, actor=actor, job_id=job.id, **summary)
    audit_trail.record_change(
        caller or actor, "backfilled", "job", job.id, None, None, now=now, extra=summary, **audit_trail.about_job(job)
    )
    cache.invalidate_on_commit(db.session, cache.keys_for_job_change(job.id))
    wakeups.notify_on_commit(db.session, work=True)
    db.session.commit()
    return plan


def _occurrences(job: Job, start: datetime, end: datetime, *, limit: int) -> list[datetime]:
    schedule = parse_schedule(job.schedule_type, job.schedule, job.timezone)
    found: list[datetime] = []
    current = start - timedelta(microseconds=1)
    while len(found) < limit:
        current = schedule.next_after(current)
        if current is None or current > end:
            break
        found.append(current)
    return found


def _existing_count(job_id: int, start: datetime, end: datetime) -> int:
    from sqlalchemy import func

    return db.session.scalar(
        select(func.count())
        .select_from(Execution)
        .where(Execution.job_id == job_id, Execution.scheduled_for >= start, Execution.scheduled_for <= end)
    )


def _existing(job_id: int, instants: list[datetime]) -> dict[datetime, int]:
    """The instants that already have an execution (by occurrence key), with its id."""
    if not instants:
        return {}
    keys = {occurrence_key(job_id, at): at for at in instants}
    found: dict[datetime, int] = {}
    key_list = list(keys)
    for start in range(0, len(key_list), 500):
        for execution_id, key in db.session.execute(
            select(Execution.id, Execution.idempotency_key).where(
                Execution.idempotency_key.in_(key_list[start : start + 500])
            )
        ):
            found[keys[key]] = execution_id
    return found
