"""Web sessions that the server can end: sign-in starts one, sign-out ends it, and a password
change, a disabled account or a role change ends every session of the user (`end_sessions`).

The cookie holds a random token; the table holds its sha256 (`app.models.WebSession`). The
user loader accepts a cookie only while its row exists and is younger than SESSION_MAX_AGE_HOURS,
so a cookie saved before sign-out opens nothing afterwards, and a stolen one stops working after
the age limit however busy it is kept. The retention pass deletes the rows past that age
(`app.services.engine.retention`). No idle timeout: a sign-in lasts its age limit
whether used or not, and the dashboard's polling would keep an open tab "active" anyway.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from sqlalchemy import delete, select

from app.database import begin_write
from app.extensions import db
from app.models import User, WebSession
from app.services import audit_trail

# The key of the token in Flask's signed session cookie.
COOKIE_KEY = "sid"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def start_session(user_id: int, *, now: datetime) -> str:
    """Record a new session of the user and return the token its cookie carries (committed)."""
    token = secrets.token_urlsafe(32)
    begin_write(db.session)
    db.session.add(WebSession(user_id=user_id, token_hash=_digest(token), created_at=now))
    db.session.commit()
    return token


def end_session(token: str | None, *, now: datetime, who) -> None:
    """End the one session holding `token` (sign-out), with an audit row saying who signed out
    (`who`: their Caller or actor name); an unknown token is already ended."""
    if not token or not isinstance(token, str) or len(token) > 200:
        return
    begin_write(db.session)
    ended = db.session.execute(
        delete(WebSession)
        .where(WebSession.token_hash == _digest(token))
        .returning(WebSession.user_id, WebSession.created_at)
    ).first()
    if ended is not None:
        user_id, started_at = ended
        user = db.session.get(User, user_id)
        audit_trail.record_change(
            who,
            "signed_out",
            "user",
            user_id,
            {"session_started_at": started_at},
            {"session_started_at": None},
            now=now,
            label=user.username if user else None,
        )
    db.session.commit()


def end_sessions(user_id: int) -> int:
    """End every web session of the user; returns how many there were.

    Call it from whatever changes the user's password, role or active flag, in the same
    transaction as that change: it does not commit, so the change and the sign-out land together.
    """
    result = db.session.execute(delete(WebSession).where(WebSession.user_id == user_id))
    return result.rowcount or 0


def is_live(user_id: int, token: str | None, *, now: datetime, max_age: timedelta) -> bool:
    """Whether `token` belongs to a session of this user that has not been ended and was started
    less than `max_age` before `now`."""
    if not token or not isinstance(token, str) or len(token) > 200:
        return False
    found = db.session.scalar(
        select(WebSession.id).where(
            WebSession.user_id == user_id,
            WebSession.token_hash == _digest(token),
            WebSession.created_at > now - max_age,
        )
    )
    return found is not None


def count_sessions(user_id: int) -> int:
    """How many live web sessions the user has."""
    return len(db.session.scalars(select(WebSession.id).where(WebSession.user_id == user_id)).all())
