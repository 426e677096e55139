"""Operators who sign in to the web UI."""

from __future__ import annotations

from datetime import datetime

from flask_login import UserMixin
from sqlalchemy import Boolean, CheckConstraint, Integer, String, text
from sqlalchemy.orm import Mapped, mapped_column
from werkzeug.security import check_password_hash, generate_password_hash

from app.clock import utcnow
from app.domain.states import Role, values
from app.extensions import db
from app.models.types import UTCDateTime


class User(UserMixin, db.Model):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(150), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    active: Mapped[bool] = mapped_column(Boolean, default=True, server_default=text("true"))
    role: Mapped[str] = mapped_column(String(16), default=Role.OPERATOR.value)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    __table_args__ = (CheckConstraint(f"role IN ({', '.join(repr(r) for r in values(Role))})", name="role"),)

    @property
    def is_active(self) -> bool:  # Flask-Login asks this
        return self.active

    def set_password(self, password: str) -> None:
        self.password_hash = generate_password_hash(password)

    def check_password(self, password: str) -> bool:
        """Constant-time comparison happens inside werkzeug's check_password_hash."""
        return check_password_hash(self.password_hash, password)
