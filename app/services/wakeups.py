"""Wake-ups over PostgreSQL LISTEN/NOTIFY, so processes do not wait for their next poll.

Channels: `cronwell_jobs` (a job changed: the scheduler re-reads its earliest next_run_at)
and `cronwell_work` (new runnable executions: idle workers claim now). NOTIFY is transactional
in PostgreSQL, so a notification is delivered only if the writing transaction commits. On
SQLite there is no such thing; processes fall back to polling.
"""
from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

JOBS_CHANNEL = "cronwell_jobs"
WORK_CHANNEL = "cronwell_work"


def notify(conn: Connection, channel: str) -> None:
    """Queue a notification inside the caller's transaction (PostgreSQL only)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": channel})


def notify_on_commit(session, *, jobs_changed: bool = False, work: bool = False) -> None:
    conn = session.connection()
    if jobs_changed:
        notify(conn, JOBS_CHANNEL)
    if work:
        notify(conn, WORK_CHANNEL)
