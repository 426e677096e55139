"""/api/v1/users: the people of the caller's organization (admins); invitations to join it."""

from __future__ import annotations

from flask import current_app
from flask_smorest import Blueprint
from sqlalchemy import select

from app.api import examples as ex
from app.api.me import user_to_dict
from app.api.schemas import InvitationCreateSchema, InvitationSchema, UserSchema
from app.api.security import authenticated, current_caller
from app.clock import iso_z, utcnow
from app.domain.permissions import Action
from app.extensions import db
from app.models import Membership, User
from app.services.use_cases import auth

blp = Blueprint("api_users", __name__, url_prefix="/api/v1/users", description="People (admins only).")


@blp.get("")
@authenticated(Action.ADMINISTER)
@blp.response(200, UserSchema(many=True), example=[ex.USER, ex.REGISTERED])
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
def list_users():
    """The members of your organization (every user for a superuser acting everywhere).

    Roles: admin. Errors: 401, 403.
    """
    caller = current_caller()
    query = select(User).order_by(User.id)
    if caller.organization_id is not None or not caller.sees_everything:
        members = select(Membership.user_id).where(Membership.organization_id == caller.organization_id)
        query = query.where(User.id.in_(members))
    return [user_to_dict(user) for user in db.session.scalars(query)]


@blp.post("/invitations")
@authenticated(Action.ADMINISTER)
@blp.arguments(InvitationCreateSchema, example={"role": "operator"})
@blp.response(201, InvitationSchema, example=ex.INVITATION)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(422, response="UNPROCESSABLE_ENTITY")
def invite(body):
    """An invitation to join your organization with a role (no higher than yours), valid 7 days,
    for POST /api/v1/auth/register.

    Roles: admin. Errors: 401, 403, 422.
    """
    token, expires = auth.invite(
        current_caller(), role=body["role"], secret_key=current_app.config["SECRET_KEY"], now=utcnow()
    )
    return {"invitation": token, "role": body["role"], "expires_at": iso_z(expires)}
