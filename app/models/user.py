"""People who sign in to the web UI (and, later, the API).

A user's role lives in each organization they belong to (`app.models.tenancy.Membership`), not
here; `superuser` marks the installation's operator, who may do everything everywhere.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Integer, String, text
from sqlalchemy.orm import Mapped, mapped_column, relationship
from werkzeug.security import check_password_hash, generate_password_hash

from app.clock import utcnow
from app.extensions import Model
from app.models.types import UTCDateTime


class User(Model):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(150), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    active: Mapped[bool] = mapped_column(Boolean, default=True, server_default=text("true"))
    superuser: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The IANA zone every page shows this user's times in.
    time_zone: Mapped[str] = mapped_column(String(64), default="UTC", server_default="UTC")

    __table_args__ = {"sqlite_autoincrement": True}  # never reuse an id a session or the audit log may hold

    memberships = relationship(
        "Membership", back_populates="user", cascade="all, delete-orphan", order_by="Membership.organization_id"
    )

    def role_in(self, organization_id: int | None) -> str | None:
        """This user's role in the organization, or None when not a member."""
        for membership in self.memberships:
            if membership.organization_id == organization_id:
                return membership.role
        return None

    # What Flask-Login asks of a user, as its UserMixin answers it, written out here: every process
    # loads this model, and importing Flask-Login for the mixin cost the worker and the scheduler
    # 0.6 MB (Flask's test client, click.testing and pdb come with it).
    @property
    def is_active(self) -> bool:
        return self.active

    @property
    def is_authenticated(self) -> bool:
        return self.is_active

    @property
    def is_anonymous(self) -> bool:
        return False

    def get_id(self) -> str:
        return str(self.id)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, User):
            return self.get_id() == other.get_id()
        return NotImplemented

    __hash__ = object.__hash__  # defining __eq__ would otherwise make users unhashable

    def set_password(self, password: str) -> None:
        self.password_hash = generate_password_hash(password)

    def check_password(self, password: str) -> bool:
        """Constant-time comparison happens inside werkzeug's check_password_hash."""
        return check_password_hash(self.password_hash, password)
