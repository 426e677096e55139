"""Queue operations shared by the CLI, the web UI and the worker's start-up check: add, edit,
pause, resume, delete, and resolving names people type into queue rows.

Names are unique within a project. Every function takes the `caller` (None: the system, which
sees everything): a name is looked up in the caller's project (its working project, see
`tenancy.working_project`; the default project for the CLI and the engine), and a queue of another
organization is a NotFound like a missing one. Adding, editing and deleting a queue is an admin's
(`Action.ADMINISTER`); pause and resume an operator's. Every mutation records an event and commits
in one transaction; resume and a raised limit wake the workers at once (NOTIFY), since work may
now be claimable.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from app import cache
from app.database import begin_write
from app.definitions import text_limits
from app.domain.names import NAME_PATTERN, NAME_RULE
from app.domain.permissions import Action
from app.domain.rate_limits import RateLimitError, parse_rate_limit
from app.extensions import db
from app.models import Execution, Job, Project, Queue
from app.models.queue import DEFAULT_PROJECT, DEFAULT_QUEUE
from app.services import audit_trail, scoping
from app.services.caller import Caller
from app.services.engine import wakeups
from app.services.errors import Conflict, NotFound, ValidationFailed
from app.services.events import record_event
from app.services.use_cases.tenancy import working_project

PRIORITY_RANGE = (-1000, 1000)
LIMIT_RANGE = (1, 100_000)
DESCRIPTION_MAX = text_limits.QUEUE_DESCRIPTION.maximum
PAUSE_REASON_MAX = text_limits.PAUSE_REASON.maximum


def default_project() -> Project:
    """The default organization's `default` project."""
    from app.models import Organization
    from app.models.tenancy import DEFAULT_ORGANIZATION

    project = db.session.scalar(
        select(Project)
        .join(Organization)
        .where(Project.name == DEFAULT_PROJECT, Organization.name == DEFAULT_ORGANIZATION)
    )
    if project is None:  # an installation always has it (migration 0004); say so if it was removed
        raise Conflict("the default project is missing; run `flask db upgrade`")
    return project


def project_for(caller: Caller | None) -> Project:
    """The project queue names are looked up in for this caller."""
    return working_project(caller)


def list_queues(caller: Caller | None = None) -> list[Queue]:
    """The queues the caller may see (every queue for the system), by name."""
    return list(db.session.scalars(scoping.queues(select(Queue).order_by(Queue.name, Queue.id), caller)))


def known_names(caller: Caller | None = None, *, project_id: int | None = None) -> list[str]:
    """The queue names of the caller's project (or of `project_id`)."""
    if project_id is None:
        project_id = project_for(caller).id
    return list(db.session.scalars(select(Queue.name).where(Queue.project_id == project_id).order_by(Queue.name)))


def unknown_queue_message(
    name: str, caller: Caller | None = None, *, project_id: int | None = None, everywhere: bool = False
) -> str:
    """ "unknown queue ..." with the names known in `project_id` (the caller's project by default;
    with `everywhere`, in every project the caller sees)."""
    if everywhere:
        seen = scoping.queues(select(Queue.name).distinct().order_by(Queue.name), caller)
        known = list(db.session.scalars(seen))
    else:
        known = known_names(caller, project_id=project_id)
    listed = ", ".join(known) if known else "none"
    return f"unknown queue {name!r}; known queues: {listed} (create one with `flask queue add NAME`)"


def queues_named(name: str, caller: Caller | None = None) -> list[Queue]:
    """Every queue called `name` that the caller sees (one per project in view), by project;
    NotFound when there is none, listing the known names."""
    found = list(
        db.session.scalars(scoping.queues(select(Queue).where(Queue.name == name), caller).order_by(Queue.project_id))
    )
    if not found:
        raise NotFound(unknown_queue_message(name, caller, everywhere=caller is not None and caller.project_id is None))
    return found


