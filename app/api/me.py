"""/api/v1/me: who the credential stands for, its organization, project and role."""

from __future__ import annotations

from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.errors import ApiError
from app.api.schemas import MeSchema, MeUpdateSchema
from app.api.security import authenticated, current_caller
from app.clock import iso_z, utcnow
from app.extensions import db
from app.models import Organization, Project, User
from app.services.use_cases.preferences import set_time_zone

blp = Blueprint("api_me", __name__, url_prefix="/api/v1/me", description="The caller.")


def user_to_dict(user: User) -> dict:
    return {
        "id": user.id,
        "username": user.username,
        "active": user.active,
        "superuser": bool(user.superuser),
        "memberships": [{"organization": m.organization.name, "role": m.role} for m in user.memberships],
        "created_at": iso_z(user.created_at),
    }


@blp.get("")
@authenticated(None)
@blp.response(200, MeSchema, example=ex.ME)
@blp.alt_response(401, response="UNAUTHORIZED")
def me():
    """The signed-in user (or the API token's creator), the organization and project acted in, and the role.

    Roles: any credential. Errors: 401 without one.
    """
    return _document()


def _document() -> dict:
    caller = current_caller()
    user = db.session.get(User, caller.user_id) if caller.user_id is not None else None
    org = db.session.get(Organization, caller.organization_id) if caller.organization_id is not None else None
    project = db.session.get(Project, caller.project_id) if caller.project_id is not None else None
    return {
        "user": user_to_dict(user) if user is not None else None,
        "actor": caller.actor,
        "credential": "api_token" if caller.actor.startswith("token:") else "jwt",
        "organization": org.name if org is not None else None,
        "project": project.full_name if project is not None else None,
        "role": caller.role,
        "superuser": caller.superuser,
        "time_zone": user.time_zone if user is not None else "UTC",
    }


@blp.patch("")
@authenticated(None)
@blp.arguments(MeUpdateSchema, example=ex.ME_UPDATE)
@blp.response(200, MeSchema, example=ex.ME)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def update_me(body):
    """Change your display time zone (an IANA name): every page then shows your times in it.

    Roles: any signed-in person (not an API token). Errors: 401, 403, 422 (unknown zone).
    """
    caller = current_caller()
    user = db.session.get(User, caller.user_id) if caller.user_id is not None else None
    if user is None or caller.actor.startswith("token:"):
        raise ApiError(403, "an API token has no settings of its own; sign in as a person")
    set_time_zone(user.username, body["time_zone"], now=utcnow(), caller=caller)
    return _document()
