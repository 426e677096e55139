"""Renaming and deleting organizations and projects.

A rename changes the name only: ids never change, and everything refers to an organization or a
project by id (jobs, queues, executions, tokens, memberships), so `ORG/PROJECT` changes
everywhere at once and a running scheduler or worker notices nothing. A delete is refused while
the project (or any project of the organization) holds jobs, queues of its own or running
executions, unless `cascade` is given; then everything in it goes, each job through the job
deletion (audited), and `deletion_plan` says beforehand what that is. The installation's default
organization and its default project are never deleted: a caller with nothing chosen works there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, func, or_, select, update

from app.database import begin_write
from app.domain.permissions import Action
from app.domain.states import ExecutionStatus
from app.extensions import db
from app.models import (
    Alert,
    AlertChannel,
    AlertDelivery,
    ApiToken,
    Execution,
    Job,
    Membership,
    Organization,
    Project,
    Queue,
)
from app.models.queue import DEFAULT_PROJECT, DEFAULT_QUEUE
from app.models.tenancy import DEFAULT_ORGANIZATION
from app.services import audit_trail
from app.services.caller import Caller
from app.services.errors import Conflict, Forbidden, ValidationFailed
from app.services.events import record_event
from app.services.use_cases import tenancy
from app.services.use_cases.jobs import remove_job
from app.store import store_for

RUNNING = (ExecutionStatus.CLAIMED.value, ExecutionStatus.RUNNING.value)


def _require_admin(caller: Caller, organization_id: int, what: str) -> None:
    if not caller.superuser and not tenancy._role_allows(caller, organization_id, Action.ADMINISTER):
        raise Forbidden(what)


# --- rename ----------------------------------------------------------------------------------


def rename_organization(old: str, new: str, *, now: datetime, caller: Caller) -> Organization:
    """Rename an organization (a superuser, or an admin of it); its id stays."""
    org = tenancy.get_organization(old, caller)
    _require_admin(caller, org.id, "only an admin of the organization may rename it")
    tenancy.check_name(new)
    begin_write(db.session)
    org = tenancy.get_organization(old, caller)
    if new == org.name:
        return org
    if db.session.scalar(select(Organization.id).where(Organization.name == new)):
        raise ValidationFailed({"name": f"an organization named {new!r} already exists"})
    org.name = new
    record_event("organization_renamed", now=now, actor=caller.actor, organization_id=org.id, before=old, after=new)
    audit_trail.record_change(
        caller,
        "renamed",
        "organization",
        org.id,
        {"name": old},
        {"name": new},
        now=now,
        label=new,
        organization_id=org.id,
    )
    db.session.commit()
    return org


def rename_project(reference: str, new: str, *, now: datetime, caller: Caller) -> Project:
    """Rename the project `ORG/PROJECT` within its organization (an admin of it); its id stays."""
    project = tenancy.find_project(reference, caller)
    _require_admin(caller, project.organization_id, "only an admin of the organization may rename its projects")
    tenancy.check_name(new)
    begin_write(db.session)
    project = tenancy.get_project(project.id, caller)
    before = project.full_name
    if new == project.name:
        return project
    if db.session.scalar(
        select(Project.id).where(Project.organization_id == project.organization_id, Project.name == new)
    ):
        raise ValidationFailed({"name": f"a project named {project.organization.name}/{new} already exists"})
    old_name, project.name = project.name, new
    record_event(
        "project_renamed", now=now, actor=caller.actor, project_id=project.id, before=before, after=project.full_name
    )
    audit_trail.record_change(
        caller,
        "renamed",
        "project",
        project.id,
        {"name": old_name},
        {"name": new},
        now=now,
        label=project.full_name,
        project_id=project.id,
        organization_id=project.organization_id,
    )
    db.session.commit()
    return project


# --- delete ----------------------------------------------------------------------------------


@dataclass
class DeletionPlan:
    """What deleting a project (or every project of an organization) removes."""

    projects: list[str] = field(default_factory=list)
    jobs: int = 0
    queues: int = 0  # besides each project's own `default` queue, which goes with it
    executions: int = 0
    running: int = 0

    @property
    def empty(self) -> bool:
        """Nothing but the projects themselves (and their default queues)."""
        return not (self.jobs or self.queues or self.running)

    def describe(self) -> str:
        return (
            f"{len(self.projects)} project(s) ({', '.join(self.projects) or 'none'}), {self.jobs} job(s), "
            f"{self.queues} queue(s) besides the default ones, {self.executions} execution(s) "
            f"({self.running} running)"
        )

    def to_dict(self) -> dict:
        return {
            "projects": self.projects,
            "jobs": self.jobs,
            "queues": self.queues,
            "executions": self.executions,
            "running": self.running,
        }


def _executions_of(project_ids: list[int]):
    queues = select(Queue.id).where(Queue.project_id.in_(project_ids))
    jobs = select(Job.id).where(Job.project_id.in_(project_ids))
    return or_(Execution.job_id.in_(jobs), Execution.queue_id.in_(queues))


def _plan(projects: list[Project]) -> DeletionPlan:
    ids = [p.id for p in projects]
    plan = DeletionPlan(projects=[p.full_name for p in projects])
    if not ids:
        return plan
    plan.jobs = db.session.scalar(select(func.count()).select_from(Job).where(Job.project_id.in_(ids))) or 0
    plan.queues = (
        db.session.scalar(
            select(func.count()).select_from(Queue).where(Queue.project_id.in_(ids), Queue.name != DEFAULT_QUEUE)
        )
        or 0
    )
    where = _executions_of(ids)
    plan.executions = db.session.scalar(select(func.count()).select_from(Execution).where(where)) or 0
    plan.running = (
        db.session.scalar(select(func.count()).select_from(Execution).where(where, Execution.status.in_(RUNNING))) or 0
    )
    return plan


def _deletable_project(project: Project) -> None:
    if project.name == DEFAULT_PROJECT and project.organization.name == DEFAULT_ORGANIZATION:
        raise Conflict("the default project of the default organization cannot be deleted")


def _deletable_organization(org: Organization) -> None:
    if org.name == DEFAULT_ORGANIZATION:
        raise Conflict("the default organization cannot be deleted")


def project_deletion_plan(reference: str, caller: Caller) -> DeletionPlan:
    """What deleting the project would remove (Conflict when it may never be deleted)."""
    project = tenancy.find_project(reference, caller)
    _deletable_project(project)
    return _plan([project])


def organization_deletion_plan(name: str, caller: Caller) -> DeletionPlan:
    """What deleting the organization would remove (Conflict when it may never be deleted)."""
    org = tenancy.get_organization(name, caller)
    _deletable_organization(org)
    return _plan(tenancy.projects_of(org.id))


def _refuse_unless_cascade(plan: DeletionPlan, what: str, cascade: bool) -> None:
    if not plan.empty and not cascade:
        raise Conflict(f"{what} still holds {plan.describe()}; delete those first, or delete with cascade")


def _remove_projects(projects: list[Project], *, now: datetime, caller: Caller) -> None:
    """Delete the projects and everything in them, in the open write transaction."""
    ids = [p.id for p in projects]
    for job in db.session.scalars(select(Job).where(Job.project_id.in_(ids)).order_by(Job.id)):
        remove_job(job, now=now, actor=caller.actor)
    db.session.flush()
    conn = db.session.connection()
    left = list(db.session.scalars(select(Execution.id).where(_executions_of(ids))))
    if left:  # one-off runs in the projects' queues
        store_for(conn).delete_executions(conn, left)
    # What the database cascades on PostgreSQL, stated for SQLite (which enforces no foreign keys).
    channels = select(AlertChannel.id).where(AlertChannel.project_id.in_(ids))
    db.session.execute(delete(AlertDelivery).where(AlertDelivery.channel_id.in_(channels)))
    db.session.execute(delete(AlertChannel).where(AlertChannel.project_id.in_(ids)))
    db.session.execute(delete(ApiToken).where(ApiToken.project_id.in_(ids)))
    db.session.execute(update(Alert).where(Alert.project_id.in_(ids)).values(project_id=None))
    for project in projects:
        for queue in db.session.scalars(select(Queue).where(Queue.project_id == project.id)):
            db.session.delete(queue)
        db.session.flush()
        record_event("project_deleted", now=now, actor=caller.actor, project_id=project.id, project=project.full_name)
        audit_trail.record_change(
            caller,
            "deleted",
            "project",
            project.id,
            {"name": project.name},
            None,
            now=now,
            label=project.full_name,
            project_id=project.id,
            organization_id=project.organization_id,
        )
        db.session.delete(project)
    db.session.flush()


def delete_project(reference: str, *, cascade: bool = False, now: datetime, caller: Caller) -> DeletionPlan:
    """Delete the project `ORG/PROJECT` (an admin of its organization); returns what went."""
    project = tenancy.find_project(reference, caller)
    _require_admin(caller, project.organization_id, "only an admin of the organization may delete its projects")
    _deletable_project(project)
    begin_write(db.session)
    project = tenancy.get_project(project.id, caller)
    plan = _plan([project])
    _refuse_unless_cascade(plan, f"project {project.full_name}", cascade)
    _remove_projects([project], now=now, caller=caller)
    db.session.commit()
    return plan


def delete_organization(name: str, *, cascade: bool = False, now: datetime, caller: Caller) -> DeletionPlan:
    """Delete an organization with its projects and memberships (a superuser, or an admin of it)."""
    org = tenancy.get_organization(name, caller)
    _require_admin(caller, org.id, "only an admin of the organization may delete it")
    _deletable_organization(org)
    begin_write(db.session)
    org = tenancy.get_organization(name, caller)
    projects = tenancy.projects_of(org.id)
    plan = _plan(projects)
    _refuse_unless_cascade(plan, f"organization {org.name!r}", cascade)
    _remove_projects(projects, now=now, caller=caller)
    record_event("organization_deleted", now=now, actor=caller.actor, organization_id=org.id, organization=org.name)
    audit_trail.record_change(
        caller,
        "deleted",
        "organization",
        org.id,
        {"name": org.name},
        None,
        now=now,
        label=org.name,
        organization_id=org.id,
    )
    db.session.execute(delete(Membership).where(Membership.organization_id == org.id))
    db.session.delete(org)
    db.session.commit()
    return plan
