"""Process heartbeats: who is alive, since when, and what it is doing."""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

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
