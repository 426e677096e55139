"""Process heartbeats: who is alive, since when, and what it is doing.

A worker's `info` (JSON) is what the worker registry shows (app/services/read/workers.py):
state (running | draining | stopped), slots, busy, queues, and the executions it runs with their
start times. A worker that exits cleanly keeps its row marked `stopped` (so operators see it
went away on purpose) until HEARTBEAT_PRUNE_SECONDS removes it; `not_stopped()` keeps such rows
out of liveness checks.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta

from sqlalchemy import delete, func
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from app.domain.states import WorkerState
from app.models import Heartbeat

heartbeats = Heartbeat.__table__


def default_process_id(kind: str) -> str:
    return f"{kind}-{socket.gethostname()}-{os.getpid()}"


def beat(conn: Connection, *, process_id: str, kind: str, started_at: datetime, now: datetime, info: dict) -> None:
    """Insert or refresh this process's heartbeat row."""
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    stmt = insert(heartbeats).values(
        id=process_id,
        kind=kind,
        host=socket.gethostname(),
        pid=os.getpid(),
        started_at=started_at,
        last_seen=now,
        info=info,
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=[heartbeats.c.id],
        set_={
            "last_seen": now,
            "info": info,
            "pid": os.getpid(),
            "started_at": started_at,
            "host": socket.gethostname(),
        },
    )
    conn.execute(stmt)


def remove(conn: Connection, process_id: str) -> None:
    conn.execute(delete(heartbeats).where(heartbeats.c.id == process_id))


def prune(conn: Connection, *, now: datetime, older_than_seconds: int) -> int:
    """Delete heartbeats not refreshed for `older_than_seconds`."""
    cutoff = now - timedelta(seconds=older_than_seconds)
    return conn.execute(delete(heartbeats).where(heartbeats.c.last_seen < cutoff)).rowcount


def not_stopped():
    """SQL condition: the process has not marked itself stopped (liveness checks add it to
    their `last_seen` test, since a stopped worker's row stays fresh for a while)."""
    return func.coalesce(Heartbeat.info["state"].as_string(), "") != WorkerState.STOPPED.value
