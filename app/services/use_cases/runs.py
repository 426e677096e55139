"""Ad-hoc runs of a job: now, after a delay or at an instant, optionally with a config override.

An ad-hoc run is a `manual` execution. A delayed one is created at once with its `available_at` (and
`scheduled_for`) in the future: operators see it waiting ("scheduled for ...") in the lists and can
cancel it like any queued run; workers start it within about a second of that instant (they poll
every WORKER_POLL_SECONDS). Its override is stored on the execution (`config_override`), checked
against the task's schema merged over the job's config, and merged the same way when it starts.
"""

from __future__ import annotations

from datetime import datetime

from marshmallow import ValidationError
from sqlalchemy import select

from app import cache
from app.clock import iso_z
from app.database import begin_write
from app.definitions.batch import load_run
from app.definitions.job import field_messages
from app.domain.permissions import Action
from app.extensions import db
from app.models import Execution, Job
from app.services import audit_trail, scoping
from app.services.caller import Caller
from app.services.engine import wakeups, workflows
from app.services.errors import Conflict, NotFound, ValidationFailed
from app.services.events import record_event
from app.store import store_for


def _job(job_id: int, caller: Caller | None) -> Job:
    """The job, if the caller may see it (NotFound otherwise, exactly as for a missing one)."""
    job = db.session.get(Job, job_id)
    if job is not None and scoping.queue_ids(caller) is not None:
        job = db.session.scalar(scoping.jobs(select(Job).where(Job.id == job_id), caller))
    if job is None:
        raise NotFound(f"job {job_id} does not exist")
    return job


def trigger_run(
    job_id: int, data: dict | None = None, *, now: datetime, actor: str, caller: Caller | None = None
) -> Execution:
    """Create an ad-hoc run of an enabled job. `data` may hold `in` (a duration: 30s, 5m...), `at`
    (an ISO instant; no offset means UTC) and `config_override` (a JSON object or its text);
    without `in`/`at` it runs as soon as a worker is free. For a unique job whose key a waiting
    or running run holds, that run comes back with `deduplicated` set and nothing is created."""
    if caller is not None:
        caller.require(Action.OPERATE)
    job = _job(job_id, caller)
    try:
        run = load_run(
            data or {}, now=now, task=job.task, job_config=job.config, grace_seconds=job.misfire_grace_seconds
        )
    except ValidationError as exc:
        raise ValidationFailed(field_messages(exc)) from None
    if job.steps is not None and run["config_override"]:
        raise ValidationFailed(
            {"config_override": "a workflow's run takes no config override: each step has its own config"}
        )
    begin_write(db.session)
    job = _job(job_id, caller)
    if not job.enabled:
        raise Conflict(f"job {job.id} ({job.name}) is disabled; enable it before triggering")
    conn = db.session.connection()
    execution_id, deduplicated = store_for(conn).insert_manual_once(
        conn, job, now=now, available_at=run["available_at"], config_override=run["config_override"]
    )
    if deduplicated:
        # The job is unique and a run of its key waits or runs: that run is the answer.
        record_event("deduplicated", now=now, actor=actor, job_id=job.id, execution_id=execution_id, trigger="manual")
        db.session.commit()
        execution = db.session.get(Execution, execution_id)
        assert execution is not None  # the holder was read in this transaction
        execution.deduplicated = True
        return execution
    record_event(
        "job_triggered",
        now=now,
        actor=actor,
        job_id=job.id,
        execution_id=execution_id,
        available_at=iso_z(run["available_at"]),
        config_override=run["config_override"],
    )
    audit_trail.record_change(
        caller or actor,
        "triggered",
        "job",
        job.id,
        now=now,
        extra={
            "execution_id": execution_id,
            "available_at": iso_z(run["available_at"]),
            "config_override": run["config_override"],
        },
        **audit_trail.about_job(job),
    )
    if job.steps is not None and (run["available_at"] is None or run["available_at"] <= now):
        # A workflow's run starts its first steps now, as the scheduler's tick would.
        workflows.start_job_now(conn, job.id, now=now)
    cache.invalidate_on_commit(db.session, cache.keys_for_job_change(job.id))
    wakeups.notify_on_commit(db.session, jobs_changed=True, work=True)
    db.session.commit()
    return db.session.get(Execution, execution_id)


def callbacks_of(execution_id: int) -> list[Execution]:
    """The callback executions a run's outcome created (on_success / on_failure), oldest first."""
    return list(db.session.scalars(select(Execution).where(Execution.parent_id == execution_id).order_by(Execution.id)))
