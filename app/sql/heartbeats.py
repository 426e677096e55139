"""The registry row a long-running process refreshes with every heartbeat, and the database's
clock it measures itself against (app/services/engine/heartbeats.py decides when and why)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.sql.transport import DBConnection, Statement, execute, read_datetime

# PostgreSQL's clock right now (not the transaction's start); SQLite's, to the millisecond.
DATABASE_NOW = Statement(
    "SELECT clock_timestamp()",
    sqlite_text="SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
    returns_datetimes=(0,),
)

UPSERT_HEARTBEAT = Statement(
    """
    INSERT INTO heartbeats (id, kind, host, pid, started_at, last_seen, info, tasks)
    VALUES (:id, :kind, :host, :pid, :started_at, :last_seen, :info, :tasks)
    ON CONFLICT (id) DO UPDATE SET
        last_seen = excluded.last_seen, info = excluded.info, pid = excluded.pid,
        started_at = excluded.started_at, host = excluded.host, tasks = excluded.tasks
    """,
    datetimes=("started_at", "last_seen"),
    documents=("info", "tasks"),
)


def database_now(conn: DBConnection) -> datetime:
    now = read_datetime(execute(conn, DATABASE_NOW).scalar())
    assert now is not None  # the server's clock always reads
    return now


def upsert(
    conn: DBConnection,
    *,
    process_id: str,
    kind: str,
    host: str,
    pid: int,
    started_at: datetime,
    now: datetime,
    info: dict[str, Any],
    tasks: dict[str, str] | None = None,
) -> None:
    """Insert or refresh the heartbeat row of `process_id`; a worker's `tasks` are what it
    advertises ({name: code version}), None for a scheduler."""
    params = {"id": process_id, "kind": kind, "host": host, "pid": pid, "started_at": started_at}
    execute(conn, UPSERT_HEARTBEAT, {**params, "last_seen": now, "info": info, "tasks": tasks})