def get_queue(name: str, caller: Caller | None = None, *, project: str | None = None) -> Queue:
    """The queue called `name` in the caller's project (or in `project`, named ORG/PROJECT, which
    the caller must see); NotFound for a name it has none of.

    A caller in an organization with several projects and none chosen finds a name that only one
    of its projects has; a name several have is looked up in the working project."""
    if project:
        from app.services.use_cases.tenancy import find_project

        in_project = find_project(project, caller)
        queue = db.session.scalar(select(Queue).where(Queue.name == name, Queue.project_id == in_project.id))
        if queue is None:
            raise NotFound(unknown_queue_message(name, project_id=in_project.id))
        return queue
    queue = None
    if caller is not None and caller.project_id is None and caller.organization_id is not None:
        found = list(db.session.scalars(scoping.queues(select(Queue).where(Queue.name == name), caller).limit(2)))
        queue = found[0] if len(found) == 1 else None
    if queue is None:
        queue = db.session.scalar(select(Queue).where(Queue.name == name, Queue.project_id == project_for(caller).id))
    if queue is None:
        raise NotFound(unknown_queue_message(name, caller))
    return queue


def resolve_for_job(name: str, *, project_id: int | None = None, caller: Caller | None = None) -> Queue:
    """The queue a job names in its project (default: the caller's), or a field error listing the known ones."""
    if project_id is None:
        project_id = project_for(caller).id
    queue = db.session.scalar(select(Queue).where(Queue.name == name, Queue.project_id == project_id))
    if queue is None:
        raise ValidationFailed({"queue": unknown_queue_message(name, project_id=project_id)})
    return queue


def _allowed(caller: Caller | None, action: Action) -> None:
    if caller is not None:
        caller.require(action)


def _text_problem(text: str, limit: text_limits.TextLimit = text_limits.QUEUE_DESCRIPTION) -> str | None:
    """Why a description or pause reason cannot be stored (too long; PostgreSQL refuses NUL), or None."""
    if "\x00" in text:
        return "must be text without NUL characters"
    return text_limits.too_long(text, limit)


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
    if "rate_limit" in data and data["rate_limit"] is not None:
        text_value = str(data["rate_limit"]).strip()
        if text_value.lower() in ("", "none"):
            cleaned["rate_limit"] = None
        else:
            try:
                cleaned["rate_limit"] = str(parse_rate_limit(text_value))
            except RateLimitError as exc:
                errors["rate_limit"] = str(exc)
    if data.get("no_limit"):
        if "concurrency_limit" in cleaned:
            errors["concurrency_limit"] = "give a limit or --no-limit, not both"
        cleaned["concurrency_limit"] = None
    if errors:
        raise ValidationFailed(errors)
    return cleaned


def add_queue(data: dict, *, now: datetime, actor: str, caller: Caller | None = None) -> Queue:
    """Create a queue in the caller's project (the default project for the system)."""
    _allowed(caller, Action.ADMINISTER)
    cleaned = _clean(data, creating=True)
    begin_write(db.session)
    project = project_for(caller)
    if db.session.scalar(select(Queue.id).where(Queue.project_id == project.id, Queue.name == cleaned["name"])):
        raise ValidationFailed({"name": f"a queue named {cleaned['name']!r} already exists"})
    queue = Queue(project_id=project.id, created_at=now, updated_at=now, **cleaned)
    db.session.add(queue)
    db.session.flush()
    record_event("queue_created", now=now, actor=actor, queue=queue.name, **_settings(queue))
    audit_trail.record_change(actor, "created", "queue", queue.id, None, _settings(queue), now=now, **_about(queue))
    _commit()
    return queue


