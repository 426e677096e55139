"""Operator accounts: the development admin created by `flask ensure-dev-user`, signing in,
loading the signed-in user, and managing users (create, list, role, disable/enable, password).

Management takes the `caller`: an admin manages the members of their organization, a superuser
(and the CLI) everyone; a user outside the caller's organization is a NotFound like a missing one.
A role change, a disabled account and a new password end the user's web sessions at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from werkzeug.security import check_password_hash

from app.database import begin_write
from app.definitions import text_limits
from app.domain.permissions import Action
from app.domain.states import Role, values
from app.extensions import db
from app.models import Membership, Organization, User
from app.services import audit_trail
from app.services.caller import Caller
from app.services.errors import Conflict, Forbidden, NotFound, ValidationFailed
from app.services.events import record_event
from app.services.use_cases.tenancy import default_organization

PASSWORD_MIN = 8
PASSWORD_MAX = 1000

DEFAULT_DEV_PASSWORD = "admin"


@dataclass
class EnsureUserResult:
    user: User
    created: bool
    warnings: list[str] = field(default_factory=list)


def ensure_dev_user(*, username: str, password: str | None, debug: bool, now: datetime, actor: str) -> EnsureUserResult:
    """Create the account `username` unless it exists (idempotent, for container start-up): a
    superuser and an admin of the default organization.

    Without an explicit password the account gets the well-known default, which is allowed only
    with DEBUG on: a production deployment must never come up with admin/admin.
    """
    username = (username or "").strip()
    if not username:
        raise ValidationFailed({"username": "DEV_ADMIN_USERNAME must not be empty"})
    existing = db.session.scalar(select(User).where(User.username == username))
    if existing is not None:
        return EnsureUserResult(existing, False, [f"user {username!r} already exists; left unchanged"])
    warnings: list[str] = []
    if password is None:
        if not debug:
            raise Conflict(
                f"refusing to create {username!r} with the default password while DEBUG=0; set DEV_ADMIN_PASSWORD"
            )
        password = DEFAULT_DEV_PASSWORD
        warnings.append(
            f"created {username!r} with the default password {DEFAULT_DEV_PASSWORD!r}: development "
            "only; set DEV_ADMIN_PASSWORD or change it"
        )
    elif not password:
        raise ValidationFailed({"password": "DEV_ADMIN_PASSWORD must not be empty"})
    begin_write(db.session)
    org = default_organization()
    user = User(username=username, superuser=True, active=True, created_at=now)
    user.set_password(password)
    user.memberships.append(Membership(organization_id=org.id, role=Role.ADMIN.value, created_at=now))
    db.session.add(user)
    try:
        db.session.flush()
    except IntegrityError:  # another process created it a moment ago
        db.session.rollback()
        existing = db.session.scalar(select(User).where(User.username == username))
        return EnsureUserResult(existing, False, [f"user {username!r} already exists; left unchanged"])
    record_event(
        "user_created",
        now=now,
        actor=actor,
        username=username,
        role=Role.ADMIN.value,
        organization=org.name,
        superuser=True,
    )
    audit_trail.record_change(
        actor,
        "created",
        "user",
        user.id,
        None,
        {"username": username, "role": Role.ADMIN.value, "superuser": True, "active": True},
        now=now,
        label=username,
        organization_id=org.id,
    )
    db.session.commit()
    return EnsureUserResult(user, True, warnings)


def get_active_user(user_id: int) -> User | None:
    """The user with this id if the account is active (the web session's user loader)."""
    user = db.session.get(User, user_id)
    return user if user is not None and user.active else None


def authenticate(username: str, password: str) -> User | None:
    """The active user with these credentials, or None. A wrong username costs the same hash
    check as a wrong password, so response times do not reveal which usernames exist."""
    username = (username or "").strip()
    # PostgreSQL cannot compare text holding NUL (a DataError, so a 500); no username has one.
    user = None if "\x00" in username else db.session.scalar(select(User).where(User.username == username))
    if user is None or not user.active:
        check_password_hash(_DUMMY_HASH, password or "")
        return None
    return user if user.check_password(password or "") else None


_DUMMY_HASH = "scrypt:32768:8:1$cronwelldummysalt$" + "0" * 128


# --- user management (flask user ..., the /users/ pages) -------------------------------------

USERNAME_MAX = text_limits.USERNAME.maximum


def _check_username(username) -> str:
    text = (username or "").strip() if isinstance(username, str) else ""
    if not text or len(text) > USERNAME_MAX or "\x00" in text or any(ch.isspace() for ch in text):
        raise ValidationFailed({"username": f"must be 1-{USERNAME_MAX} characters without spaces"})
    return text


def _check_role(role) -> str:
    if role not in values(Role):
        raise ValidationFailed({"role": f"must be one of {', '.join(values(Role))}, got {role!r}"})
    return role


def check_password_rules(password, field: str = "new_password") -> str:
    if not isinstance(password, str) or len(password) < PASSWORD_MIN:
        raise ValidationFailed({field: f"must have at least {PASSWORD_MIN} characters"})
    if len(password) > PASSWORD_MAX or "\x00" in password:
        raise ValidationFailed({field: f"must be at most {PASSWORD_MAX} characters, without NUL characters"})
    return password


def _check_password(password, field: str = "password") -> str:
    return check_password_rules(password, field)


def _administers(caller: Caller, organization_id: int) -> None:
    """Raise unless the caller is an admin of the organization (or a superuser)."""
    if caller.superuser:
        return
    if caller.organization_id != organization_id or not caller.may(Action.ADMINISTER):
        raise Forbidden("only an admin of the organization may manage its users")


def list_users(caller: Caller, *, organization: Organization | None = None) -> list[User]:
    """The users the caller may manage: the members of its organization (every user for a
    superuser with no organization chosen, or the members of `organization`), by username."""
    query = select(User).order_by(User.username)
    org_id = organization.id if organization is not None else caller.organization_id
    if org_id is not None:
        _administers(caller, org_id)
        query = query.where(User.id.in_(select(Membership.user_id).where(Membership.organization_id == org_id)))
    elif not caller.superuser:
        raise Forbidden("only an admin of the organization may manage its users")
    return list(db.session.scalars(query))


def get_user(username: str, caller: Caller) -> User:
    """A user the caller may manage (a member of its organization; anyone for a superuser);
    NotFound otherwise, exactly as for a missing one."""
    text = username.strip() if isinstance(username, str) else ""
    user = None if not text or "\x00" in text else db.session.scalar(select(User).where(User.username == text))
    if user is not None and not caller.superuser:
        if caller.organization_id is None or user.role_in(caller.organization_id) is None:
            user = None
    if user is None:
        raise NotFound(f"user {username!r} does not exist")
    return user


def get_user_by_id(user_id: int, caller: Caller) -> User:
    user = db.session.get(User, user_id)
    if user is None:
        raise NotFound(f"user {user_id} does not exist")
    return get_user(user.username, caller)


def create_user(
    username: str,
    *,
    password: str,
    role: str,
    now: datetime,
    caller: Caller,
    organization: Organization | None = None,
    superuser: bool = False,
) -> User:
    """Create a user who can sign in at once, with `role` in the organization (the caller's, or
    `organization` for a superuser). Only a superuser may make a superuser."""
    username = _check_username(username)
    role = _check_role(role)
    org = organization or (db.session.get(Organization, caller.organization_id) if caller.organization_id else None)
    if org is None:
        raise ValidationFailed({"organization": "name the organization the user joins"})
    _administers(caller, org.id)
    if superuser and not caller.superuser:
        raise Forbidden("only a superuser may make a superuser")
    password = _check_password(password)
    begin_write(db.session)
    if db.session.scalar(select(User.id).where(User.username == username)) is not None:
        raise ValidationFailed({"username": f"a user named {username!r} already exists"})
    user = User(username=username, superuser=bool(superuser), active=True, created_at=now)
    user.set_password(password)
    user.memberships.append(Membership(organization_id=org.id, role=role, created_at=now))
    db.session.add(user)
    db.session.flush()
    record_event(
        "user_created",
        now=now,
        actor=caller.actor,
        username=username,
        role=role,
        organization=org.name,
        superuser=bool(superuser),
    )
    audit_trail.record_change(
        caller,
        "created",
        "user",
        user.id,
        None,
        {"username": username, "role": role, "superuser": bool(superuser), "active": True},
        now=now,
        label=username,
        organization_id=org.id,
    )
    db.session.commit()
    return user


def set_role(
    username: str, role: str, *, now: datetime, caller: Caller, organization: Organization | None = None
) -> User:
    """Give the user `role` in the organization (adding them to it if they are not a member:
    a superuser only, since an admin cannot see users outside the organization). Ends the user's
    web sessions, so the new role applies at their next sign-in."""
    role = _check_role(role)
    org = organization or (db.session.get(Organization, caller.organization_id) if caller.organization_id else None)
    if org is None:
        raise ValidationFailed({"organization": "name the organization"})
    _administers(caller, org.id)
    begin_write(db.session)
    user = get_user(username, caller)
    before = user.role_in(org.id)
    if before == role:
        return user
    membership = next((m for m in user.memberships if m.organization_id == org.id), None)
    if membership is None:
        user.memberships.append(Membership(organization_id=org.id, role=role, created_at=now))
    else:
        membership.role = role
    record_event(
        "user_role_changed", now=now, actor=caller.actor, username=user.username, organization=org.name, role=role
    )
    audit_trail.record_change(
        caller,
        "role_changed",
        "user",
        user.id,
        {"role": before},
        {"role": role},
        now=now,
        label=user.username,
        organization_id=org.id,
    )
    _end_sessions(user)
    db.session.commit()
    return user


def set_active(username: str, active: bool, *, now: datetime, caller: Caller) -> User:
    """Disable (no sign-in, sessions ended, API tokens refused with the account) or enable a user.
    An admin may not disable a superuser, nor anyone disable themselves."""
    begin_write(db.session)
    user = get_user(username, caller)
    if user.superuser and not caller.superuser:
        raise Forbidden("only a superuser may disable or enable a superuser")
    if not active and caller.user_id == user.id:
        raise Conflict("you cannot disable your own account")
    if user.active == active:
        return user
    user.active = active
    kind = "enabled" if active else "disabled"
    record_event(f"user_{kind}", now=now, actor=caller.actor, username=user.username)
    audit_trail.record_change(
        caller,
        kind,
        "user",
        user.id,
        {"active": not active},
        {"active": active},
        now=now,
        label=user.username,
        organization_id=caller.organization_id,
    )
    if not active:
        _end_sessions(user)
    db.session.commit()
    return user


def reset_password(username: str, password: str, *, now: datetime, caller: Caller) -> User:
    """Set a new password and end the user's web sessions."""
    password = _check_password(password)
    begin_write(db.session)
    user = get_user(username, caller)
    if user.superuser and not caller.superuser:
        raise Forbidden("only a superuser may reset a superuser's password")
    user.set_password(password)
    record_event("user_password_reset", now=now, actor=caller.actor, username=user.username)
    audit_trail.record_change(
        caller,
        "password_reset",
        "user",
        user.id,
        now=now,
        label=user.username,
        organization_id=caller.organization_id,
    )
    _end_sessions(user)
    db.session.commit()
    return user


def _end_sessions(user: User) -> None:
    """End the user's server-side web sessions, so a role change, a
    disabled account or a new password takes effect at once."""
    from app.services.use_cases import sessions

    sessions.end_sessions(user.id)


def user_to_dict(user: User, organization_id: int | None = None) -> dict:
    """A user as `--json` shows it: memberships as {organization, role}; `role` is the one in
    `organization_id` when given (else their only one, or None when they hold several)."""
    from app.clock import iso_z

    document = {
        "id": user.id,
        "username": user.username,
        "active": user.active,
        "superuser": user.superuser,
        "created_at": iso_z(user.created_at),
        "memberships": [{"organization": m.organization.name, "role": m.role} for m in user.memberships],
    }
    if organization_id is not None:
        document["role"] = user.role_in(organization_id)
    else:  # a member of one organization has one role; several: see `memberships`
        document["role"] = user.memberships[0].role if len(user.memberships) == 1 else None
    return document
