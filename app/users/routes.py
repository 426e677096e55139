"""User management for admins and the organization / project switcher: thin adapters over
`app.services.use_cases.users` and `app.services.use_cases.tenancy`.

An admin manages the members of the organization they act in (a superuser: of the organization
chosen in the switcher, or everyone when none is); a user of another organization is the 404 page.
"""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, request, session, url_for

from app.clock import utcnow
from app.domain.permissions import Action
from app.extensions import db
from app.models import Organization
from app.services.errors import ServiceError, ValidationFailed
from app.services.use_cases import tenancy
from app.services.use_cases import users as user_service
from app.users.forms import NewUserForm, PasswordForm, RoleForm, SwitchForm
from app.web.access import ORGANIZATION_KEY, PROJECT_KEY, current_caller, requires, safe_next

bp = Blueprint("users", __name__, url_prefix="/users")
context_bp = Blueprint("context", __name__)


def _organization():
    caller = current_caller()
    return db.session.get(Organization, caller.organization_id) if caller.organization_id is not None else None


def _list_page(form: NewUserForm | None = None, status: int = 200):
    caller = current_caller()
    org = _organization()
    return render_template(
        "users/list.html",
        users=user_service.list_users(caller),
        organization=org,
        form=form or NewUserForm(formdata=None),
    ), status


@bp.get("/")
@requires(Action.ADMINISTER)
def index():
    """The organization's members (every user for a superuser with no organization chosen)."""
    return _list_page()


@bp.post("/new")
@requires(Action.ADMINISTER)
def create():
    """Create a user in the organization; errors beside their fields."""
    form = NewUserForm()
    if not form.validate_on_submit():
        return _list_page(form, 400)
    caller = current_caller()
    if caller.organization_id is None:
        form.form_errors.append("Choose an organization in the header first: a user joins one.")
        return _list_page(form, 400)
    try:
        user = user_service.create_user(
            form.username.data, password=form.password.data or "", role=form.role.data, now=utcnow(), caller=caller
        )
    except ValidationFailed as exc:
        form.attach_errors(exc.errors)
        return _list_page(form, 400)
    except ServiceError as exc:
        form.form_errors.append(str(exc))
        return _list_page(form, 409)
    flash(f"User {user.username!r} created as {form.role.data}.", "success")
    return redirect(url_for("users.detail", user_id=user.id), code=303)


def _detail_page(user, *, role_form=None, password_form=None, status: int = 200):
    caller = current_caller()
    return render_template(
        "users/detail.html",
        user=user,
        organization=_organization(),
        role=user.role_in(caller.organization_id),
        role_form=role_form or RoleForm(formdata=None, data={"role": user.role_in(caller.organization_id)}),
        password_form=password_form or PasswordForm(formdata=None),
        is_self=caller.user_id == user.id,
    ), status


@bp.get("/<id:user_id>")
@requires(Action.ADMINISTER)
def detail(user_id: int):
    """One user: role here, active or not, password reset."""
    return _detail_page(user_service.get_user_by_id(user_id, current_caller()))


@bp.post("/<id:user_id>/role")
@requires(Action.ADMINISTER)
def set_role(user_id: int):
    caller = current_caller()
    user = user_service.get_user_by_id(user_id, caller)
    form = RoleForm()
    if not form.validate_on_submit():
        return _detail_page(user, role_form=form, status=400)
    try:
        user_service.set_role(user.username, form.role.data, now=utcnow(), caller=caller, organization=_organization())
    except ValidationFailed as exc:
        form.attach_errors(exc.errors)
        return _detail_page(user, role_form=form, status=400)
    except ServiceError as exc:
        flash(str(exc), "error")
        return redirect(url_for("users.detail", user_id=user_id), code=303)
    flash(f"{user.username} is now {form.role.data}; their sessions were ended.", "success")
    return redirect(url_for("users.detail", user_id=user_id), code=303)


def _set_active(user_id: int, active: bool):
    caller = current_caller()
    user = user_service.get_user_by_id(user_id, caller)
    try:
        user_service.set_active(user.username, active, now=utcnow(), caller=caller)
        flash(f"{user.username} {'enabled' if active else 'disabled; their sessions were ended'}.", "success")
    except ServiceError as exc:
        flash(str(exc), "error")
    return redirect(url_for("users.detail", user_id=user_id), code=303)


