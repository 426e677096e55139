"""What the REST API keeps: API tokens, revoked JWTs and idempotency keys.

- `api_tokens`: long-lived credentials for machines, one project and a role each; only the SHA-256
  of the secret is stored (the secret is shown once), so a leaked table grants nothing.
- `token_denylist`: JWT ids revoked before they expire (sign-out); a row is useless once its token
  has expired, so the retention pass deletes it then.
- `idempotency_keys`: the first answer to a POST sent with an `Idempotency-Key`, so a retried
  request replays it instead of creating a second run. The unique (caller, key) pair decides which of
  two concurrent duplicates does the work.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, Integer, String, Text, UniqueConstraint, delete
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Mapped, mapped_column

from app.clock import utcnow
from app.domain.states import Role, values
from app.extensions import Model
from app.models.types import UTCDateTime

_ROLES = ", ".join(repr(r) for r in values(Role))


class ApiToken(Model):
    __tablename__ = "api_tokens"
    __table_args__ = (
        CheckConstraint(f"role IN ({_ROLES})", name="role"),
        CheckConstraint("length(name) > 0", name="name_not_empty"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    # The first characters of the secret, shown in lists so an operator can tell tokens apart.
    prefix: Mapped[str] = mapped_column(String(16))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex of the whole secret
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_used_address: Mapped[str | None] = mapped_column(String(64))
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_by: Mapped[str | None] = mapped_column(String(200))

    def __repr__(self) -> str:
        return f"<ApiToken {self.id} {self.name!r}>"


class RevokedToken(Model):
    __tablename__ = "token_denylist"

    jti: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_type: Mapped[str] = mapped_column(String(16))  # access | refresh
    user_id: Mapped[int | None] = mapped_column(Integer)
    revoked_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class IdempotencyKey(Model):
    __tablename__ = "idempotency_keys"
    __table_args__ = (
        UniqueConstraint("caller", "key", name="uq_idempotency_keys_caller_key"),
        Index("ix_idempotency_keys_expires_at", "expires_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    caller: Mapped[str] = mapped_column(String(64))  # "user:5" or "token:3": keys never collide across callers
    key: Mapped[str] = mapped_column(String(255))
    request_hash: Mapped[str] = mapped_column(String(64))  # sha256 of method, path and body
    status_code: Mapped[int | None] = mapped_column(Integer)  # NULL while the first request runs
    response_body: Mapped[str | None] = mapped_column(Text)
    location: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


def prune_expired_credentials(conn: Connection, *, now: datetime) -> int:
    """Delete denylist rows of expired tokens and expired idempotency keys (the retention pass)."""
    removed = conn.execute(delete(RevokedToken.__table__).where(RevokedToken.__table__.c.expires_at < now)).rowcount
    removed += conn.execute(
        delete(IdempotencyKey.__table__).where(IdempotencyKey.__table__.c.expires_at < now)
    ).rowcount
    return removed
