"""Where a caller may look: the filters every list and load of a tenant's object goes through.

A tenant object reaches its organization through its queue: job -> queue -> project ->
organization (executions and alerts through their job; a one-off run, which has no job, and an
alert that names its project, through their own `project_id`). A caller narrowed to an organization
(and perhaps a project) sees only what lies there; a superuser or the system with no
organization chosen sees everything; anyone else sees nothing. Callers that pass no `Caller` at
all are the engine and older adapters: they are the system.
"""

from __future__ import annotations

from typing import TypeGuard

from sqlalchemy import and_, false, or_, select

from app.models import Alert, DeadLetter, Execution, Job, Project, Queue
from app.services.caller import Caller


def _narrowed(caller: Caller | None) -> TypeGuard[Caller]:
    return caller is not None and (
        caller.organization_id is not None or caller.project_id is not None or not caller.sees_everything
    )


def project_ids(caller: Caller | None):
    """A SELECT of the project ids the caller may see, or None when it sees every project."""
    if not _narrowed(caller):
        return None
    if caller.organization_id is None and caller.project_id is not None:  # the CLI's --project
        return select(Project.id).where(Project.id == caller.project_id)
    if caller.organization_id is None:
        return select(Project.id).where(false())
    query = select(Project.id).where(Project.organization_id == caller.organization_id)
    if caller.project_id is not None:
        query = query.where(Project.id == caller.project_id)
    return query


def queue_ids(caller: Caller | None):
    """A SELECT of the queue ids the caller may see, or None when it sees every queue."""
    projects = project_ids(caller)
    return None if projects is None else select(Queue.id).where(Queue.project_id.in_(projects))


def job_ids(caller: Caller | None):
    """A SELECT of the job ids the caller may see, or None when it sees every job."""
    queues = queue_ids(caller)
    return None if queues is None else select(Job.id).where(Job.queue_id.in_(queues))


def projects(query, caller: Caller | None):
    ids = project_ids(caller)
    return query if ids is None else query.where(Project.id.in_(ids))


def queues(query, caller: Caller | None):
    ids = project_ids(caller)
    return query if ids is None else query.where(Queue.project_id.in_(ids))


def jobs(query, caller: Caller | None):
    ids = queue_ids(caller)
    return query if ids is None else query.where(Job.queue_id.in_(ids))


def executions(query, caller: Caller | None):
    """Executions of the caller's projects: a job's through its job, a one-off run (no job)
    through its own project."""
    ids = job_ids(caller)
    if ids is None:
        return query
    return query.where(or_(Execution.job_id.in_(ids), Execution.project_id.in_(project_ids(caller))))


def dead_letters(query, caller: Caller | None):
    """Dead letters of the caller's projects: through their job, or a one-off run's own project."""
    ids = job_ids(caller)
    if ids is None:
        return query
    one_off = select(Execution.id).where(Execution.job_id.is_(None), Execution.project_id.in_(project_ids(caller)))
    return query.where(or_(DeadLetter.job_id.in_(ids), DeadLetter.execution_id.in_(one_off)))


def alerts(query, caller: Caller | None):
    """Alerts of the caller's projects (an alert keeps its project when its job is deleted; one
    written without a project, by older code, counts as its job's)."""
    ids = project_ids(caller)
    if ids is None:
        return query
    return query.where(
        or_(Alert.project_id.in_(ids), and_(Alert.project_id.is_(None), Alert.job_id.in_(job_ids(caller))))
    )


def cache_scope(caller: Caller | None) -> str:
    """The part of a cache key that keeps one tenant's figures from another's: `all`, `org:<id>`
    or `org:<id>:project:<id>` (`none` for a caller who sees nothing)."""
    if not _narrowed(caller):
        return "all"
    if caller.organization_id is None:
        return f"project:{caller.project_id}" if caller.project_id is not None else "none"
    if caller.project_id is None:
        return f"org:{caller.organization_id}"
    return f"org:{caller.organization_id}:project:{caller.project_id}"
