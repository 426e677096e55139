"""Renaming and deleting the organization and its projects on the web (admins): thin adapters
over `app.services.use_cases.tenancy_changes`, registered on the projects blueprint. A delete
shows what it would remove and asks before it goes; one with work left needs "everything in it"
ticked."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask_wtf import FlaskForm
from wtforms import BooleanField, StringField

from app.clock import utcnow
from app.domain.permissions import Action
from app.extensions import db
from app.models import Organization
from app.services.errors import ServiceError, ValidationFailed
from app.services.use_cases import tenancy
from app.services.use_cases import tenancy_changes as changes
from app.users.projects import bp
from app.web.access import current_caller, requires


class RenameForm(FlaskForm):
    name = StringField("New name")


class DeleteForm(FlaskForm):
    cascade = BooleanField("Also delete everything in it (jobs with their history, queues, executions)")


def _error_text(exc: ServiceError) -> str:
    if isinstance(exc, ValidationFailed):
        return "; ".join(f"{field}: {message}" for field, message in exc.errors.items())
    return str(exc)


def _organization():
    caller = current_caller()
    org = db.session.get(Organization, caller.organization_id) if caller.organization_id else None
    return caller, org


@bp.post("/<id:project_id>/rename")
@requires(Action.ADMINISTER)
def rename(project_id: int):
    """Rename a project of the organization; a bad or taken name is shown on the page (400)."""
    from app.users.projects import render_page

    caller = current_caller()
    form = RenameForm()
    try:
        project = tenancy.get_project(project_id, caller)
        if not form.validate_on_submit():
            return render_page(status=400, rename_errors={project_id: "the form expired; try again"})
        renamed = changes.rename_project(project.full_name, (form.name.data or "").strip(), now=utcnow(), caller=caller)
    except ServiceError as exc:
        return render_page(
            status=404 if "does not exist" in str(exc) else 400, rename_errors={project_id: _error_text(exc)}
        )
    flash(f"Project renamed to {renamed.full_name}.", "success")
    return redirect(url_for("projects.index"), code=303)


@bp.post("/organization/rename")
@requires(Action.ADMINISTER)
def rename_organization():
    """Rename the organization chosen in the header."""
    from app.users.projects import render_page

    caller, org = _organization()
    form = RenameForm()
    if org is None:
        return render_page(status=400, organization_error="Choose an organization in the header first.")
    if not form.validate_on_submit():
        return render_page(status=400, organization_error="the form expired; try again")
    try:
        renamed = changes.rename_organization(org.name, (form.name.data or "").strip(), now=utcnow(), caller=caller)
    except ServiceError as exc:
        return render_page(status=400, organization_error=_error_text(exc))
    flash(f"Organization renamed to {renamed.name}.", "success")
    return redirect(url_for("projects.index"), code=303)


@bp.route("/<id:project_id>/delete", methods=["GET", "POST"])
@requires(Action.ADMINISTER)
def delete(project_id: int):
    """Show what deleting the project removes; on POST, delete it (with the box ticked, all of it)."""
    caller = current_caller()
    try:
        project = tenancy.get_project(project_id, caller)
        name = project.full_name
        plan = changes.project_deletion_plan(name, caller)
    except ServiceError as exc:
        return _confirm_page(None, None, error=_error_text(exc), status=404 if "does not exist" in str(exc) else 409)
    form = DeleteForm()
    if request.method == "POST" and form.validate_on_submit():
        try:
            done = changes.delete_project(name, cascade=bool(form.cascade.data), now=utcnow(), caller=caller)
        except ServiceError as exc:
            return _confirm_page(f"project {name}", plan, form=form, error=_error_text(exc), status=409)
        flash(f"Deleted project {name}: {done.describe()}.", "success")
        return redirect(url_for("projects.index"), code=303)
    target = url_for("projects.delete", project_id=project_id)
    return _confirm_page(
        f"project {name}", plan, form=form, action=target, status=400 if request.method == "POST" else 200
    )


@bp.route("/organization/delete", methods=["GET", "POST"])
@requires(Action.ADMINISTER)
def delete_organization():
    """Show what deleting the organization removes; on POST, delete it."""
    caller, org = _organization()
    if org is None:
        return _confirm_page(None, None, error="Choose an organization in the header first.", status=400)
    try:
        plan = changes.organization_deletion_plan(org.name, caller)
    except ServiceError as exc:
        return _confirm_page(None, None, error=_error_text(exc), status=409)
    form = DeleteForm()
    name = org.name
    if request.method == "POST" and form.validate_on_submit():
        try:
            done = changes.delete_organization(name, cascade=bool(form.cascade.data), now=utcnow(), caller=caller)
        except ServiceError as exc:
            return _confirm_page(f"organization {name}", plan, form=form, error=_error_text(exc), status=409)
        flash(f"Deleted organization {name}: {done.describe()}.", "success")
        return redirect(url_for("dashboard.home"), code=303)
    target = url_for("projects.delete_organization")
    return _confirm_page(
        f"organization {name}", plan, form=form, action=target, status=400 if request.method == "POST" else 200
    )


def _confirm_page(what, plan, *, form=None, action=None, error=None, status=200):
    return render_template(
        "users/delete.html", what=what, plan=plan, form=form or DeleteForm(formdata=None), action=action, error=error
    ), status
