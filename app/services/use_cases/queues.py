"""Queue operations shared by the CLI, the web UI and the worker's start-up check: add, edit,
pause, resume, delete, and resolving names people type into queue rows.

Names are unique within a project; until projects are chosen by their callers everything lives
in the default project. Every mutation records an event and commits in one transaction; resume
and a raised limit wake the workers at once (NOTIFY), since work may now be claimable.
"""

from __future__ import annotations

import re
from datetime import datetime

from sqlalchemy import func, select

from app import cache
from app.database import begin_write
from app.extensions import db
from app.models import Execution, Job, Project, Queue
from app.models.queue import DEFAULT_PROJECT
from app.services.audit import record_event
from app.services.engine import wakeups
from app.services.errors import Conflict, NotFound, ValidationFailed

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
NAME_RULE = "must be 1-64 characters: lower-case letters, digits, '_', '-', '.'"
PRIORITY_RANGE = (-1000, 1000)
LIMIT_RANGE = (1, 100_000)
DESCRIPTION_MAX = 2000


def default_project() -> Project:
    project = db.session.scalar(select(Project).where(Project.name == DEFAULT_PROJECT))
    if project is None:  # an installation always has it (migration 0004); say so if it was removed
        raise Conflict("the default project is missing; run `flask db upgrade`")
    return project


def list_queues() -> list[Queue]:
    """Every queue of the default project, by name."""
    return list(db.session.scalars(select(Queue).order_by(Queue.name)))


def known_names() -> list[str]:
    return list(db.session.scalars(select(Queue.name).order_by(Queue.name)))


def unknown_queue_message(name: str) -> str:
    known = known_names()
    listed = ", ".join(known) if known else "none"
    return f"unknown queue {name!r}; known queues: {listed} (create one with `flask queue add NAME`)"


def get_queue(name: str) -> Queue:
    queue = db.session.scalar(select(Queue).where(Queue.name == name))
    if queue is None:
        raise NotFound(unknown_queue_message(name))
    return queue


def resolve_for_job(name: str) -> Queue:
    """The queue a job names, or a field error listing the known ones."""
    queue = db.session.scalar(select(Queue).where(Queue.name == name))
    if queue is None:
        raise ValidationFailed({"queue": unknown_queue_message(name)})
    return queue


def _text_problem(text: str) -> str | None:
    """Why a description or pause reason cannot be stored (PostgreSQL refuses NUL), or None."""
    if len(text) > DESCRIPTION_MAX or "\x00" in text:
        return f"must be at most {DESCRIPTION_MAX} characters, without NUL characters"
    return None


def _clean(data: dict, *, creating: bool) -> dict:
    """Validate the fields given; per-field messages like the job form's."""
    errors: dict[str, str] = {}
    cleaned: dict = {}
    if creating or "name" in data:
        name = data.get("name")
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            errors["name"] = NAME_RULE
        else:
            cleaned["name"] = name
    if data.get("description") is not None:
        text = str(data["description"])
        problem = _text_problem(text)
        if problem:
            errors["description"] = problem
        else:
            cleaned["description"] = text
    for field, (low, high) in (("priority", PRIORITY_RANGE), ("concurrency_limit", LIMIT_RANGE)):
        if field not in data or data[field] is None:
            continue
        value = data[field]
        try:
            number = int(str(value).strip()) if not isinstance(value, bool) else None
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            errors[field] = f"must be a whole number between {low} and {high}, got {value!r}"
        else:
            cleaned[field] = number
    if data.get("no_limit"):
        if "concurrency_limit" in cleaned:
            errors["concurrency_limit"] = "give a limit or --no-limit, not both"
        cleaned["concurrency_limit"] = None
    if errors:
        raise ValidationFailed(errors)
    return cleaned


