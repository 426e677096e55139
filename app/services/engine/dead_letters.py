"""Dead letters: executions that used up their attempts, flagged for an operator."""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.engine import Connection

from app.models import DeadLetter, Job, Queue
from app.services.audit import insert_event
from app.services.engine import alert_grouping

log = logging.getLogger("cronwell.alerts")


def project_of_job(job_id: int):
    """A scalar subquery: the project of the job (through its queue), for an alert's project_id."""
    return select(Queue.project_id).join(Job, Job.queue_id == Queue.id).where(Job.id == job_id).scalar_subquery()


def dead_letter(
    conn: Connection,
    *,
    execution_id: int,
    job_id: int,
    job_name: str,
    alert_mode: str,
    status: str,
    reason: str,
    now: datetime,
) -> None:
    """Record the DeadLetter, an Alert (alert_mode web), an event, and the structured ALERT log line."""
    conn.execute(
        DeadLetter.__table__.insert().values(execution_id=execution_id, job_id=job_id, reason=reason, created_at=now)
    )
    message = f"job {job_name!r} execution {execution_id} {status}: {reason}"
    grouped = None
    if alert_mode == "web":
        # One open alert per job: a repeat is counted on it (app/services/engine/alert_grouping.py).
        grouped = alert_grouping.raise_job_alert(
            conn,
            kind="dead_letter",
            job_id=job_id,
            execution_id=execution_id,
            project_id=project_of_job(job_id),
            message=message,
            now=now,
        )
    insert_event(
        conn, "dead_lettered", now=now, job_id=job_id, execution_id=execution_id, status=status, reason=reason[:500]
    )
    # Written in both alert modes: log pipelines can page on it.
    log.error(
        "ALERT " + message[:500],
        extra={
            "event": "ALERT",
            "alert_kind": "dead_letter",
            "job_id": job_id,
            "execution_id": execution_id,
            "alert_mode": alert_mode,
            "alert": grouped,
        },
    )
