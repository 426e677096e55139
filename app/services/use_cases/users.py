"""Operator accounts: the development admin created by `flask ensure-dev-user`, signing in,
and loading the signed-in user."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from werkzeug.security import check_password_hash

from app.database import begin_write
from app.domain.states import Role
from app.extensions import db
from app.models import Membership, User
from app.services import audit_log
from app.services.audit import record_event
from app.services.errors import Conflict, ValidationFailed
from app.services.use_cases.tenancy import default_organization

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
    audit_log.record_change(
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
