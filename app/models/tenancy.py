"""Organizations and memberships: who belongs where, with which role.

Organization -> Project -> Queue -> Job: every tenant object is reached from one project, and a
project belongs to one organization. A user holds a role in each organization they belong to
(`Membership`); the site `superuser` flag (on `users`) is the installation's operator and sees
every organization. A fresh installation has one organization, `default`, holding the `default`
project (migration 0007).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.clock import utcnow
from app.domain.states import Role, values
from app.extensions import Model
from app.models.types import UTCDateTime

DEFAULT_ORGANIZATION = "default"


class Organization(Model):
    __tablename__ = "organizations"
    __table_args__ = {"sqlite_autoincrement": True}  # never reuse an id a script or a session may still hold

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    def __repr__(self) -> str:
        return f"<Organization {self.id} {self.name!r}>"


class Membership(Model):
    """A user's role in one organization."""

    __tablename__ = "memberships"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    organization_id: Mapped[int] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    user = relationship("User", back_populates="memberships")
    organization = relationship("Organization", lazy="joined", innerjoin=True)

    __table_args__ = (
        UniqueConstraint("user_id", "organization_id", name="uq_memberships_user_organization"),
        CheckConstraint(f"role IN ({', '.join(repr(r) for r in values(Role))})", name="role"),
        {"sqlite_autoincrement": True},
    )

    def __repr__(self) -> str:
        return f"<Membership user={self.user_id} org={self.organization_id} {self.role}>"
