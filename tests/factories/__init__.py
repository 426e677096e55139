"""Factories for rows: the one place tests build jobs, executions, users, alerts and heartbeats.

Jobs go through the job service, so a factory job passed the same validation a real one does.
Executions, attempts, alerts and heartbeats are written directly, in any status, so a test can set
up a history the engine would take minutes to produce. Every factory takes `now` (default: the
app clock) so a test that cares about time passes its own instant.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from itertools import count

from sqlalchemy import select
from werkzeug.security import generate_password_hash

from app.clock import utcnow
from app.domain.states import TERMINAL
from app.extensions import db
from app.models import Alert, Attempt, Execution, Heartbeat, Job, Membership, Organization, Queue, User
from app.models.tenancy import DEFAULT_ORGANIZATION
from app.services.use_cases import jobs, queues

_sequence = count(1)

TERMINAL_STATUSES = frozenset(status.value for status in TERMINAL)
# Statuses an execution reaches only after a task process started.
RAN_STATUSES = frozenset({"running", "succeeded", "failed", "timed_out", "dead_lettered"})
# The attempt row an execution's final status leaves behind.
_ATTEMPT_STATUS = {"dead_lettered": "abandoned", "retry_scheduled": "failed"}


def utc(*args) -> datetime:
    """A UTC datetime from literal parts: utc(2026, 6, 1, 12)."""
    return datetime(*args, tzinfo=UTC)


def make_job(
    name: str | None = None, *, now: datetime | None = None, every: str = "1m", task: str = "always_succeed", **fields
) -> Job:
    """An interval job (every `every`) created through the service as actor `test`.

    Any other job field may be given (`schedule_type`, `schedule`, `enabled`, `queue`...); a named
    queue is created first if it does not exist. Its first occurrence is one interval after `now`.
    """
    if fields.get("queue"):
        make_queue(fields["queue"], now=now)
    data = {
        "name": name or f"job-{next(_sequence)}",
        "task": task,
        "schedule_type": fields.pop("schedule_type", "interval"),
        "schedule": fields.pop("schedule", {"every": every}),
        **fields,
    }
    return jobs.create_job(data, now=now or utcnow(), actor="test")


def make_queue(name: str, *, now: datetime | None = None, **fields) -> Queue:
    """The queue called `name`, created through the service (actor `test`) if it does not exist."""
    existing = db.session.scalar(select(Queue).where(Queue.name == name))
    if existing is not None:
        return existing
    return queues.add_queue({"name": name, **fields}, now=now or utcnow(), actor="test")


def make_due_job(*, next_run_at: datetime, every: str = "1m", **fields) -> Job:
    """An interval job whose next occurrence is exactly `next_run_at` (possibly in the past)."""
    step = {"s": 1, "m": 60, "h": 3600}[every[-1]] * int(every[:-1])
    return make_job(now=next_run_at - timedelta(seconds=step), every=every, **fields)


def make_execution(
    job: Job,
    status: str,
    *,
    now: datetime | None = None,
    attempts: int | None = None,
    seconds: float = 1.5,
    output: str = "",
    error: str = "",
    trigger: str = "manual",
    attempt_rows: bool = True,
    **fields,
) -> Execution:
    """An execution of `job` in any status, as it would look at `now`.

    It was scheduled a minute before `now`; if it ran (`attempts` > 0, default 1 for statuses
    that imply a run) it started `seconds` before `now`, and it finished at `now` if `status` is
    terminal. With `attempt_rows` it gets one attempt row per attempt (earlier ones failed, the
    last one matching `status`). Other columns may be overridden through `fields`.
    """
    now = now or utcnow()
    if attempts is None:
        attempts = 1 if status in RAN_STATUSES else 0
    started = now - timedelta(seconds=seconds)
    values = dict(
        job_id=job.id,
        scheduled_for=now - timedelta(minutes=1),
        trigger=trigger,
        idempotency_key=f"test:{job.id}:{uuid.uuid4().hex}",
        status=status,
        attempts=attempts,
        max_attempts=max(job.max_attempts, attempts),
        queue_id=job.queue_id,
        priority=job.priority,
        exclusive=job.overlap_policy != "allow",
        available_at=now - timedelta(minutes=1),
        started_at=started if attempts else None,
        finished_at=now if status in TERMINAL_STATUSES else None,
        output=output,
        error=error,
        created_at=now,
        updated_at=now,
    )
    execution = Execution(**{**values, **fields})
    db.session.add(execution)
    db.session.flush()
    if attempt_rows:
        for number in range(1, attempts + 1):
            last = number == attempts
            attempt_status = _ATTEMPT_STATUS.get(status, status) if last else "failed"
            db.session.add(
                Attempt(
                    execution_id=execution.id,
                    number=number,
                    worker_id="worker-test",
                    pid=4242,
                    status=attempt_status,
                    started_at=started,
                    finished_at=None if attempt_status == "running" else now,
                    output=output if last else "",
                    error=error if last else "",
                )
            )
    db.session.commit()
    return execution


def make_user(
    username: str = "admin",
    password: str = "secret-pw",
    role: str | None = "admin",
    active: bool = True,
    *,
    now=None,
    superuser: bool = False,
    organization: str = DEFAULT_ORGANIZATION,
) -> User:
    """A user who can sign in with `password`, holding `role` in `organization` (the default one
    unless named; None: a member of no organization)."""
    user = User(username=username, active=active, superuser=superuser, created_at=now or utcnow())
    # A cheap hash keeps the tests fast; production uses werkzeug's default (scrypt).
    user.password_hash = generate_password_hash(password, method="pbkdf2:sha256:1000")
    db.session.add(user)
    if role is not None:
        org = db.session.scalar(select(Organization).where(Organization.name == organization))
        user.memberships.append(Membership(organization_id=org.id, role=role, created_at=now or utcnow()))
    db.session.commit()
    return user


def make_alert(
    job: Job | None = None,
    execution: Execution | None = None,
    message: str = "something broke",
    *,
    kind: str = "dead_letter",
    resolved: bool = False,
    now: datetime | None = None,
) -> Alert:
    """An alert, open unless `resolved` (then resolved by `someone` at `now`)."""
    now = now or utcnow()
    alert = Alert(
        job_id=job.id if job else None,
        # A job's project, else the default one (the engine always knows the job's).
        project_id=job.queue_row.project_id if job else queues.default_project().id,
        execution_id=execution.id if execution else None,
        kind=kind,
        message=message,
        created_at=now,
        resolved_at=now if resolved else None,
        resolved_by="someone" if resolved else None,
    )
    db.session.add(alert)
    db.session.commit()
    return alert


def make_heartbeat(process_id: str, kind: str, *, age_seconds: float, now: datetime | None = None) -> Heartbeat:
    """A scheduler or worker heartbeat last seen `age_seconds` before `now`."""
    now = now or utcnow()
    beat = Heartbeat(
        id=process_id,
        kind=kind,
        host="host-a",
        pid=4242,
        started_at=now - timedelta(hours=1),
        last_seen=now - timedelta(seconds=age_seconds),
        info={"busy": 0},
    )
    db.session.add(beat)
    db.session.commit()
    return beat
