"""Signing in to the API: check credentials, the caller a JWT stands for, sign-out (the denylist),
password changes and registration (open, or by an admin's invitation).

The tokens themselves are minted and verified by the API adapter (flask-jwt-extended); this module
decides who they stand for and what is revoked:
- an access token carries the id of the refresh token it came from (`rjti`), so signing out with
  the access token revokes both (two denylist rows, kept until the tokens would have expired);
- a refresh token carries a stamp of the password it was issued under (`pwd`): changing the
  password changes the stamp, so every refresh token issued before is refused from then on.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.database import begin_write
from app.definitions import text_limits
from app.domain.permissions import at_most
from app.domain.states import Role, values
from app.extensions import db
from app.models import Membership, Organization, RevokedToken, User
from app.services import audit_trail
from app.services.caller import Caller
from app.services.errors import Conflict, Forbidden, ValidationFailed
from app.services.events import record_event
from app.services.use_cases import users
from app.services.use_cases.tenancy import caller_for_user
from app.services.use_cases.users import check_password_rules

USERNAME_MAX = text_limits.USERNAME.maximum
INVITATION_SALT = "cronwell-invitation"


@dataclass(frozen=True)
class SignIn:
    user: User
    organization_id: int | None  # None: a superuser acting everywhere, or a user of no organization


def sign_in(username: str, password: str, organization: str | None = None) -> SignIn | None:
    """The user and organization a sign-in acts in, or None for wrong credentials."""
    user = users.authenticate(username, password)
    if user is None:
        return None
    org_id = None
    if organization:
        org_id = db.session.scalar(select(Organization.id).where(Organization.name == organization))
        if org_id is None or (not user.superuser and user.role_in(org_id) is None):
            raise ValidationFailed({"organization": f"you are not a member of an organization named {organization!r}"})
    caller = caller_for_user(user, source="api", organization_id=org_id)
    return SignIn(user, caller.organization_id)


def password_stamp(user: User) -> str:
    """A short fingerprint of the stored password hash: changes whenever the password does."""
    return hashlib.sha256(user.password_hash.encode()).hexdigest()[:16]


def caller_for_claims(claims: dict, *, address: str | None = None) -> Caller | None:
    """The caller a verified access token stands for (None when its user is disabled or gone)."""
    try:
        user = users.get_active_user(int(claims["sub"]))
    except (KeyError, TypeError, ValueError):
        return None
    if user is None:
        return None
    return caller_for_user(user, source="api", organization_id=claims.get("org"), address=address)


def refresh_allowed(claims: dict) -> User | None:
    """The user a refresh token may mint a new access token for (None: disabled, or password changed)."""
    try:
        user = users.get_active_user(int(claims["sub"]))
    except (KeyError, TypeError, ValueError):
        return None
    if user is None or claims.get("pwd") != password_stamp(user):
        return None
    return user


def is_revoked(jti: str | None, refresh_jti: str | None = None) -> bool:
    """Whether the token (or the refresh token it came from) was revoked."""
    ids = [value for value in (jti, refresh_jti) if value]
    if not ids:
        return True
    return db.session.scalar(select(RevokedToken.jti).where(RevokedToken.jti.in_(ids)).limit(1)) is not None


def revoke(
    tokens: list[tuple[str, str, datetime]],
    *,
    user_id: int | None,
    now: datetime,
    actor: str,
    caller: Caller | None = None,
) -> None:
    """Put (jti, type, expires_at) on the denylist (a token already there stays there): an API
    sign-out, audited as `signed_out` by `caller` (or `actor`)."""
    begin_write(db.session)
    fresh = []
    for jti, token_type, expires_at in tokens:
        if db.session.get(RevokedToken, jti) is None:
            fresh.append(token_type)
            db.session.add(
                RevokedToken(jti=jti, token_type=token_type, user_id=user_id, revoked_at=now, expires_at=expires_at)
            )
    record_event("api_signed_out", now=now, actor=actor, user_id=user_id)
    if fresh and user_id is not None:  # a sign-out sent again changes nothing and is not audited twice
        user = db.session.get(User, user_id)
        audit_trail.record_change(
            caller or actor,
            "signed_out",
            "user",
            user_id,
            now=now,
            label=user.username if user else None,
            extra={"revoked_tokens": sorted(fresh)},
        )
    try:
        db.session.commit()
    except IntegrityError:  # the same sign-out sent twice at once
        db.session.rollback()


def change_password(user_id: int, current: str, new: str, *, now: datetime, actor: str) -> None:
    """Change the password; every refresh token issued before stops working (its stamp no longer matches)."""
    check_password_rules(new)
    begin_write(db.session)
    user = db.session.get(User, user_id)
    if user is None or not user.active:
        raise Forbidden("this account is disabled")
    if not user.check_password(current or ""):
        raise ValidationFailed({"current_password": "is not your current password"})
    user.set_password(new)
    record_event("password_changed", now=now, actor=actor, user_id=user.id)
    # The hash itself is never shown (audit_log hides secret-looking fields): only that it changed.
    audit_trail.record_change(
        actor,
        "password_changed",
        "user",
        user.id,
        {"password": "old"},
        {"password": "new"},
        now=now,
        label=user.username,
    )
    db.session.commit()


# --- registration ----------------------------------------------------------------------------


def _serializer(secret_key: str):
    from itsdangerous import URLSafeTimedSerializer

    return URLSafeTimedSerializer(secret_key, salt=INVITATION_SALT)


INVITATION_DAYS = 7


def invite(caller: Caller, *, role: str, secret_key: str, now: datetime) -> tuple[str, datetime]:
    """An invitation to join the caller's organization with `role` (no higher than the caller's)."""
    if role not in values(Role):
        raise ValidationFailed({"role": f"must be one of {', '.join(values(Role))}, got {role!r}"})
    if caller.organization_id is None:
        raise ValidationFailed({"organization": "sign in to an organization to invite people to it"})
    if not caller.superuser and not at_most(role, caller.role or Role.VIEWER.value):
        raise Forbidden(f"you cannot grant {role}: it is above your own role")
    nonce = secrets.token_hex(16)
    token = _serializer(secret_key).dumps({"org": caller.organization_id, "role": role, "n": nonce, "by": caller.actor})
    expires_at = now + timedelta(days=INVITATION_DAYS)
    record_event("invitation_created", now=now, actor=caller.actor, organization_id=caller.organization_id, role=role)
    # Named by its nonce: the token itself would let anyone who reads the log join.
    audit_trail.record_change(
        caller,
        "created",
        "invitation",
        nonce,
        None,
        {"role": role, "expires_at": expires_at},
        now=now,
        label=f"{role} invitation",
    )
    db.session.commit()
    return token, expires_at


def register(
    username: str,
    password: str,
    *,
    invitation: str | None,
    registration_open: bool,
    secret_key: str,
    now: datetime,
) -> User:
    """Create an account: with an invitation it joins the inviting organization with the invited
    role; with open registration (REGISTRATION_OPEN=1) it joins no organization until an admin adds it."""
    from itsdangerous import BadData

    grant = None
    if invitation:
        try:
            grant = _serializer(secret_key).loads(invitation, max_age=INVITATION_DAYS * 86400)
        except BadData:
            raise ValidationFailed({"invitation": "is not valid or has expired"}) from None
    elif not registration_open:
        raise Forbidden("registration is closed: ask an admin for an invitation")
    username = (username or "").strip() if isinstance(username, str) else ""
    if not username or len(username) > USERNAME_MAX or any(ord(ch) < 32 for ch in username):
        raise ValidationFailed({"username": f"must be 1-{USERNAME_MAX} printable characters"})
    check_password_rules(password, "password")
    begin_write(db.session)
    if grant is not None and is_revoked(f"invite:{grant['n']}"):
        raise ValidationFailed({"invitation": "has already been used"})
    if db.session.scalar(select(User.id).where(User.username == username)) is not None:
        raise Conflict(f"the username {username!r} is taken")
    user = User(username=username, active=True, created_at=now)
    user.set_password(password)
    db.session.add(user)
    db.session.flush()
    if grant is not None:
        if db.session.get(Organization, grant["org"]) is None:
            raise ValidationFailed({"invitation": "its organization no longer exists"})
        db.session.add(Membership(user_id=user.id, organization_id=grant["org"], role=grant["role"], created_at=now))
        # One use per invitation: its nonce joins the denylist until the invitation would expire.
        db.session.add(
            RevokedToken(
                jti=f"invite:{grant['n']}",
                token_type="invitation",
                user_id=user.id,
                revoked_at=now,
                expires_at=now + timedelta(days=INVITATION_DAYS),
            )
        )
    record_event("user_registered", now=now, actor=f"api:{username}", username=username, invited=grant is not None)
    if grant is not None:
        audit_trail.record_change(
            f"api:{username}",
            "used",
            "invitation",
            grant["n"],
            {"used_by": None},
            {"used_by": username},
            now=now,
            label=f"{grant['role']} invitation",
            organization_id=grant["org"],
            extra={"invited_by": grant.get("by")},
        )
    audit_trail.record_change(
        f"api:{username}",
        "created",
        "user",
        user.id,
        None,
        {"username": username, "role": grant["role"] if grant else None, "invited": grant is not None},
        now=now,
        label=username,
        organization_id=grant["org"] if grant else None,
    )
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        raise Conflict(f"the username {username!r} is taken, or the invitation was just used") from None
    return user
