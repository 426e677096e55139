"""Dead letters: executions that used up their attempts, flagged for an operator.

On app/sql alone (ADR 0012): `conn` is a SQLAlchemy or a bare DB-API connection."""

from __future__ import annotations

import logging
from datetime import datetime

from app.services.engine import wakeups
from app.sql import alerts
from app.sql.dead_letters import insert_dead_letter
from app.sql.events import insert_event
from app.sql.transport import DBConnection

log = logging.getLogger("cronwell.alerts")


def dead_letter(
    conn: DBConnection,
    *,
    execution_id: int,
    job_id: int | None,
    job_name: str,
    alert_mode: str,
    status: str,
    reason: str,
    now: datetime,
) -> None:
    """Record the DeadLetter, an Alert (alert_mode web), an event, and the structured ALERT log line."""
    insert_dead_letter(conn, execution_id=execution_id, job_id=job_id, reason=reason, now=now)
    message = f"job {job_name!r} execution {execution_id} {status}: {reason}"
    grouped = None
    if alert_mode == "web":
        # One open alert per job (a one-off run: its own), a repeat counted on it
        # (app/services/engine/alert_grouping.py).
        grouped = alerts.raise_job_alert(
            conn, kind="dead_letter", job_id=job_id, execution_id=execution_id, message=message, now=now
        )
        if grouped == alerts.OPENED:
            wakeups.notify(conn, wakeups.ALERTS_CHANNEL)  # the delivery loop sends it now
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
