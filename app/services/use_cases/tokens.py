"""API tokens: long-lived credentials for machines, each for one project with a role.

A token's secret is `cw_` + 40 random URL-safe characters, shown once when it is created; only its
SHA-256 is stored, so the table alone grants nothing. Looking a secret up by its digest is an
index probe, and the digests are then compared in constant time. A token never acts above its
creator: its role is capped by the role the creator holds in the project's organization *now*
(a demoted or disabled creator takes the token down with them).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update

from app.database import begin_write
from app.definitions import text_limits
from app.domain.permissions import Action, at_most
from app.domain.states import Role, values
from app.extensions import db
from app.models import ApiToken, Project, User
from app.services import audit_trail
from app.services.caller import Caller
from app.services.errors import Conflict, Forbidden, NotFound, ValidationFailed
from app.services.events import record_event
from app.services.use_cases.tenancy import find_project, get_project

PREFIX = "cw_"
NAME_MAX = text_limits.TOKEN_NAME.maximum
EXPIRES_DAYS_MAX = 3650
# Last use is written at most this often per token, so a busy token costs no write per request.
LAST_USED_RESOLUTION = timedelta(seconds=60)


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    secret: str  # shown once, never stored


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _role_of(user: User, organization_id: int) -> str | None:
    if user.superuser:
        return Role.ADMIN.value
    return user.role_in(organization_id)


def create_token(
    caller: Caller,
    *,
    name: str,
    project: str | int | None,
    role: str,
    now: datetime,
    expires_in_days: int | None = None,
    user_id: int | None = None,
) -> NewToken:
    """Create a token for `project` (`ORG/PROJECT`, a name, or an id) with a role no higher than the
    creator's in that project's organization. `user_id` names the creator when the caller is the CLI."""
    name = name.strip() if isinstance(name, str) else ""
    if not name or len(name) > NAME_MAX or any(ord(ch) < 32 for ch in name):
        raise ValidationFailed({"name": f"must be 1-{NAME_MAX} printable characters"})
    if role not in values(Role):
        raise ValidationFailed({"role": f"must be one of {', '.join(values(Role))}, got {role!r}"})
    if expires_in_days is not None and not 1 <= expires_in_days <= EXPIRES_DAYS_MAX:
        raise ValidationFailed({"expires_in_days": f"must be between 1 and {EXPIRES_DAYS_MAX}"})
    owner_id = user_id if user_id is not None else caller.user_id
    owner = db.session.get(User, owner_id) if owner_id is not None else None
    if owner is None or not owner.active:
        raise ValidationFailed({"user": "a token belongs to an active user: name one"})
    target = _project(project, caller)
    held = _role_of(owner, target.organization_id)
    if held is None:
        raise NotFound(f"project {project} does not exist")
    if not at_most(role, held):
        raise Forbidden(f"a token cannot have the {role} role: its creator is {held} in {target.full_name}")
    secret = PREFIX + secrets.token_urlsafe(30)
    begin_write(db.session)
    token = ApiToken(
        name=name,
        prefix=secret[:10],
        token_hash=digest(secret),
        user_id=owner.id,
        project_id=target.id,
        role=role,
        created_at=now,
        expires_at=now + timedelta(days=expires_in_days) if expires_in_days else None,
    )
    db.session.add(token)
    db.session.flush()
    record_event(
        "api_token_created", now=now, actor=caller.actor, token_id=token.id, project=target.full_name, role=role
    )
    audit_trail.record_change(
        caller,
        "created",
        "token",
        token.id,
        None,
        {"name": name, "prefix": token.prefix, "role": role, "user_id": owner.id, "expires_at": token.expires_at},
        now=now,
        label=name,
        project_id=target.id,
        organization_id=target.organization_id,
    )
    db.session.commit()
    return NewToken(token, secret)


def _project(reference: str | int | None, caller: Caller) -> Project:
    if reference is None or reference == "":
        from app.services.use_cases.tenancy import working_project

        return working_project(caller)
    if isinstance(reference, int):
        return get_project(reference, caller)
    return find_project(str(reference), caller)


def _visible(caller: Caller):
    """Tokens the caller may see: its own; an admin's organization's; all for a superuser/the CLI."""
    query = select(ApiToken).order_by(ApiToken.id)
    if caller.sees_everything and caller.organization_id is None:
        return query
    mine = ApiToken.user_id == caller.user_id
    if caller.organization_id is not None and caller.may(Action.ADMINISTER):
        in_org = ApiToken.project_id.in_(select(Project.id).where(Project.organization_id == caller.organization_id))
        return query.where(mine | in_org)
    return query.where(mine)


def list_tokens(caller: Caller, *, include_revoked: bool = False) -> list[ApiToken]:
    query = _visible(caller)
    if not include_revoked:
        query = query.where(ApiToken.revoked_at.is_(None))
    return list(db.session.scalars(query))


def get_token(token_id: int, caller: Caller) -> ApiToken:
    token = db.session.scalar(_visible(caller).where(ApiToken.id == token_id))
    if token is None:
        raise NotFound(f"token {token_id} does not exist")
    return token


def revoke_token(token_id: int, caller: Caller, *, now: datetime) -> ApiToken:
    """Revoke a token (its creator, an admin of its organization, or the CLI); revoking twice is a no-op."""
    begin_write(db.session)
    token = get_token(token_id, caller)
    if token.revoked_at is None:
        token.revoked_at, token.revoked_by = now, caller.actor
        record_event("api_token_revoked", now=now, actor=caller.actor, token_id=token.id)
        audit_trail.record_change(
            caller,
            "revoked",
            "token",
            token.id,
            {"revoked_at": None},
            {"revoked_at": now},
            now=now,
            label=token.name,
            project_id=token.project_id,
        )
        db.session.commit()
    return token


def caller_for_secret(secret: str, *, now: datetime, address: str | None = None) -> Caller | None:
    """The caller an API token stands for, or None (unknown, revoked, expired, creator disabled or gone)."""
    if not secret.startswith(PREFIX) or len(secret) > 200:
        return None
    wanted = digest(secret)
    token = db.session.scalar(select(ApiToken).where(ApiToken.token_hash == wanted))
    if token is None or not hmac.compare_digest(token.token_hash, wanted):
        return None
    if token.revoked_at is not None or (token.expires_at is not None and token.expires_at <= now):
        return None
    owner = db.session.get(User, token.user_id)
    project = db.session.get(Project, token.project_id)
    if owner is None or not owner.active or project is None:
        return None
    held = _role_of(owner, project.organization_id)
    if held is None:
        return None
    role = token.role if at_most(token.role, held) else held
    _record_use(token, now=now, address=address)
    return Caller(
        actor=f"token:{token.name}",
        source="api",
        role=role,
        user_id=owner.id,
        organization_id=project.organization_id,
        project_id=project.id,
        address=address,
    )


def _record_use(token: ApiToken, *, now: datetime, address: str | None) -> None:
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_RESOLUTION:
        return
    # A plain UPDATE in its own short transaction: never holds the request's reads hostage.
    db.session.execute(
        update(ApiToken).where(ApiToken.id == token.id).values(last_used_at=now, last_used_address=(address or "")[:64])
    )
    db.session.commit()


def token_to_dict(token: ApiToken) -> dict:
    from app.clock import iso_z

    project = db.session.get(Project, token.project_id)
    owner = db.session.get(User, token.user_id)
    return {
        "id": token.id,
        "name": token.name,
        "prefix": token.prefix,
        "project": project.full_name if project is not None else None,
        "role": token.role,
        "user": owner.username if owner is not None else None,
        "created_at": iso_z(token.created_at),
        "expires_at": iso_z(token.expires_at),
        "last_used_at": iso_z(token.last_used_at),
        "revoked_at": iso_z(token.revoked_at),
        "revoked_by": token.revoked_by,
    }


def ensure_not_revoked(token: ApiToken) -> None:
    if token.revoked_at is not None:
        raise Conflict(f"token {token.id} is already revoked")
