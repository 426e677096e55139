"""Wake-ups over PostgreSQL LISTEN/NOTIFY, so processes do not wait for their next poll.

Channels: `cronwell_jobs` (a job changed: the scheduler re-reads its earliest next_run_at),
`cronwell_work` (new runnable executions: idle workers claim now), `cronwell_control` (an
operator stored a command for a worker, or asked it to cancel a running execution; the payload
is that worker's id, so the others ignore it) and `cronwell_alerts` (an alert opened or a
delivery queued: the delivery loop fans out and sends now). NOTIFY is transactional
in PostgreSQL, so a notification is delivered only if the writing transaction commits. On
SQLite there is no such thing; processes fall back to polling (workers check their commands
and cancel requests at least every CONTROL_POLL_SECONDS either way, so a lost notification
delays an order by about a second, never loses it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.sql.connections import Database
from app.sql.transport import POSTGRESQL, DBConnection, Statement, dialect_of, execute

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, scoped_session

log = logging.getLogger("cronwell.wakeups")

JOBS_CHANNEL = "cronwell_jobs"
WORK_CHANNEL = "cronwell_work"
CONTROL_CHANNEL = "cronwell_control"
ALERTS_CHANNEL = "cronwell_alerts"


def enabled() -> bool:
    """LISTEN_NOTIFY=0 turns wake-ups off (polling only), e.g. to measure what they buy."""
    from flask import current_app, has_app_context

    return not has_app_context() or current_app.config.get("LISTEN_NOTIFY", True)


def listen_url() -> str | None:
    from flask import current_app, has_app_context

    return current_app.config.get("DATABASE_LISTEN_URL") if has_app_context() else None


def transaction_pooling() -> bool:
    from flask import current_app, has_app_context

    return has_app_context() and bool(current_app.config.get("DATABASE_TRANSACTION_POOLING"))


_warned = False


def _warn_polling_only() -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning(
            "DATABASE_TRANSACTION_POOLING without DATABASE_LISTEN_URL: no LISTEN through a pooler, polling only",
            extra={"event": "listen_disabled"},
        )


NOTIFY = Statement("SELECT pg_notify(:channel, :payload)")


def notify(conn: DBConnection, channel: str, payload: str = "", *, on: bool | None = None) -> None:
    """Queue a notification inside the caller's transaction (PostgreSQL only). `conn`: a
    SQLAlchemy or a bare DB-API connection; `on`: LISTEN_NOTIFY as the caller read it (the worker
    parent has no Flask app to ask), else the app's."""
    if dialect_of(conn) == POSTGRESQL and (enabled() if on is None else on):
        execute(conn, NOTIFY, {"channel": channel, "payload": payload})


def notify_on_commit(session: Session | scoped_session[Any], *, jobs_changed: bool = False, work: bool = False) -> None:
    """Queue wake-ups in the session's transaction (delivered only if it commits)."""
    conn = session.connection()
    if jobs_changed:
        notify(conn, JOBS_CHANNEL)
    if work:
        notify(conn, WORK_CHANNEL)


class Listener:
    """LISTEN on PostgreSQL channels; on SQLite a plain sleeper with the same interface."""

    def __init__(self, connection: Any = None) -> None:
        self._conn = connection
        self.received: list[tuple[str, str]] = []  # (channel, payload) drained since last taken

    @classmethod
    def open(cls, source: Any, channels: list[str], *, on: bool | None = None) -> Listener:
        """LISTEN on `channels` for `source`: a SQLAlchemy Engine (settings from the Flask app)
        or the worker parent's `Database` (its own settings; `on` is its LISTEN_NOTIFY)."""
        bare = isinstance(source, Database)  # else a SQLAlchemy Engine (`source` is Any: narrowed by this flag)
        dialect = source.dialect if bare else source.dialect.name
        if dialect != POSTGRESQL or not (enabled() if on is None else on):
            return cls(None)
        import psycopg

        # The database's own connect arguments, so a multi-host URL (a primary and its standbys,
        # target_session_attrs=read-write) finds the current primary here too; or, behind a
        # transaction-pooling PgBouncer, DATABASE_LISTEN_URL straight to PostgreSQL: a pooled
        # session is lent out after each statement, so its LISTEN would hear for someone else.
        url = source.listen_url if bare else listen_url()
        if url is None and (source.transaction_pooling if bare else transaction_pooling()):
            _warn_polling_only()
            return cls(None)
        if bare:
            args, kwargs = (source.listen_conninfo(),), {}
        else:
            from sqlalchemy.engine import make_url

            args, kwargs = source.dialect.create_connect_args(make_url(url) if url else source.url)
        try:
            conn = psycopg.connect(*args, **{**kwargs, "autocommit": True, "connect_timeout": 5})
            # One statement for every channel: one round trip, and what pg_stat_activity shows
            # for the session names them all (the fault tests read it).
            conn.execute("; ".join(f"LISTEN {channel}" for channel in channels))
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
            found = [(n.channel, n.payload) for n in self._conn.notifies(timeout=0)]
        except Exception:
            self.close()
            return 0
        self.received += found[-100:]  # what a caller asks for is "was I named", not the history
        del self.received[:-100]
        return len(found)

    def take(self, channel: str) -> list[str]:
        """The payloads drained on `channel` since the last take (others are kept)."""
        taken = [payload for name, payload in self.received if name == channel]
        self.received = [(name, payload) for name, payload in self.received if name != channel]
        return taken

    def wait(self, seconds: float, should_stop: Callable[[], bool] = lambda: False) -> bool:
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
