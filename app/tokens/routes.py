"""/tokens/: your API tokens. Creating one shows its secret on the answer page only, once."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, url_for

from app.clock import utcnow
from app.domain.permissions import Action
from app.services.errors import ServiceError, ValidationFailed
from app.services.use_cases import tenancy, tokens
from app.tokens.forms import CreateTokenForm, RevokeTokenForm
from app.web.access import current_caller, requires

bp = Blueprint("tokens", __name__, url_prefix="/tokens")


def _form() -> CreateTokenForm:
    form = CreateTokenForm()
    form.project.choices = [(p.full_name, p.full_name) for p in tenancy.list_projects(current_caller())]
    return form


def _page(form: CreateTokenForm, *, created=None, status: int = 200):
    listed = [tokens.token_to_dict(t) for t in tokens.list_tokens(current_caller(), include_revoked=True)]
    body = render_template("tokens/list.html", form=form, revoke_form=RevokeTokenForm(), tokens=listed, created=created)
    return body, status


@bp.get("/")
@requires(Action.READ)
def index():
    """Your tokens (an admin: the organization's), and the form to create one."""
    return _page(_form())


@bp.post("/")
@requires(Action.READ)
def create():
    """Create a token; the page shows its secret this once."""
    form = _form()
    if not form.validate_on_submit():
        return _page(form, status=400)
    try:
        created = tokens.create_token(
            current_caller(),
            name=form.name.data,
            project=form.project.data,
            role=form.role.data,
            expires_in_days=form.expires_in_days.data,
            now=utcnow(),
        )
    except ValidationFailed as exc:
        for field, message in exc.errors.items():
            target = getattr(form, field, None)
            (target.errors if target is not None and hasattr(target, "errors") else form.form_errors).append(message)
        return _page(form, status=400)
    except ServiceError as exc:
        form.form_errors.append(str(exc))
        return _page(form, status=400)
    return _page(_form(), created={**tokens.token_to_dict(created.token), "token": created.secret}, status=201)


@bp.post("/<id:token_id>/revoke")
@requires(Action.READ)
def revoke(token_id: int):
    """Revoke one of your tokens (an admin: any of the organization's)."""
    # CSRFProtect has checked the form's token before this view runs.
    token = tokens.revoke_token(token_id, current_caller(), now=utcnow())
    flash(f"Token {token.name} revoked: it no longer works.", "success")
    return redirect(url_for("tokens.index"))