@bp.post("/<id:user_id>/disable")
@requires(Action.ADMINISTER)
def disable(user_id: int):
    return _set_active(user_id, False)


@bp.post("/<id:user_id>/enable")
@requires(Action.ADMINISTER)
def enable(user_id: int):
    return _set_active(user_id, True)


@bp.post("/<id:user_id>/password")
@requires(Action.ADMINISTER)
def reset_password(user_id: int):
    caller = current_caller()
    user = user_service.get_user_by_id(user_id, caller)
    form = PasswordForm()
    if not form.validate_on_submit():
        return _detail_page(user, password_form=form, status=400)
    try:
        user_service.reset_password(user.username, form.password.data or "", now=utcnow(), caller=caller)
    except ValidationFailed as exc:
        form.attach_errors(exc.errors)
        return _detail_page(user, password_form=form, status=400)
    except ServiceError as exc:
        flash(str(exc), "error")
        return redirect(url_for("users.detail", user_id=user_id), code=303)
    flash(f"Password of {user.username} set; their sessions were ended.", "success")
    return redirect(url_for("users.detail", user_id=user_id), code=303)


@context_bp.post("/context")
@requires(Action.READ)
def switch():
    """Choose the organization and project the pages show (kept in the session). A choice the
    user may not make is ignored, never an error page: the header only offers allowed ones."""
    form = SwitchForm()
    caller = current_caller()
    if form.context.data is not None and form.context.raw_data:
        org_text, _, project_text = (form.context.data or "").partition(":")
        form.organization_id.data, form.project_id.data = org_text, project_text
    allowed_orgs = {org.id for org in tenancy.list_organizations(caller)}
    org_id = _whole(form.organization_id.data)
    if org_id in allowed_orgs:
        session[ORGANIZATION_KEY] = org_id
    elif form.organization_id.data == "" and caller.superuser:
        session.pop(ORGANIZATION_KEY, None)  # a superuser's "every organization"
    chosen_org = session.get(ORGANIZATION_KEY) if session.get(ORGANIZATION_KEY) in allowed_orgs else None
    project_id = _whole(form.project_id.data)
    if (
        project_id is not None
        and chosen_org is not None
        and project_id in {p.id for p in tenancy.projects_of(chosen_org)}
    ):
        session[PROJECT_KEY] = project_id
    else:
        session.pop(PROJECT_KEY, None)
    target = safe_next(request.form.get("next")) or url_for("dashboard.index")
    return redirect(_list_of(target), code=303)


def _list_of(target: str) -> str:
    """The page to land on after a switch: `target`, or for an object's page (a job, an execution:
    most likely not in the new view) the list it belongs to."""
    from flask import current_app
    from werkzeug.exceptions import HTTPException

    path = target.split("?", 1)[0]
    try:
        endpoint, values = current_app.url_map.bind("localhost").match(path, method="GET")
    except HTTPException:
        return target
    if not values or endpoint.startswith("static"):
        return target
    listing = endpoint.split(".", 1)[0] + ".index"
    return url_for(listing) if listing in current_app.view_functions else url_for("dashboard.index")


def _whole(text) -> int | None:
    text = (text or "").strip() if isinstance(text, str) else ""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else None


def switcher():
    """`switcher()` for the header: the organizations and projects this request may choose (an
    app-wide context processor, registered by app.web.register_web)."""

    def build() -> dict:
        caller = current_caller()
        orgs = tenancy.list_organizations(caller)
        projects = tenancy.projects_of(caller.organization_id) if caller.organization_id is not None else []
        current = next((org for org in orgs if org.id == caller.organization_id), None)
        project = next((p for p in projects if p.id == caller.project_id), None)
        return {
            "organizations": orgs,
            "projects": projects,
            "choices": [(org, tenancy.projects_of(org.id)) for org in orgs],
            "organization": current,
            "project": project,
            "role": caller.role,
            "superuser": caller.superuser,
            "form": SwitchForm(formdata=None),
        }

    return {"switcher": build}
