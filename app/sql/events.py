"""The event log's writer for engine code (`insert_event`): a row in `events` in the caller's
transaction and the same event as a structured log line. The ORM side of the event log (an
`Event` added to a session, the lists) is app/services/events.py."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from app.domain.event_kinds import worker_named
from app.sql.transport import DBConnection, Statement, execute

log = logging.getLogger("cronwell.events")

INSERT_EVENT = Statement(
    """
    INSERT INTO events (type, actor, job_id, execution_id, worker_id, payload, created_at)
    VALUES (:type, :actor, :job_id, :execution_id, :worker_id, :payload, :created_at)
    """,
    datetimes=("created_at",),
    documents=("payload",),
)


def insert_event(
    conn: DBConnection,
    type_: str,
    *,
    now: datetime,
    actor: str = "system",
    job_id: int | None = None,
    execution_id: int | None = None,
    **payload: Any,
) -> None:
    """Record an event through a Core or bare connection (committed with the caller's
    transaction) and log it."""
    params = {"type": type_, "actor": actor, "job_id": job_id, "execution_id": execution_id}
    row = {**params, "worker_id": worker_named(payload), "payload": payload, "created_at": now}
    execute(conn, INSERT_EVENT, row)
    # Payload keys go under one field: they could clash with LogRecord attributes ("name"...).
    log.info(
        type_,
        extra={"event": type_, "actor": actor, "job_id": job_id, "execution_id": execution_id, "payload": payload},
    )
