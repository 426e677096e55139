"""Job operations shared by the CLI and the web UI: create, edit, enable, disable, trigger,
delete and preview. Each mutation validates, writes in one transaction, records an audit event,
invalidates the affected cache keys after commit and wakes the scheduler and workers.

Each function takes the `caller` (None: the system): a job of another organization (or, with a
project chosen, another project) is a NotFound like a missing one, and changes need
`Action.OPERATE`. A new job's queue is looked up in the caller's project; an edited job's in the
job's own project, so a job stays in the project it was created in (docs/tenancy.md). Job names
are unique within a project, any case."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, null, select

from app import cache
from app.clock import iso_z
from app.database import begin_write
from app.definitions import EDITABLE, dump_job
from app.domain import run_limits
from app.domain.permissions import Action
from app.domain.run_times import past_run_time_problem
from app.extensions import db
from app.models import Execution, Job, Project, Queue
from app.scheduling import Schedule, ScheduleError, parse_schedule, preview
from app.scheduling.lint import LintWarning, lint_schedule
from app.services import audit_trail, scoping
from app.services.caller import Caller
from app.services.engine import wakeups
from app.services.engine.scheduler import withdraw_ahead
from app.services.errors import Conflict, NotFound, ValidationFailed
from app.services.events import record_event
from app.services.use_cases import queues
from app.services.validation import clean_job_fields
from app.store import store_for

# Job fields the system maintains itself: a schedule edit moves next_run_at, every write moves
# updated_at; the audit log records what people changed.
JOB_BOOKKEEPING = frozenset({"id", "created_at", "updated_at", "next_run_at", "runs_created"})


def job_state(job: Job) -> dict[str, Any]:
    """A job's fields as its audit before/after (the job definition's names, bookkeeping left out)."""
    return {k: v for k, v in dump_job(job).items() if k not in JOB_BOOKKEEPING}


def get_job(job_id: int, caller: Caller | None = None) -> Job:
    """The job, if the caller may see it; NotFound otherwise (exactly as for a missing one)."""
    job = db.session.get(Job, job_id)
    if job is not None and caller is not None and scoping.queue_ids(caller) is not None:
        job = db.session.scalar(scoping.jobs(select(Job).where(Job.id == job_id), caller))
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    return job


def list_jobs(caller: Caller | None = None) -> list[Job]:
    """Every job the caller may see, oldest first."""
    return list(db.session.scalars(list_query(caller)))


def list_query(caller: Caller | None = None):
    """The jobs query, oldest first, for lists and pagination."""
    return scoping.jobs(select(Job).order_by(Job.id), caller)


def _allowed(caller: Caller | None) -> None:
    if caller is not None:
        caller.require(Action.OPERATE)


def schedule_of(job: Job) -> Schedule:
    """The job's stored schedule as a schedule object."""
    return parse_schedule(job.schedule_type, job.schedule, job.timezone)


def _first_run(
    schedule: Schedule, now: datetime, grace_seconds: int, schedule_type: str, start_at: datetime | None = None
) -> datetime | None:
    if schedule_type == "one_time":
        run_at = schedule.next_after(datetime.min.replace(tzinfo=now.tzinfo))
        if run_at is not None and (problem := past_run_time_problem(run_at, now=now, grace_seconds=grace_seconds)):
            raise ValidationFailed({"schedule": f"run_at {problem}"})
        return run_at
    return run_limits.first_run(schedule.next_after, now=now, start_at=start_at)


def _limited_next_run(job: Job, next_run_at: datetime | None, *, now: datetime) -> datetime | None:
    """`next_run_at` unless a run limit (max_runs, end_at) leaves no run: then None, with the
    reason in disabled_reason and a `run_limit_reached` event, as the scheduler would do."""
    limits = run_limits.RunLimits(job.max_runs, job.runs_created or 0, job.start_at, job.end_at)
    reason = limits.reached(next_run_at=next_run_at)
    if reason is None:
        if run_limits.is_limit_reason(job.disabled_reason):
            job.disabled_reason = None  # the new limits leave room: that reason no longer holds
        return next_run_at
    job.disabled_reason = reason
    record_event(
        "run_limit_reached",
        now=now,
        job_id=job.id,
        reason=reason,
        runs_created=job.runs_created or 0,
        stopped_at=_iso(next_run_at),
    )
    return None


