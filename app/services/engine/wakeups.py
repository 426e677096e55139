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


def enabled() -> bool:
    """LISTEN_NOTIFY=0 turns wake-ups off (polling only), e.g. to measure what they buy."""
    from flask import current_app, has_app_context

    return not has_app_context() or current_app.config.get("LISTEN_NOTIFY", True)


def notify(conn: Connection, channel: str) -> None:
    """Queue a notification inside the caller's transaction (PostgreSQL only)."""
    if conn.dialect.name == "postgresql" and enabled():
        conn.execute(text("SELECT pg_notify(:channel, '')"), {"channel": channel})


def notify_on_commit(session, *, jobs_changed: bool = False, work: bool = False) -> None:
    """Queue wake-ups in the session's transaction (delivered only if it commits)."""
    conn = session.connection()
    if jobs_changed:
        notify(conn, JOBS_CHANNEL)
    if work:
        notify(conn, WORK_CHANNEL)


class Listener:
    """LISTEN on PostgreSQL channels; on SQLite a plain sleeper with the same interface."""

    def __init__(self, connection=None) -> None:
        self._conn = connection

    @classmethod
    def open(cls, engine, channels: list[str]) -> Listener:
        if engine.dialect.name != "postgresql" or not enabled():
            return cls(None)
        import psycopg

        url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        try:
            conn = psycopg.connect(url, autocommit=True, connect_timeout=5)
            for channel in channels:
                conn.execute(f"LISTEN {channel}")
        except Exception:  # database down: behave like a sleeper until the next reopen
            return cls(None)
        return cls(conn)

    @property
    def active(self) -> bool:
        return self._conn is not None

    def fileno(self) -> int | None:
        return self._conn.fileno() if self._conn is not None else None

    def drain(self) -> int:
        """Consume pending notifications without waiting; returns how many there were."""
        if self._conn is None:
            return 0
        try:
            return sum(1 for _ in self._conn.notifies(timeout=0))
        except Exception:
            self.close()
            return 0

    def wait(self, seconds: float, should_stop=lambda: False) -> bool:
        """Sleep up to `seconds`, returning True early when a notification arrives (or the
        connection is lost, so the caller can listen again)."""
        import select
        import time

        deadline = time.monotonic() + seconds
        while not should_stop():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            slice_ = min(remaining, 0.5)  # stay responsive to stop requests
            if self._conn is None:
                time.sleep(slice_)
                continue
            try:
                readable, _, _ = select.select([self._conn.fileno()], [], [], slice_)
            except (OSError, ValueError):
                self.close()
                return True
            if readable and self.drain():
                return True
            if self._conn is None:
                # The connection was lost (database restart): wake the caller, which listens
                # again, rather than sleeping deaf until the end of the interval.
                return True
        return False

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None
