"""Organizations and projects: create and list them, name them (`ORG/PROJECT`), and work out
the organization and project a request acts in (the caller).

A fresh installation has one organization and one project, both `default`; while a caller's
organization has one project (or one called `default`) that project is implied wherever a queue
is named, so single-team use needs no project anywhere. Every project gets its `default` queue.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from app.database import begin_write
from app.definitions import text_limits
from app.domain.names import NAME_PATTERN, NAME_RULE
from app.domain.permissions import Action
from app.extensions import db
from app.models import Membership, Organization, Project, Queue, User
from app.models.queue import DEFAULT_PROJECT, DEFAULT_QUEUE
from app.models.tenancy import DEFAULT_ORGANIZATION
from app.services import audit_trail, scoping
from app.services.caller import Caller
from app.services.errors import Conflict, Forbidden, NotFound, ValidationFailed
from app.services.events import record_event

DESCRIPTION_MAX = text_limits.PROJECT_DESCRIPTION.maximum


def check_name(value, field: str = "name") -> str:
    """An organization or project name: the queue-name rule (it appears in `ORG/PROJECT`)."""
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise ValidationFailed({field: NAME_RULE})
    return value


# --- organizations -------------------------------------------------------------------------


def default_organization() -> Organization:
    org = db.session.scalar(select(Organization).where(Organization.name == DEFAULT_ORGANIZATION))
    if org is None:  # an installation always has it (migration 0007)
        raise Conflict("the default organization is missing; run `flask db upgrade`")
    return org


def list_organizations(caller: Caller | None = None) -> list[Organization]:
    """The organizations the caller may see (a member's own; every one for a superuser), by name."""
    query = select(Organization).order_by(Organization.name)
    if caller is not None and not caller.sees_everything:
        if caller.user_id is None:
            query = query.where(Organization.id == caller.organization_id)
        else:
            query = query.where(
                Organization.id.in_(select(Membership.organization_id).where(Membership.user_id == caller.user_id))
            )
    return list(db.session.scalars(query))


def get_organization(name: str, caller: Caller | None = None) -> Organization:
    """The organization called `name`, if the caller may see it (else NotFound, like a missing one)."""
    found = None
    if isinstance(name, str) and "\x00" not in name:
        found = next((org for org in list_organizations(caller) if org.name == name), None)
    if found is None:
        raise NotFound(f"organization {name!r} does not exist (create one with `flask org add NAME`)")
    return found


def add_organization(name: str, *, now: datetime, caller: Caller) -> Organization:
    """Create an organization (superusers only). It starts with no project and no members."""
    if not caller.superuser:
        raise Forbidden("only a superuser may create organizations")
    check_name(name)
    begin_write(db.session)
    if db.session.scalar(select(Organization.id).where(Organization.name == name)):
        raise ValidationFailed({"name": f"an organization named {name!r} already exists"})
    org = Organization(name=name, created_at=now)
    db.session.add(org)
    db.session.flush()
    record_event("organization_created", now=now, actor=caller.actor, organization=name, organization_id=org.id)
    audit_trail.record_change(
        caller, "created", "organization", org.id, None, {"name": name}, now=now, label=name, organization_id=org.id
    )
    db.session.commit()
    return org


def organization_to_dict(org: Organization) -> dict:
    from app.clock import iso_z

    projects = db.session.scalar(select(func.count()).select_from(Project).where(Project.organization_id == org.id))
    members = db.session.scalar(
        select(func.count()).select_from(Membership).where(Membership.organization_id == org.id)
    )
    return {
        "id": org.id,
        "name": org.name,
        "projects": projects,
        "members": members,
        "created_at": iso_z(org.created_at),
    }


# --- projects --------------------------------------------------------------------------------


def list_projects(caller: Caller | None = None, *, organization: Organization | None = None) -> list[Project]:
    """The projects the caller may see (optionally of one organization), by organization and name."""
    query = select(Project).join(Organization).order_by(Organization.name, Project.name)
    if organization is not None:
        query = query.where(Project.organization_id == organization.id)
    return list(db.session.scalars(scoping.projects(query, caller)))


def projects_of(organization_id: int) -> list[Project]:
    """The organization's projects, by name (for the header's switcher)."""
    return list(
        db.session.scalars(select(Project).where(Project.organization_id == organization_id).order_by(Project.name))
    )


def get_project(project_id: int, caller: Caller | None = None) -> Project:
    project = db.session.scalar(scoping.projects(select(Project).where(Project.id == project_id), caller))
    if project is None:
        raise NotFound(f"project {project_id} does not exist")
    return project


def find_project(reference: str, caller: Caller | None = None) -> Project:
    """The project named `ORG/PROJECT` (or just `PROJECT` within the caller's organization)."""
    text = (reference or "").strip()
    org_name, _, name = text.rpartition("/")
    if not name or "\x00" in text:
        raise ValidationFailed({"project": f"name a project as ORG/PROJECT, got {reference!r}"})
    query = select(Project).join(Organization).where(Project.name == name)
    if org_name:
        query = query.where(Organization.name == org_name)
    elif caller is not None and caller.organization_id is not None:
        query = query.where(Project.organization_id == caller.organization_id)
    else:
        query = query.where(Organization.name == DEFAULT_ORGANIZATION)
    project = db.session.scalar(scoping.projects(query, caller))
    if project is None:
        known = ", ".join(p.full_name for p in list_projects(caller)) or "none"
        raise NotFound(f"project {text!r} does not exist; known projects: {known}")
    return project


def add_project(org_name: str, name: str, *, now: datetime, caller: Caller, description: str = "") -> Project:
    """Create a project (with its `default` queue) in an organization the caller administers."""
    org = get_organization(org_name, caller)
    if not caller.superuser and not _role_allows(caller, org.id, Action.ADMINISTER):
        raise Forbidden("only an admin of the organization may create projects")
    check_name(name)
    description = description or ""
    if "\x00" in description:
        raise ValidationFailed({"description": "must be text without NUL characters"})
    if problem := text_limits.too_long(description, text_limits.PROJECT_DESCRIPTION):
        raise ValidationFailed({"description": problem})
    begin_write(db.session)
    if db.session.scalar(select(Project.id).where(Project.organization_id == org.id, Project.name == name)):
        raise ValidationFailed({"name": f"a project named {org.name}/{name} already exists"})
    project = Project(organization_id=org.id, name=name, description=description, created_at=now)
    db.session.add(project)
    db.session.flush()
    db.session.add(Queue(project_id=project.id, name=DEFAULT_QUEUE, created_at=now, updated_at=now))
    record_event("project_created", now=now, actor=caller.actor, project=f"{org.name}/{name}", project_id=project.id)
    audit_trail.record_change(
        caller,
        "created",
        "project",
        project.id,
        None,
        {"name": name, "description": description},
        now=now,
        label=project.full_name,
        project_id=project.id,
        organization_id=org.id,
    )
    db.session.commit()
    return project


def project_to_dict(project: Project) -> dict:
    from app.clock import iso_z

    return {
        "id": project.id,
        "name": project.name,
        "organization": project.organization.name,
        "full_name": project.full_name,
        "description": project.description,
        "created_at": iso_z(project.created_at),
    }


def working_project(caller: Caller | None) -> Project:
    """The project a queue name is looked up in: the caller's chosen project; else its
    organization's only project, or the one called `default`; else the default organization's
    `default` project (superusers, the CLI and the engine with nothing chosen)."""
    if caller is not None and caller.project_id is not None:
        return get_project(caller.project_id, caller)
    org_id = caller.organization_id if caller is not None else None
    if org_id is None:
        if caller is not None and not caller.sees_everything:
            raise NotFound("you are not a member of any organization")
        org_id = default_organization().id
    candidates = list(db.session.scalars(select(Project).where(Project.organization_id == org_id).order_by(Project.id)))
    if len(candidates) == 1:
        return candidates[0]
    named = next((p for p in candidates if p.name == DEFAULT_PROJECT), None)
    if named is not None:
        return named
    if not candidates:
        raise NotFound("this organization has no project yet; create one with `flask project add ORG NAME`")
    listed = ", ".join(p.full_name for p in candidates)
    raise ValidationFailed({"project": f"choose a project: {listed}"})


# --- who is asking ---------------------------------------------------------------------------


def _role_allows(caller: Caller, organization_id: int, action: Action) -> bool:
    from app.domain.permissions import allows

    if caller.organization_id == organization_id:
        return caller.may(action)
    if caller.user_id is None:
        return False
    role = db.session.scalar(
        select(Membership.role).where(
            Membership.user_id == caller.user_id, Membership.organization_id == organization_id
        )
    )
    return allows(role, action)


def caller_for_user(
    user: User,
    *,
    source: str = "web",
    organization_id: int | None = None,
    project_id: int | None = None,
    address: str | None = None,
) -> Caller:
    """The caller a signed-in user acts as, in the organization and project they chose.

    A member acts in the chosen organization if they belong to it, else in their first one; a
    superuser in the chosen one, or everywhere when none is chosen. A chosen project outside
    that organization is ignored. A user who belongs nowhere gets a caller who sees nothing.
    """
    roles = {m.organization_id: m.role for m in user.memberships}
    if user.superuser:
        org_id = (
            organization_id if organization_id is not None and db.session.get(Organization, organization_id) else None
        )
    else:
        org_id = organization_id if organization_id in roles else (min(roles) if roles else None)
    if project_id is not None and (
        org_id is None
        or db.session.scalar(select(Project.id).where(Project.id == project_id, Project.organization_id == org_id))
        is None
    ):
        project_id = None
    return Caller(
        actor=f"{source}:{user.username}",
        source=source,
        role=roles.get(org_id),
        superuser=bool(user.superuser),
        user_id=user.id,
        organization_id=org_id,
        project_id=project_id,
        address=address,
    )


def public_caller(*, address: str | None = None) -> Caller:
    """An anonymous reader (WEBUI_PUBLIC_READ): the default organization's objects, read only."""
    org = db.session.scalar(select(Organization.id).where(Organization.name == DEFAULT_ORGANIZATION))
    return Caller(actor="web:anonymous", source="web", organization_id=org if org is not None else -1, address=address)
