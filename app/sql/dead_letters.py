"""A dead letter: an execution that used up its attempts, flagged for an operator (the alert and
the event around it: app/services/engine/dead_letters.py)."""

from __future__ import annotations

from datetime import datetime

from app.sql.transport import DBConnection, Statement, execute

INSERT_DEAD_LETTER = Statement(
    "INSERT INTO dead_letters (execution_id, job_id, reason, created_at) VALUES (:execution_id, :job_id, :reason, :now)",
    datetimes=("now",),
)


def insert_dead_letter(
    conn: DBConnection, *, execution_id: int, job_id: int | None, reason: str, now: datetime
) -> None:
    execute(conn, INSERT_DEAD_LETTER, {"execution_id": execution_id, "job_id": job_id, "reason": reason, "now": now})
