"""Batches: one job run once per item, each item a config override, with an optional on-complete task."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Index, Integer, String, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.clock import utcnow
from app.extensions import Model
from app.models.types import JSONType, UTCDateTime


class Batch(Model):
    """A batch's items are executions (trigger `batch`, `batch_id` set); its aggregate status and
    counts are read from them (app/services/read/batches.py), never stored, so they cannot drift."""

    __tablename__ = "batches"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    item_count: Mapped[int] = mapped_column(Integer)
    # The task run once every item has ended (trigger `callback`, batch_id set, parent_id NULL).
    on_complete: Mapped[str | None] = mapped_column(String(100))
    on_complete_config: Mapped[dict] = mapped_column(JSONType, default=dict, server_default="{}")
    created_by: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    cancelled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cancelled_by: Mapped[str | None] = mapped_column(String(200))
    # Set once, under the batch row's lock, by whoever saw its last item end (a worker's turn,
    # recovery, a cancel, or the scheduler's sweep); the on-complete callback is created then.
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    job = relationship("Job", lazy="joined", innerjoin=True)

    __table_args__ = (
        CheckConstraint("item_count >= 1", name="item_count_positive"),
        # The sweep looks only at batches still open: a handful, whatever the history.
        Index(
            "ix_batches_open",
            "id",
            postgresql_where=text("completed_at IS NULL"),
            sqlite_where=text("completed_at IS NULL"),
        ),
        {"sqlite_autoincrement": True},
    )

    def __repr__(self) -> str:
        return f"<Batch {self.id} job={self.job_id} items={self.item_count}>"
