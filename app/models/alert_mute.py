"""A job whose alerts are muted until an instant (an operator's "mute for 4 h")."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.clock import utcnow
from app.extensions import Model
from app.models.types import UTCDateTime


class AlertMute(Model):
    __tablename__ = "alert_mutes"

    # One row per muted job; deleting the job ends its mute.
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    until: Mapped[datetime] = mapped_column(UTCDateTime)
    muted_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
