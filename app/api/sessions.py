"""/api/v1/auth: sign in (JWT access + refresh), refresh, sign out, change password, register."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from flask import current_app
from flask_jwt_extended import create_access_token, create_refresh_token
from flask_smorest import Blueprint

from app.api import examples as ex
from app.api.errors import ApiError
from app.api.schemas import LoginSchema, PasswordChangeSchema, RegisterSchema, TokenPairSchema, UserSchema
from app.api.security import auth_limit, current_caller, limiter, verified_claims
from app.clock import utcnow
from app.services.use_cases import auth

blp = Blueprint("api_auth", __name__, url_prefix="/api/v1/auth", description="Sign in and out (JWT).")
PUBLIC: dict[str, list[Any]] = {"security": []}


def _lifetime_seconds() -> int:
    return int(current_app.config["JWT_ACCESS_TOKEN_EXPIRES"].total_seconds())


def _access_token(user_id: int, organization_id: int | None, refresh_jti: str) -> str:
    return create_access_token(identity=str(user_id), additional_claims={"org": organization_id, "rjti": refresh_jti})


@blp.post("/login")
@limiter.limit(auth_limit)
@blp.arguments(LoginSchema, example=ex.LOGIN)
@blp.response(200, TokenPairSchema, example=ex.TOKEN_PAIR)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(429, response="TOO_MANY_REQUESTS")
@blp.doc(**PUBLIC)
def login(body):
    """Sign in: an access token (15 minutes) and a refresh token (7 days).

    Roles: anyone with an account. Errors: 401 wrong credentials, 422 invalid fields, 429 too many attempts.
    """
    signed = auth.sign_in(body["username"], body["password"], body.get("organization"))
    if signed is None:
        raise ApiError(401, "wrong username or password")
    refresh_jti = uuid4().hex
    refresh = create_refresh_token(
        identity=str(signed.user.id),
        additional_claims={"jti": refresh_jti, "org": signed.organization_id, "pwd": auth.password_stamp(signed.user)},
    )
    return {
        "access_token": _access_token(signed.user.id, signed.organization_id, refresh_jti),
        "refresh_token": refresh,
        "token_type": "Bearer",
        "expires_in": _lifetime_seconds(),
    }


@blp.post("/refresh")
@limiter.limit(auth_limit)
@blp.response(200, TokenPairSchema, example=ex.ACCESS_TOKEN)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(429, response="TOO_MANY_REQUESTS")
def refresh():
    """A new access token, for the refresh token sent as the bearer credential.

    Roles: anyone signed in. Errors: 401 when the refresh token is expired, revoked, or older than a password change.
    """
    claims = verified_claims(refresh=True)
    user = auth.refresh_allowed(claims)
    if user is None:
        raise ApiError(401, "the refresh token no longer works (password changed or account disabled); sign in again")
    return {
        "access_token": _access_token(user.id, claims.get("org"), claims["jti"]),
        "token_type": "Bearer",
        "expires_in": _lifetime_seconds(),
    }


@blp.post("/logout")
@blp.response(204)
@blp.alt_response(401, response="UNAUTHORIZED")
def logout():
    """Sign out: the access token and the refresh token it came from stop working at once.

    Roles: anyone signed in with a JWT. Errors: 401 without a valid access token.
    """
    claims = verified_claims()
    now = utcnow()
    refresh_expires = now + current_app.config["JWT_REFRESH_TOKEN_EXPIRES"]
    revoked = [(claims["jti"], "access", datetime.fromtimestamp(claims["exp"], UTC))]
    if claims.get("rjti"):
        revoked.append((claims["rjti"], "refresh", refresh_expires))
    caller = current_caller()
    auth.revoke(revoked, user_id=int(claims["sub"]), now=now, actor=caller.actor, caller=caller)
    return None


@blp.post("/password")
@limiter.limit(auth_limit)
@blp.arguments(PasswordChangeSchema, example=ex.PASSWORD_CHANGE)
@blp.response(204)
@blp.alt_response(401, response="UNAUTHORIZED")
@blp.alt_response(429, response="TOO_MANY_REQUESTS")
def change_password(body):
    """Change your password; every refresh token issued before stops working.

    Roles: anyone signed in with a JWT. Errors: 401, 422 (wrong current password, new one too short).
    """
    claims = verified_claims()
    caller = current_caller()
    auth.change_password(
        int(claims["sub"]), body["current_password"], body["new_password"], now=utcnow(), actor=caller.actor
    )
    return None


@blp.post("/register")
@limiter.limit(auth_limit)
@blp.arguments(RegisterSchema, example=ex.REGISTER)
@blp.response(201, UserSchema, example=ex.REGISTERED)
@blp.alt_response(403, response="FORBIDDEN")
@blp.alt_response(409, response="CONFLICT")
@blp.alt_response(429, response="TOO_MANY_REQUESTS")
@blp.doc(**PUBLIC)
def register(body):
    """Create an account: with an admin's invitation, or by anyone when REGISTRATION_OPEN=1.

    Roles: anyone. Errors: 403 registration closed and no invitation, 409 username taken, 422 invalid fields.
    """
    from app.api.me import user_to_dict

    user = auth.register(
        body["username"],
        body["password"],
        invitation=body.get("invitation"),
        registration_open=current_app.config["REGISTRATION_OPEN"],
        secret_key=current_app.config["SECRET_KEY"],
        now=utcnow(),
    )
    return user_to_dict(user)