def _unique_name(name: str, project_id: int, exclude_id: int | None = None) -> None:
    """Refuse a name another job of the project has, in any case. Other projects' jobs are never
    looked at, so the message cannot tell anyone what another organization has."""
    # The database holds exact names unique per project; names differing only in case are the
    # same name to the people and scripts that use them, which only this check knows. Two
    # PostgreSQL transactions could each pass it with `Backup` and `backup`: locking the project
    # row first makes the second wait for the first's commit and then see its job (SQLite's
    # BEGIN IMMEDIATE already runs one writer at a time). NO KEY UPDATE leaves the foreign-key
    # checks of other inserts (KEY SHARE) free.
    db.session.execute(select(Project.id).where(Project.id == project_id).with_for_update(key_share=True))
    query = select(Job.name).where(Job.project_id == project_id, func.lower(Job.name) == func.lower(name))
    if exclude_id is not None:
        query = query.where(Job.id != exclude_id)
    existing = db.session.scalar(query)
    if existing is not None:
        extra = "" if existing == name else f" ({existing!r}: names differing only in case are the same name)"
        raise ValidationFailed({"name": f"a job named {name!r} already exists in this project{extra}"})


def create_job(data: dict, *, now: datetime, actor: str, caller: Caller | None = None) -> Job:
    """Validate and create a job; its first run is the schedule's next occurrence after now."""
    _allowed(caller)
    cleaned = clean_job_fields(data, now=now)
    begin_write(db.session)
    project_id = queues.project_for(caller).id
    job = add_job(
        cleaned, project_id=project_id, now=now, actor=actor, own_priority=data.get("priority") not in (None, "")
    )
    _commit(job.id)
    return job


def add_job(
    cleaned: dict,
    *,
    project_id: int,
    now: datetime,
    actor,
    own_priority: bool,
    managed_by: str | None = None,
    queue: Queue | None = None,
    name_checked: bool = False,
    deferred: bool = False,
) -> Job:
    """Insert a validated job (`clean_job_fields`) into `project_id` in the open write transaction,
    with its audit row and event; the caller commits. Without `own_priority` the job takes its
    queue's priority. A caller that holds the project's lock and has checked the name against all
    its jobs (an apply of many) passes `name_checked` and the project's `queue` row, and with
    `deferred` flushes all its jobs at once and then calls `record_created` for each."""
    cleaned = dict(cleaned)
    schedule = parse_schedule(cleaned["schedule_type"], cleaned["schedule"], cleaned["timezone"])
    if not name_checked:
        _unique_name(cleaned["name"], project_id)
    # The queue is looked up in that same project: the job's project is its queue's.
    name = cleaned.pop("queue")
    if queue is None or queue.project_id != project_id or queue.name != name:
        queue = queues.resolve_for_job(name, project_id=project_id)
    _check_step_queues(cleaned.get("steps"), project_id)
    if not own_priority:
        cleaned["priority"] = queue.priority  # a job without its own priority takes its queue's
    # None is a value for some fields (no timeout): NULL, not the column's default.
    columns = Job.__table__.columns
    cleaned = {
        key: null() if value is None and key in columns and columns[key].default is not None else value
        for key, value in cleaned.items()
    }
    job = Job(
        **cleaned,
        queue_id=queue.id,
        project_id=queue.project_id,
        managed_by=managed_by,
        created_at=now,
        updated_at=now,
    )
    job.queue_row = queue
    job.next_run_at = _first_run(schedule, now, job.misfire_grace_seconds, job.schedule_type, job.start_at)
    if job.end_at is not None and job.next_run_at is not None and job.next_run_at > job.end_at:
        raise ValidationFailed({"end_at": f"is before the schedule's first run ({_iso(job.next_run_at)})"})
    db.session.add(job)
    if not deferred:
        db.session.flush()
        record_created(job, now=now, actor=actor)
    return job


def record_created(job: Job, *, now: datetime, actor) -> None:
    """The event and audit row of a job just inserted (and flushed: they name its id)."""
    record_event(
        "job_created",
        now=now,
        actor=actor,
        job_id=job.id,
        name=job.name,
        task=job.task,
        schedule_type=job.schedule_type,
        schedule=job.schedule,
        enabled=bool(job.enabled),  # a job created disabled was disabled from its creation
    )
    audit_trail.record_change(
        actor, "created", "job", job.id, None, job_state(job), now=now, **audit_trail.about_job(job)
    )


def update_job(job_id: int, data: dict, *, now: datetime, actor: str, caller: Caller | None = None) -> Job:
    """Apply the given fields. Changing the task re-validates the stored config; changing the
    schedule or time zone recomputes next_run_at from now."""
    _allowed(caller)
    job = get_job(job_id, caller)
    cleaned = clean_job_fields(data, now=now, current={field: getattr(job, field) for field in EDITABLE})
    begin_write(db.session)
    job = get_job(job_id, caller)
    change_job(job, cleaned, now=now, actor=actor)
    _commit(job.id)
    return job


