"""Who calls the API: a JWT (people) or an API token (machines), turned into a `Caller`.

`Authorization: Bearer <credential>`: a credential starting with `cw_` is an API token (looked up
by its SHA-256, last use recorded); anything else must be a JWT access token signed with the
app's key, unexpired and not revoked (its id and its refresh token's id are checked against the
denylist). The JWT names the organization the person signed in to; their role there is read
fresh on each request, so a role taken away applies at once. An API token acts in its project
with its role, never above its creator's current one.

`authenticated(action)` guards a view: 401 without a valid credential, 403 when the role does not
allow the action (for objects the caller may see; other organizations' objects are 404).
"""

from __future__ import annotations

import functools
import hashlib
from datetime import timedelta

from flask import current_app, request
from flask_jwt_extended import get_jwt, verify_jwt_in_request
from flask_jwt_extended.exceptions import JWTExtendedException
from jwt.exceptions import PyJWTError

from app.api.errors import ApiError
from app.clock import utcnow
from app.domain.permissions import Action
from app.extensions import jwt, limiter
from app.services.caller import Caller

TOKEN_PREFIX = "cw_"


def _address() -> str:
    return request.remote_addr or "unknown"


def _credential_key() -> str:
    """Rate-limit key: the credential's hash (one bucket per token or session), else the address."""
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer ") and len(header) > 7:
        return "cred:" + hashlib.sha256(header[7:].strip().encode()).hexdigest()[:32]
    return "addr:" + _address()


def init_security(app) -> None:
    """JWT settings and the limiter's storage (Redis when REDIS_URL is set, so gunicorn workers share it)."""
    # A key of its own, derived from SECRET_KEY: 64 bytes whatever SECRET_KEY's length, and a
    # signed session cookie can never pass for a JWT or the other way round.
    derived = hashlib.sha256(("cronwell-jwt:" + app.config["SECRET_KEY"]).encode()).hexdigest()
    app.config.setdefault("JWT_SECRET_KEY", derived)
    app.config.setdefault("JWT_ACCESS_TOKEN_EXPIRES", timedelta(minutes=app.config["JWT_ACCESS_TOKEN_MINUTES"]))
    app.config.setdefault("JWT_REFRESH_TOKEN_EXPIRES", timedelta(days=app.config["JWT_REFRESH_TOKEN_DAYS"]))
    app.config.setdefault("JWT_TOKEN_LOCATION", ["headers"])
    app.config.setdefault("JWT_ALGORITHM", "HS256")
    app.config.setdefault("JWT_ERROR_MESSAGE_KEY", "detail")
    redis_url = app.config.get("REDIS_URL")
    app.config.setdefault("RATELIMIT_STORAGE_URI", redis_url or "memory://")
    if redis_url:
        # Keys under the deployment's cache prefix, like every other key Cronwell keeps in Redis.
        prefix = (app.config.get("CACHE_KEY_PREFIX") or "cronwell:").rstrip(":")
        app.config.setdefault(
            "RATELIMIT_STORAGE_OPTIONS", {"key_prefix": prefix, "socket_connect_timeout": 1, "socket_timeout": 1}
        )
    # The cache is never allowed to lock people out: with Redis unreachable, requests go through.
    app.config.setdefault("RATELIMIT_SWALLOW_ERRORS", True)
    app.config.setdefault("RATELIMIT_HEADERS_ENABLED", False)
    jwt.init_app(app)
    limiter.init_app(app)
    jwt.token_in_blocklist_loader(_revoked)


def auth_limit() -> str:
    return current_app.config["API_AUTH_RATE_LIMIT"]


def credential_limit() -> str:
    return current_app.config["API_TOKEN_RATE_LIMIT"]


_LIMITED: set[str] = set()


def limit_per_credential(blueprint) -> None:
    """Every operation of `blueprint` counts against the caller's credential (429 past the limit).
    Once per blueprint: the limiter keeps the rule by blueprint name for every app."""
    if blueprint.name not in _LIMITED:
        limiter.limit(credential_limit, key=_credential_key)(blueprint)
        _LIMITED.add(blueprint.name)


def _revoked(jwt_header: dict, payload: dict) -> bool:
    from app.services.use_cases import auth

    return auth.is_revoked(payload.get("jti"), payload.get("rjti"))


def _bearer() -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def unauthorized(detail: str) -> ApiError:
    return ApiError(401, detail)


def current_caller() -> Caller:
    """The caller of this request (401 when it has no valid credential)."""
    # Kept on the request, not on `g`: an app context (and its `g`) may outlive one request.
    caller = request.environ.get("cronwell.api_caller")
    if caller is not None:
        return caller
    credential = _bearer()
    if credential is None:
        raise unauthorized("sign in: send 'Authorization: Bearer <access token or API token>'")
    if credential.startswith(TOKEN_PREFIX):
        caller = _token_caller(credential)
    else:
        caller = _jwt_caller()
    request.environ["cronwell.api_caller"] = caller
    return caller


def _token_caller(secret: str) -> Caller:
    from app.services.use_cases import tokens

    caller = tokens.caller_for_secret(secret, now=utcnow(), address=_address())
    if caller is None:
        raise unauthorized("the API token is unknown, revoked or expired")
    return caller


def _jwt_caller() -> Caller:
    from app.services.use_cases import auth

    try:
        verify_jwt_in_request()
    except (JWTExtendedException, PyJWTError) as exc:
        raise unauthorized(_jwt_problem(exc)) from None
    claims = get_jwt()
    caller = auth.caller_for_claims(claims, address=_address())
    if caller is None:
        raise unauthorized("the account behind this token is disabled or gone")
    return caller


def verified_claims(*, refresh: bool = False) -> dict:
    """The claims of this request's JWT (a refresh token with `refresh=True`), or 401."""
    try:
        verify_jwt_in_request(refresh=refresh)
    except (JWTExtendedException, PyJWTError) as exc:
        raise unauthorized(_jwt_problem(exc)) from None
    return get_jwt()


def _jwt_problem(exc: Exception) -> str:
    name = type(exc).__name__
    if name == "ExpiredSignatureError":
        return "the token has expired; refresh it or sign in again"
    if name == "RevokedTokenError":
        return "the token was revoked (signed out); sign in again"
    if name == "WrongTokenError":
        return "wrong kind of token for this operation (access vs refresh)"
    return "the token is not valid"


def authenticated(action: Action | None):
    """Guard a view: the request needs a credential (401) whose role allows `action` (403);
    `None`: any valid credential."""

    def decorator(view):
        @functools.wraps(view)
        def wrapper(*args, **kwargs):
            caller = current_caller()
            if action is not None and not caller.may(action):
                raise ApiError(403, _REFUSAL[action])
            return view(*args, **kwargs)

        wrapper._cronwell_action = action
        return wrapper

    return decorator


_REFUSAL = {
    Action.READ: "you are not a member of any organization",
    Action.OPERATE: "your role may view but not change anything; an operator or admin may",
    Action.ADMINISTER: "only an admin of the organization may do this",
}
