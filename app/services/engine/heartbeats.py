"""Process heartbeats: who is alive, since when, and what it is doing.

A worker's `info` (JSON) is what the worker registry shows (app/services/read/workers.py):
state (running | draining | stopped), slots, busy, queues, and the executions it runs with their
start times; its `tasks` column, the tasks it advertises with their code versions (it claims
only runs of those; explain reads them to say that no live worker offers a run's task). A worker that exits cleanly keeps its row marked `stopped` (so operators see it
went away on purpose) until HEARTBEAT_PRUNE_SECONDS removes it; `not_stopped()` keeps such rows
out of liveness checks.

Each heartbeat also measures this host's clock against the database's (`sync_clock`): a process
whose host clock is off follows the database's, so every process stamps times on one clock
(app/clock.py).
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from app import clock
from app.domain.states import WorkerState
from app.sql import heartbeats as sql_heartbeats
from app.sql.connections import follow_reading
from app.sql.transport import DBConnection

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement
    from sqlalchemy.engine import Connection, Engine

log = logging.getLogger("cronwell.clock")


def default_process_id(kind: str) -> str:
    return f"{kind}-{socket.gethostname()}-{os.getpid()}"


def database_now(conn: Connection) -> datetime:
    """The database server's clock right now (not the transaction's start)."""
    return sql_heartbeats.database_now(conn)


def sync_clock(conn_or_engine: Any) -> timedelta:
    """Measure this host's clock against the database's and follow it when they disagree by more
    than CLOCK_TOLERANCE (app/clock.py). Returns how far `utcnow()` moved (usually zero).

    The database's reading is taken as the midpoint of the round trip, so the error is at most
    half of it. Called by `flask scheduler run` and `flask worker run` before they start, and
    with every heartbeat.
    """
    if _is_opener(conn_or_engine):
        with _open(conn_or_engine) as conn:
            return sync_clock(conn)
    before = clock.host_now()
    reference = database_now(conn_or_engine)
    return follow_reading(reference, before, clock.host_now())


def _is_opener(source: object) -> bool:
    """A SQLAlchemy Engine or the worker's `app.sql.connections.Database`, not a connection."""
    return hasattr(source, "reading") or (hasattr(source, "connect") and hasattr(source, "dispose"))


def _open(source: Any) -> Any:
    return source.reading() if hasattr(source, "reading") else source.connect()


def sync_clock_at_start(engine: Engine) -> None:
    """`sync_clock` before a long-running process starts, so even its first stamps are on the
    database's clock; a database not reachable yet is left to the first heartbeat."""
    try:
        sync_clock(engine)
    except Exception as exc:  # noqa: BLE001 - the loop's own retries report the database
        log.warning(
            "could not read the database clock at start", extra={"event": "clock_sync_failed", "error": str(exc)[:300]}
        )


def beat(
    conn: DBConnection,
    *,
    process_id: str,
    kind: str,
    started_at: datetime,
    now: datetime,
    info: dict[str, Any],
    tasks: dict[str, str] | None = None,
) -> None:
    """Insert or refresh this process's heartbeat row (measuring the clock first: if this
    process's clock had to be corrected, `now` is corrected by as much). A worker passes the
    tasks it advertises ({name: code version})."""
    now = now + sync_clock(conn)
    sql_heartbeats.upsert(
        conn,
        process_id=process_id,
        kind=kind,
        host=socket.gethostname(),
        pid=os.getpid(),
        started_at=started_at,
        now=now,
        info=info,
        tasks=tasks,
    )


# SQLAlchemy and the models are imported where they are used, below: the worker parent uses the
# functions above without them (docs/adr/0012-worker-parent-on-dbapi.md).


def remove(conn: Connection, process_id: str) -> None:
    from sqlalchemy import delete

    from app.models import Heartbeat

    conn.execute(delete(Heartbeat.__table__).where(Heartbeat.__table__.c.id == process_id))


def prune(conn: Connection, *, now: datetime, older_than_seconds: int) -> int:
    """Delete heartbeats not refreshed for `older_than_seconds`."""
    from sqlalchemy import delete

    from app.models import Heartbeat

    cutoff = now - timedelta(seconds=older_than_seconds)
    table = Heartbeat.__table__
    return conn.execute(delete(table).where(table.c.last_seen < cutoff)).rowcount


def not_stopped() -> ColumnElement[bool]:
    """SQL condition: the process has not marked itself stopped (liveness checks add it to
    their `last_seen` test, since a stopped worker's row stays fresh for a while)."""
    from sqlalchemy import func

    from app.models import Heartbeat

    return func.coalesce(Heartbeat.info["state"].as_string(), "") != WorkerState.STOPPED.value