def _check_step_queues(steps: list | None, project_id: int) -> None:
    """A workflow step's own queue must be one of the job's project, as the job's queue must."""
    for step in steps or []:
        name = step.get("queue")
        if (
            name
            and db.session.scalar(select(Queue.id).where(Queue.name == name, Queue.project_id == project_id)) is None
        ):
            message = queues.unknown_queue_message(name, project_id=project_id)
            raise ValidationFailed({"steps": f"step {step['name']!r}: queue: {message}"})


def change_job(job: Job, cleaned: dict, *, now: datetime, actor, managed_by: str | None = None) -> None:
    """Apply validated edit fields (`clean_job_fields` with `current`) to a job in the open write
    transaction, with its audit row and event; the caller commits. A schedule, type or zone given
    comes with all three (as the definition returns them). `managed_by`, when given, becomes the
    job's owner (a job file applied)."""
    cleaned = dict(cleaned)
    enabled = cleaned.pop("enabled", None)
    withdraw_ahead(db.session.connection(), job, now=now)  # runs written ahead follow the edit
    before = job_state(job)
    if managed_by is not None:
        job.managed_by = managed_by
    if "name" in cleaned:
        _unique_name(cleaned["name"], job.project_id, exclude_id=job.id)
    changed = {k: v for k, v in cleaned.items() if getattr(job, k) != v}
    if "steps" in changed:
        _check_step_queues(changed["steps"], job.project_id)
    if "queue" in changed:
        # Only a queue of the job's own project: another project's queue is an unknown name here
        # (listing this project's queues), so a job never changes project by changing queue.
        queue = queues.resolve_for_job(changed.pop("queue"), project_id=job.project_id)
        job.queue_id, job.queue_row = queue.id, queue
        conn = db.session.connection()
        store_for(conn).move_queued_to_queue(conn, job.id, queue.id)
        changed_queue = True
    else:
        changed.pop("queue", None)
        changed_queue = False
    if "schedule" in cleaned and ("schedule" in changed or "timezone" in changed or "schedule_type" in changed):
        schedule_type = cleaned.get("schedule_type", job.schedule_type)
        job.next_run_at = _first_run(
            parse_schedule(schedule_type, cleaned["schedule"], cleaned["timezone"]),
            now,
            cleaned.get("misfire_grace_seconds", job.misfire_grace_seconds),
            schedule_type,
            cleaned.get("start_at", job.start_at),
        )
    elif "start_at" in changed and job.schedule_type != "one_time":
        job.next_run_at = _first_run(
            schedule_of(job), now, job.misfire_grace_seconds, job.schedule_type, changed["start_at"]
        )
    for key, value in changed.items():
        setattr(job, key, value)
    if {"max_runs", "end_at", "start_at", "schedule"} & changed.keys():
        if job.next_run_at is None and job.schedule_type != "one_time" and job.disabled_reason:
            # A job a limit had finished, given room again: its next run comes from now.
            job.next_run_at = _first_run(
                schedule_of(job), now, job.misfire_grace_seconds, job.schedule_type, job.start_at
            )
        job.next_run_at = _limited_next_run(job, job.next_run_at, now=now)
    job.updated_at = now
    audit_trail.record_change(
        actor, "updated", "job", job.id, before, job_state(job), now=now, **audit_trail.about_job(job)
    )
    if enabled is not None and enabled != job.enabled:
        _set_enabled(job, enabled, now=now, actor=actor)
    record_event(
        "job_updated",
        now=now,
        actor=actor,
        job_id=job.id,
        fields=sorted([*changed, *(["queue"] if changed_queue else [])]),
    )


def enable_job(job_id: int, *, now: datetime, actor: str, caller: Caller | None = None) -> Job:
    _allowed(caller)
    begin_write(db.session)
    job = get_job(job_id, caller)
    if not job.enabled:
        _set_enabled(job, True, now=now, actor=actor)
        _commit(job.id)
    return job


def disable_job(job_id: int, *, now: datetime, actor: str, caller: Caller | None = None) -> tuple[Job, int]:
    """Disable a job and cancel its queued work; returns the job and how many rows were cancelled."""
    _allowed(caller)
    begin_write(db.session)
    job = get_job(job_id, caller)
    cancelled = 0
    if job.enabled:
        cancelled = _set_enabled(job, False, now=now, actor=actor)
        _commit(job.id)
    return job, cancelled