def edit_queue(name: str, data: dict, *, now: datetime, actor: str, caller: Caller | None = None) -> Queue:
    _allowed(caller, Action.ADMINISTER)
    cleaned = _clean(data, creating=False)
    begin_write(db.session)
    queue = get_queue(name, caller)
    if "name" in cleaned and cleaned["name"] != queue.name:
        if db.session.scalar(
            select(Queue.id).where(Queue.project_id == queue.project_id, Queue.name == cleaned["name"])
        ):
            raise ValidationFailed({"name": f"a queue named {cleaned['name']!r} already exists"})
    before = _settings(queue)
    # Slots are counted by the runs that took one, so a new limit needs no recount: runs already
    # in flight when a queue first gets a limit do not count toward it (ADR 0008).
    limit_changed = any(
        key in cleaned and cleaned[key] != getattr(queue, key) for key in ("concurrency_limit", "rate_limit")
    )
    for key, value in cleaned.items():
        setattr(queue, key, value)
    queue.updated_at = now
    changed = {k: [before[k], v] for k, v in _settings(queue).items() if before.get(k) != v}
    record_event("queue_updated", now=now, actor=actor, queue=queue.name, changed=changed)
    audit_trail.record_change(actor, "updated", "queue", queue.id, before, _settings(queue), now=now, **_about(queue))
    _commit(work=limit_changed)
    return queue


def pause_queue(
    name: str, *, now: datetime, actor: str, reason: str | None = None, caller: Caller | None = None
) -> Queue:
    """Stop new claims from the queue; running work finishes."""
    _allowed(caller, Action.OPERATE)
    if reason is not None and (problem := _text_problem(reason, text_limits.PAUSE_REASON)):
        raise ValidationFailed({"reason": problem})
    begin_write(db.session)
    queue = get_queue(name, caller)
    if not queue.paused:
        queue.paused, queue.paused_at, queue.paused_by = True, now, actor
        queue.paused_reason = (reason or "").strip() or None
        queue.updated_at = now
        record_event("queue_paused", now=now, actor=actor, queue=queue.name, reason=queue.paused_reason)
        audit_trail.record_change(
            actor,
            "paused",
            "queue",
            queue.id,
            {"paused": False},
            {"paused": True, "paused_reason": queue.paused_reason},
            now=now,
            **_about(queue),
        )
        _commit()
    return queue


def resume_queue(name: str, *, now: datetime, actor: str, caller: Caller | None = None) -> Queue:
    _allowed(caller, Action.OPERATE)
    begin_write(db.session)
    queue = get_queue(name, caller)
    if queue.paused:
        paused_for = (now - queue.paused_at).total_seconds() if queue.paused_at else None
        before = {"paused": True, "paused_reason": queue.paused_reason}
        queue.paused, queue.paused_at, queue.paused_by, queue.paused_reason = False, None, None, None
        audit_trail.record_change(
            actor,
            "resumed",
            "queue",
            queue.id,
            before,
            {"paused": False, "paused_reason": None},
            now=now,
            **_about(queue),
        )
        queue.updated_at = now
        record_event("queue_resumed", now=now, actor=actor, queue=queue.name, paused_seconds=paused_for)
        _commit(work=True)
    return queue


def delete_queue(name: str, *, now: datetime, actor: str, caller: Caller | None = None) -> None:
    """Delete a queue no job uses and no unfinished execution waits in; never a project's `default`."""
    _allowed(caller, Action.ADMINISTER)
    begin_write(db.session)
    queue = get_queue(name, caller)
    if queue.name == DEFAULT_QUEUE:
        # A job or run that names no queue goes to its project's `default`: every project keeps one.
        raise Conflict("the default queue cannot be deleted")
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
    audit_trail.record_change(actor, "deleted", "queue", queue.id, _settings(queue), None, now=now, **_about(queue))
    db.session.delete(queue)
    _commit()


def _about(queue: Queue) -> dict:
    """`record_change` keywords for a queue: its name as the label, its project."""
    return {"label": queue.name, "project_id": queue.project_id}


def _settings(queue: Queue) -> dict:
    return {
        "name": queue.name,
        "description": queue.description,
        "concurrency_limit": queue.concurrency_limit,
        "rate_limit": queue.rate_limit,
        "priority": queue.priority,
    }


def _commit(*, work: bool = False) -> None:
    cache.invalidate_on_commit(db.session, cache.keys_for_job_change(None))
    wakeups.notify_on_commit(db.session, work=work)
    db.session.commit()
