"""The projects page: the organization's projects with their queues and jobs; admins add one.
A thin adapter over `app.services.use_cases.tenancy`."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for
from flask_wtf import FlaskForm
from sqlalchemy import func, select
from wtforms import StringField, TextAreaField

from app.clock import utcnow
from app.domain.permissions import Action
from app.extensions import db
from app.models import Job, Organization, Queue
from app.services.errors import ServiceError, ValidationFailed
from app.services.use_cases import tenancy
from app.services.use_cases.queues import NAME_RULE
from app.web.access import current_caller, requires

bp = Blueprint("projects", __name__, url_prefix="/projects")


class ProjectForm(FlaskForm):
    name = StringField("Name", description=f"Named ORG/NAME by the CLI and the API; it {NAME_RULE}.")
    description = TextAreaField("Description", render_kw={"rows": 2, "maxlength": tenancy.DESCRIPTION_MAX})


def render_page(form: ProjectForm | None = None, status: int = 200, **errors):
    """The projects page (`errors`: `rename_errors` by project id, `organization_error`)."""
    return _page(form, status, **errors)


def _page(form: ProjectForm | None = None, status: int = 200, **errors):
    caller = current_caller()
    projects = tenancy.list_projects(caller)
    ids = [p.id for p in projects]
    queues = dict(
        db.session.execute(
            select(Queue.project_id, func.count()).where(Queue.project_id.in_(ids)).group_by(Queue.project_id)
        )
        .tuples()
        .all()
    )
    jobs = dict(
        db.session.execute(
            select(Queue.project_id, func.count())
            .select_from(Job)
            .join(Queue, Queue.id == Job.queue_id)
            .where(Queue.project_id.in_(ids))
            .group_by(Queue.project_id)
        )
        .tuples()
        .all()
    )
    organization = db.session.get(Organization, caller.organization_id) if caller.organization_id else None
    return render_template(
        "users/projects.html",
        projects=projects,
        queues=queues,
        jobs=jobs,
        organization=organization,
        form=form or ProjectForm(formdata=None),
        rename_errors=errors.get("rename_errors") or {},
        organization_error=errors.get("organization_error"),
    ), status


@bp.get("/")
@requires(Action.READ)
def index():
    """The projects the caller may see."""
    return _page()


@bp.post("/new")
@requires(Action.ADMINISTER)
def create():
    """Add a project (with its `default` queue) to the organization; errors beside the fields."""
    form = ProjectForm()
    if not form.validate_on_submit():
        return _page(form, 400)
    caller = current_caller()
    organization = db.session.get(Organization, caller.organization_id) if caller.organization_id else None
    if organization is None:
        form.form_errors.append("Choose an organization in the header first: a project belongs to one.")
        return _page(form, 400)
    try:
        project = tenancy.add_project(
            organization.name,
            (form.name.data or "").strip(),
            now=utcnow(),
            caller=caller,
            description=form.description.data or "",
        )
    except ValidationFailed as exc:
        for field, message in exc.errors.items():
            target = form[field] if field in ("name", "description") else None
            if target is not None:
                target.errors = [*target.errors, message]
            else:
                form.form_errors.append(message)
        return _page(form, 400)
    except ServiceError as exc:
        form.form_errors.append(str(exc))
        return _page(form, 409)
    flash(f"Project {project.full_name} created with its 'default' queue.", "success")
    return redirect(url_for("projects.index"), code=303)
