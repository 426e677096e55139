"""Workflow runs: one per started occurrence of a workflow job (a job with `steps`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.clock import utcnow
from app.extensions import Model
from app.models.types import JSONType, UTCDateTime


class WorkflowRun(Model):
    """The run of a workflow job's occurrence. Its id is the occurrence's execution (the anchor:
    what the scheduler, overlap, unique keys and the runs grid see); each step runs as an
    execution with `workflow_run_id` this id. `steps` is the definition as it was when the run
    started (editing the job changes later runs only); `state` maps each step that has moved to
    `{"execution_id": N}` (started, or kept from the run retried) or `{"state": "upstream_failed" |
    "cancelled"}`; a step missing from it is waiting. Written only under this row's lock."""

    __tablename__ = "workflow_runs"

    id: Mapped[int] = mapped_column(ForeignKey("executions.id", ondelete="CASCADE"), primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    # A retry's run: the run it resumes and the step it resumed from (None: the failed ones).
    retry_of_id: Mapped[int | None] = mapped_column(Integer)
    retry_from: Mapped[str | None] = mapped_column(String(64))
    steps: Mapped[list] = mapped_column(JSONType)
    state: Mapped[dict] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    anchor = relationship("Execution", foreign_keys=[id], lazy="joined", innerjoin=True)
    job = relationship("Job", lazy="joined", innerjoin=True)

    __table_args__ = (
        Index("ix_workflow_runs_job_id", "job_id", "id"),
        # The sweep looks only at runs still going: a handful, whatever the history.
        Index(
            "ix_workflow_runs_unfinished",
            "id",
            postgresql_where=text("finished_at IS NULL"),
            sqlite_where=text("finished_at IS NULL"),
        ),
    )

    def __repr__(self) -> str:
        return f"<WorkflowRun {self.id} job={self.job_id}>"
