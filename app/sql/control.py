"""What an operator asked of a worker: its stored commands (drain, stop) and the cancel requests
on its running executions (app/services/engine/worker_commands.py decides when to look)."""

from __future__ import annotations

from datetime import datetime

from app.domain.states import RUNNING_CANCELLABLE
from app.sql.statuses import sql_statuses
from app.sql.transport import DBConnection, Statement, execute

# A read, so a worker's check takes no write lock on SQLite when nothing waits.
HAS_UNACTED = Statement("SELECT 1 FROM worker_commands WHERE worker_id = :worker_id AND acted_at IS NULL LIMIT 1")

# Stamped in the statement that reads them, so a command is acted on once.
TAKE_COMMANDS = Statement(
    """
    UPDATE worker_commands SET acted_at = :now
    WHERE worker_id = :worker_id AND acted_at IS NULL
    RETURNING id, command
    """,
    datetimes=("now",),
)

# A few running rows, read through the running-rows index.
CANCEL_REQUESTS = Statement(
    f"""
    SELECT id, cancel_requested_by FROM executions
    WHERE status IN ({sql_statuses(RUNNING_CANCELLABLE)})
      AND claimed_by = :worker_id AND cancel_requested_at IS NOT NULL
    """
)


def has_unacted(conn: DBConnection, worker_id: str) -> bool:
    return bool(execute(conn, HAS_UNACTED, {"worker_id": worker_id}).rows)


def take_commands(conn: DBConnection, *, worker_id: str, now: datetime) -> list[str]:
    """The worker's unacted commands, oldest first, stamped acted."""
    rows = execute(conn, TAKE_COMMANDS, {"worker_id": worker_id, "now": now}).rows
    return [command for _, command in sorted(rows)]


def cancel_requests(conn: DBConnection, *, worker_id: str) -> dict[int, str]:
    """{execution id: who asked} for the worker's running rows an operator asked to cancel."""
    rows = execute(conn, CANCEL_REQUESTS, {"worker_id": worker_id}).rows
    return {execution_id: by or "" for execution_id, by in rows}
