"""/api/v1/tokens: API tokens for machines (create: the secret is shown once; list; revoke)."""

from __future__ import annotations

from flask import url_for
from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.schemas import ApiTokenCreateSchema, ApiTokenSchema, NewApiTokenSchema
from app.api.scope import ID_MAX
from app.api.security import auth_limit, authenticated, current_caller, limiter
from app.clock import utcnow
from app.services.use_cases import tokens

blp = Blueprint("api_tokens", __name__, url_prefix="/api/v1/tokens", description="API tokens for machines.")


@blp.get("")
@authenticated(None)
@blp.response(200, ApiTokenSchema(many=True), example=[ex.TOKEN])
@blp.alt_response(401, response="UNAUTHORIZED")
def list_tokens():
    """Your tokens (an admin sees every token of the organization); never their secrets.

    Roles: any signed-in user. Errors: 401.
    """
    return [tokens.token_to_dict(t) for t in tokens.list_tokens(current_caller())]


@blp.post("")
@limiter.limit(auth_limit)
@authenticated(None)
@blp.arguments(ApiTokenCreateSchema, example=ex.TOKEN_CREATE)
@blp.response(201, NewApiTokenSchema, example=ex.NEW_TOKEN)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(429, response="TOO_MANY_REQUESTS")
def create_token(body):
    """Create a token for one project with a role no higher than yours there; `token` is the secret,
    shown in this answer only.

    Roles: any member of the project's organization (up to their role). Errors: 401, 403 (role above
    yours), 404 (project), 422, 429.
    """
    created = tokens.create_token(
        current_caller(),
        name=body["name"],
        project=body.get("project"),
        role=body["role"],
        expires_in_days=body.get("expires_in_days"),
        now=utcnow(),
    )
    document = {**tokens.token_to_dict(created.token), "token": created.secret}
    return document, 201, {"Location": url_for("api_tokens.get_token", token_id=created.token.id)}


@blp.get("/<int:token_id>")
@authenticated(None)
@blp.response(200, ApiTokenSchema, example=ex.TOKEN)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(404, response="NOT_FOUND")
def get_token(token_id):
    """One token (never its secret), with its last use.

    Roles: its creator, an admin of its organization. Errors: 401, 404.
    """
    return tokens.token_to_dict(tokens.get_token(_id(token_id), current_caller()))


@blp.post("/<int:token_id>/revoke")
@limiter.limit(auth_limit)
@authenticated(None)
@blp.response(200, ApiTokenSchema, example=ex.REVOKED_TOKEN)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(404, response="NOT_FOUND")
@blp.alt_response(429, response="TOO_MANY_REQUESTS")
def revoke_token(token_id):
    """Revoke a token: it stops working at once. Revoking twice changes nothing.

    Roles: its creator, an admin of its organization. Errors: 401, 404, 429.
    """
    return tokens.token_to_dict(tokens.revoke_token(_id(token_id), current_caller(), now=utcnow()))


def _id(value: int) -> int:
    from app.services.errors import NotFound

    if not 0 < value <= ID_MAX:
        raise NotFound(f"token {value} does not exist")
    return value
