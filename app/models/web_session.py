"""Signed-in web sessions, kept server-side so that they can be ended.

The browser's session cookie is signed, not secret-bearing on its own: before this table a cookie
copied before sign-out still opened the dashboard. Now the cookie carries a random token whose
hash must match a row here; signing out deletes the row, and a password change, a disabled
account or a new role deletes every row of that user (`app.services.use_cases.sessions`). A row
older than SESSION_MAX_AGE_HOURS opens nothing and is deleted by the retention pass.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.clock import utcnow
from app.extensions import Model
from app.models.types import UTCDateTime


class WebSession(Model):
    __tablename__ = "web_sessions"
    __table_args__ = {"sqlite_autoincrement": True}

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # sha256 of the token in the cookie: a copy of this table cannot be replayed as a cookie.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    # Indexed for the retention pass, which deletes the sessions past SESSION_MAX_AGE_HOURS.
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)

    def __repr__(self) -> str:
        return f"<WebSession {self.id} user={self.user_id}>"