def add_queue(data: dict, *, now: datetime, actor: str) -> Queue:
    cleaned = _clean(data, creating=True)
    begin_write(db.session)
    project = default_project()
    if db.session.scalar(select(Queue.id).where(Queue.project_id == project.id, Queue.name == cleaned["name"])):
        raise ValidationFailed({"name": f"a queue named {cleaned['name']!r} already exists"})
    queue = Queue(project_id=project.id, created_at=now, updated_at=now, **cleaned)
    db.session.add(queue)
    db.session.flush()
    record_event("queue_created", now=now, actor=actor, queue=queue.name, **_settings(queue))
    _commit()
    return queue


def edit_queue(name: str, data: dict, *, now: datetime, actor: str) -> Queue:
    cleaned = _clean(data, creating=False)
    begin_write(db.session)
    queue = get_queue(name)
    if "name" in cleaned and cleaned["name"] != queue.name:
        if db.session.scalar(
            select(Queue.id).where(Queue.project_id == queue.project_id, Queue.name == cleaned["name"])
        ):
            raise ValidationFailed({"name": f"a queue named {cleaned['name']!r} already exists"})
    before = _settings(queue)
    # Slots are counted by the runs that took one, so a new limit needs no recount: runs already
    # in flight when a queue first gets a limit do not count toward it (ADR 0008).
    limit_changed = "concurrency_limit" in cleaned and cleaned["concurrency_limit"] != queue.concurrency_limit
    for key, value in cleaned.items():
        setattr(queue, key, value)
    queue.updated_at = now
    changed = {k: [before[k], v] for k, v in _settings(queue).items() if before.get(k) != v}
    record_event("queue_updated", now=now, actor=actor, queue=queue.name, changed=changed)
    _commit(work=limit_changed)
    return queue


def pause_queue(name: str, *, now: datetime, actor: str, reason: str | None = None) -> Queue:
    """Stop new claims from the queue; running work finishes."""
    if reason is not None and _text_problem(reason):
        raise ValidationFailed({"reason": _text_problem(reason)})
    begin_write(db.session)
    queue = get_queue(name)
    if not queue.paused:
        queue.paused, queue.paused_at, queue.paused_by = True, now, actor
        queue.paused_reason = (reason or "").strip() or None
        queue.updated_at = now
        record_event("queue_paused", now=now, actor=actor, queue=queue.name, reason=queue.paused_reason)
        _commit()
    return queue


def resume_queue(name: str, *, now: datetime, actor: str) -> Queue:
    begin_write(db.session)
    queue = get_queue(name)
    if queue.paused:
        paused_for = (now - queue.paused_at).total_seconds() if queue.paused_at else None
        queue.paused, queue.paused_at, queue.paused_by, queue.paused_reason = False, None, None, None
        queue.updated_at = now
        record_event("queue_resumed", now=now, actor=actor, queue=queue.name, paused_seconds=paused_for)
        _commit(work=True)
    return queue


def delete_queue(name: str, *, now: datetime, actor: str) -> None:
    """Delete a queue no job uses and no unfinished execution waits in."""
    begin_write(db.session)
    queue = get_queue(name)
    jobs = db.session.scalar(select(func.count()).select_from(Job).where(Job.queue_id == queue.id))
    if jobs:
        raise Conflict(f"queue {queue.name!r} is used by {jobs} job{'s' if jobs != 1 else ''}; move them first")
    unfinished = db.session.scalar(
        select(func.count())
        .select_from(Execution)
        .where(Execution.queue_id == queue.id, Execution.finished_at.is_(None))
    )
    if unfinished:
        raise Conflict(f"queue {queue.name!r} still holds {unfinished} unfinished execution(s)")
    record_event("queue_deleted", now=now, actor=actor, queue=queue.name)
    db.session.delete(queue)
    _commit()


def _settings(queue: Queue) -> dict:
    return {
        "name": queue.name,
        "description": queue.description,
        "concurrency_limit": queue.concurrency_limit,
        "priority": queue.priority,
    }


def _commit(*, work: bool = False) -> None:
    cache.invalidate_on_commit(db.session, cache.keys_for_job_change(None))
    wakeups.notify_on_commit(db.session, work=work)
    db.session.commit()