def _set_enabled(job: Job, enabled: bool, *, now: datetime, actor: str) -> int:
    if enabled:
        if job.next_run_at is None and job.schedule_type != "one_time":
            # A run limit had finished it: resume from now if the limits leave a run.
            job.next_run_at = _first_run(
                schedule_of(job), now, job.misfire_grace_seconds, job.schedule_type, job.start_at
            )
            reason = run_limits.RunLimits(job.max_runs, job.runs_created or 0, job.start_at, job.end_at).reached(
                next_run_at=job.next_run_at
            )
            if reason is not None:
                job.next_run_at = None
                raise Conflict(f"job {job.id} cannot be enabled: {reason}; raise max_runs or move end_at first")
        if job.next_run_at is None:
            raise Conflict(f"job {job.id} is a one-time job that has already fired; give it a new run_at to enable it")
        if job.next_run_at < now:
            # Resume from now rather than replaying everything that fell due while disabled.
            job.next_run_at = schedule_of(job).next_after(now)
        job.enabled = True
        job.disabled_reason = None  # an auto-pause reason no longer applies
        record_event("job_enabled", now=now, actor=actor, job_id=job.id, next_run_at=_iso(job.next_run_at))
        audit_trail.record_change(
            actor,
            "enabled",
            "job",
            job.id,
            {"enabled": False},
            {"enabled": True},
            now=now,
            **audit_trail.about_job(job),
        )
        return 0
    job.enabled = False
    conn = db.session.connection()
    withdraw_ahead(conn, job, now=now)  # a run written ahead whose time has not come never existed
    ids = store_for(conn).cancel_queued_for_job(conn, job.id, now=now, reason="job disabled")
    # next_run_at is kept so enabling resumes; the ledger also needs it to excuse occurrences.
    record_event(
        "job_disabled", now=now, actor=actor, job_id=job.id, cancelled=len(ids), next_run_at=_iso(job.next_run_at)
    )
    audit_trail.record_change(
        actor, "disabled", "job", job.id, {"enabled": True}, {"enabled": False}, now=now, **audit_trail.about_job(job)
    )
    return len(ids)


def trigger_job(job_id: int, *, now: datetime, actor: str, caller: Caller | None = None) -> Execution:
    """Create a manual execution that runs as soon as a worker is free (and overlap allows)."""
    _allowed(caller)
    begin_write(db.session)
    job = get_job(job_id, caller)
    if not job.enabled:
        raise Conflict(f"job {job.id} ({job.name}) is disabled; enable it before triggering")
    conn = db.session.connection()
    execution_id, deduplicated = store_for(conn).insert_manual_once(conn, job, now=now)
    if deduplicated:
        record_event("deduplicated", now=now, actor=actor, job_id=job.id, execution_id=execution_id, trigger="manual")
        _commit(job.id)
        execution = db.session.get(Execution, execution_id)
        assert execution is not None  # the holder was read in this transaction
        execution.deduplicated = True
        return execution
    record_event("job_triggered", now=now, actor=actor, job_id=job.id, execution_id=execution_id)
    audit_trail.record_change(
        actor, "triggered", "job", job.id, now=now, extra={"execution_id": execution_id}, **audit_trail.about_job(job)
    )
    _commit(job.id, work=True)
    return db.session.get(Execution, execution_id)


def delete_job(job_id: int, *, now: datetime, actor: str, caller: Caller | None = None) -> None:
    """Delete a job and its history. A run in flight finishes on its worker, whose result is
    then discarded (the row is gone)."""
    _allowed(caller)
    begin_write(db.session)
    remove_job(get_job(job_id, caller), now=now, actor=actor)
    _commit(job_id)


def remove_job(job: Job, *, now: datetime, actor) -> None:
    """Delete a job in the open write transaction, with its audit row and event; the caller commits."""
    record_event("job_deleted", now=now, actor=actor, job_id=job.id, name=job.name)
    audit_trail.record_change(
        actor, "deleted", "job", job.id, job_state(job), None, now=now, **audit_trail.about_job(job)
    )
    conn = db.session.connection()
    store_for(conn).release_slots_of_job(conn, job.id)
    db.session.delete(job)


def preview_job(job_id: int, *, after: datetime, count: int, caller: Caller | None = None):
    job = get_job(job_id, caller)
    return preview(schedule_of(job), after, count)


def lint_job(job: Job, *, now: datetime) -> list[LintWarning]:
    """Schedule lint for a stored job (warnings, never errors): shown on create, edit and preview."""
    try:
        return lint_schedule(schedule_of(job), now=now, timeout_seconds=job.timeout_seconds)
    except (ScheduleError, ValueError):
        return []


def _commit(job_id: int | None, *, work: bool = False) -> None:
    cache.invalidate_on_commit(db.session, cache.keys_for_job_change(job_id))
    wakeups.notify_on_commit(db.session, jobs_changed=True, work=work)
    db.session.commit()


def _iso(value: datetime | None) -> str | None:
    return iso_z(value, "microseconds")
