"""Bare DB-API connections to Cronwell's database, configured as app/database.py configures
SQLAlchemy's, for the worker parent (docs/adr/0012-worker-parent-on-dbapi.md).

What every connection gets, on either path (`app.database` calls the same functions from its
"connect" listeners, so the two cannot drift):

- SQLite: WAL, a busy timeout, foreign keys, synchronous=NORMAL, and transaction control taken
  from the driver (`isolation_level = None`), so a write transaction says BEGIN IMMEDIATE itself
  and queues for the lock up front (`configure_sqlite`);
- PostgreSQL: the host's clock measured against the server's (`follow_database_clock`), and,
  behind a transaction-pooling PgBouncer, no prepared statements (`prepare_threshold = None`: a
  prepared statement lives in one server session, and the pooler hands each transaction
  whichever one is free).

A `Database` opens connections in autocommit and runs each transaction with explicit BEGIN and
COMMIT (`transaction`), so "one statement, no BEGIN" (the worker's successful turns) is simply a
statement outside `transaction`. The URL is the one the rest of Cronwell is configured with
(SQLAlchemy's spelling, `config.normalise_database_url`); `conninfo` turns it into libpq's.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, quote, unquote, urlencode

import app.clock as clock
from app.sql.transport import DBConnection

log = logging.getLogger("cronwell.clock")

POSTGRESQL = "postgresql"
SQLITE = "sqlite"
SQLITE_BUSY_TIMEOUT_MS = 30_000
SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}",
    "PRAGMA foreign_keys=ON",
    "PRAGMA synchronous=NORMAL",
)


def dialect_of_url(url: str) -> str:
    scheme = url.partition(":")[0].partition("+")[0]
    if scheme in ("postgresql", "postgres"):
        return POSTGRESQL
    if scheme == SQLITE:
        return SQLITE
    raise ValueError(f"unsupported database URL scheme {scheme!r} (PostgreSQL or SQLite)")


def sqlite_path(url: str) -> str:
    """`sqlite:///relative.db`, `sqlite:////absolute.db` (SQLAlchemy's spelling) -> the file."""
    rest = url.partition("://")[2]
    path = rest[1:] if rest.startswith("/") else rest
    path = path.partition("?")[0]
    if not path or path == ":memory:":
        raise ValueError("the worker needs a SQLite file, not an in-memory database")
    return unquote(path)


def conninfo(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as a libpq URI: the driver name dropped, and SQLAlchemy's
    multi-host spelling (`user@/db?host=a:1&host=b:2`) back to libpq's (`user@a:1,b:2/db`), so a
    primary and its standbys (target_session_attrs=read-write) are found here too."""
    rest = url.partition("://")[2]
    netloc, _, tail = rest.partition("/")
    path, _, query = tail.partition("?")
    params = parse_qsl(query, keep_blank_values=True)
    hosts = [value for key, value in params if key == "host"]
    user, at, host = netloc.rpartition("@")
    if hosts and not host and not any(h.startswith("/") for h in hosts):
        netloc = f"{user}{at}{','.join(hosts)}"
        params = [(key, value) for key, value in params if key != "host"]
    query = urlencode(params, quote_via=quote)
    return f"postgresql://{netloc}/{path}" + (f"?{query}" if query else "")


def configure_sqlite(dbapi_connection: DBConnection) -> None:
    dbapi_connection.isolation_level = None  # BEGIN is ours to say (BEGIN IMMEDIATE for writes)
    cursor = dbapi_connection.cursor()
    try:
        for pragma in SQLITE_PRAGMAS:
            cursor.execute(pragma)
    finally:
        cursor.close()


def follow_database_clock(dbapi_connection: DBConnection) -> None:
    """Measure this host's clock against PostgreSQL's on every new connection (app/clock.py).

    The scheduler and workers measure again with every heartbeat; this covers everything else
    that stamps rows - web requests, one-shot CLI commands, task processes - so a host whose
    clock runs ahead does not, say, create a triggered run 30 s in the future. One round trip per
    new connection, never per statement; a failure leaves the clock as it was.
    """
    try:
        before = clock.host_now()
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SELECT clock_timestamp()")
            reference = cursor.fetchone()[0]
        after = clock.host_now()
        dbapi_connection.rollback()  # leave the new connection idle, as a pool expects
    except Exception:  # noqa: BLE001 - the caller's own statement will report the database
        return
    follow_reading(reference.astimezone(UTC), before, after)


def follow_reading(reference: datetime, before: datetime, after: datetime) -> timedelta:
    """Follow the database's clock, read at `reference` between the host's `before` and `after`
    (its midpoint: off by at most half the round trip); log when the host's clock had to move.
    Returns how far `utcnow()` moved."""
    moved = clock.follow(reference, before + (after - before) / 2)
    if moved:
        log.warning(
            "host clock differs from the database's; following the database",
            extra={
                "event": "clock_corrected",
                "correction_seconds": round(clock.correction().total_seconds(), 3),
                "moved_seconds": round(moved.total_seconds(), 3),
            },
        )
    return moved


class Database:
    """Connections to one database without SQLAlchemy: what the worker parent holds.

    `url` is Cronwell's database URL (SQLAlchemy's spelling); `transaction_pooling` says it goes
    through a transaction-pooling PgBouncer (DATABASE_TRANSACTION_POOLING); `listen_url`, when
    set, is where LISTEN goes instead (DATABASE_LISTEN_URL, straight to PostgreSQL)."""

    def __init__(self, url: str, *, transaction_pooling: bool = False, listen_url: str | None = None) -> None:
        self.url = url
        self.dialect = dialect_of_url(url)
        self.transaction_pooling = transaction_pooling
        self.listen_url = listen_url
        if self.dialect == SQLITE:
            self._path = sqlite_path(url)
        # One idle connection kept for `write_transaction` and `reading`: the heartbeat, lease
        # renewal and the control check run every second or so, and a new PostgreSQL connection
        # each time is a server process started and stopped each time.
        self._spare = None
        self._spare_lock = threading.Lock()

    def connect(self) -> DBConnection:
        """A new connection in autocommit, configured as every Cronwell connection is."""
        if self.dialect == SQLITE:
            conn: DBConnection = sqlite3.connect(
                self._path, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000, check_same_thread=False
            )
            configure_sqlite(conn)
            return conn
        import psycopg  # here, not at import: a SQLite worker never loads it

        conn = psycopg.connect(conninfo(self.url), autocommit=True)
        if self.transaction_pooling:
            conn.prepare_threshold = None
        follow_database_clock(conn)
        return conn

    def listen_conninfo(self) -> str:
        """Where LISTEN connects: DATABASE_LISTEN_URL when set, else the database itself."""
        return conninfo(self.listen_url or self.url)

    @contextmanager
    def transaction(self, conn: DBConnection) -> Iterator[DBConnection]:
        """A write transaction on `conn`: BEGIN (IMMEDIATE on SQLite, so a writer takes the lock
        before it reads), COMMIT on success, ROLLBACK on any error."""
        cursor = conn.cursor()
        try:
            cursor.execute("BEGIN IMMEDIATE" if self.dialect == SQLITE else "BEGIN")
        finally:
            cursor.close()
        try:
            yield conn
        except BaseException:
            _rollback(conn)
            raise
        cursor = conn.cursor()
        try:
            cursor.execute("COMMIT")
        finally:
            cursor.close()

    @contextmanager
    def write_transaction(self) -> Iterator[DBConnection]:
        """A write transaction on the kept idle connection (or a new one), committed on success."""
        with self._borrowed() as conn, self.transaction(conn):
            yield conn

    @contextmanager
    def reading(self) -> Iterator[DBConnection]:
        """The kept idle connection (or a new one) for reads in autocommit: each statement sees
        the latest commits."""
        with self._borrowed() as conn:
            yield conn

    @contextmanager
    def _borrowed(self) -> Iterator[DBConnection]:
        """The spare connection if there is one, else a new one; kept as the spare afterwards,
        unless anything failed on it (a broken connection is closed, the next use reconnects)."""
        with self._spare_lock:
            conn, self._spare = self._spare, None
        if conn is None:
            conn = self.connect()
        try:
            yield conn
        except BaseException:
            _close(conn)
            raise
        with self._spare_lock:
            if self._spare is None:
                conn, self._spare = None, conn
        if conn is not None:
            _close(conn)

    def close(self) -> None:
        """Close the kept idle connection (a stopping worker)."""
        with self._spare_lock:
            conn, self._spare = self._spare, None
        if conn is not None:
            _close(conn)


def _close(conn: DBConnection) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - closing a broken connection has nothing left to report
        pass


def _rollback(conn: DBConnection) -> None:
    try:
        cursor = conn.cursor()
        try:
            cursor.execute("ROLLBACK")
        finally:
            cursor.close()
    except Exception:  # noqa: BLE001 - a broken connection has nothing to roll back; the caller drops it
        pass


# SQLSTATE classes that mean "the database is not there or not ready", not "this statement is
# wrong": 08 connection exception, 57 operator intervention (shutdown, admin_shutdown,
# cannot_connect_now), 53 insufficient resources (too many connections, disk full), 40 a
# transaction rollback (serialization failure, deadlock), and 42P01 an undefined table, which is
# what a worker started before `flask db upgrade` sees.
_TRANSIENT_SQLSTATE_PREFIXES = ("08", "57", "53", "40")
_SCHEMA_NOT_READY_SQLSTATES = ("42P01",)


def is_database_trouble(exc: BaseException) -> bool:
    """Whether `exc` says the database is unreachable, restarting, overloaded or not migrated yet:
    trouble worth backing off and retrying for. Anything else (a programming error, a constraint
    the code violated, a bug in a task's bookkeeping) is not, and must stop the process with its
    traceback instead of being retried as if the database were down.

    Recognises sqlite3's, psycopg's and SQLAlchemy's wrappers of either without importing the
    drivers a process has not loaded (the worker parent never loads SQLAlchemy)."""
    import sys

    if isinstance(exc, sqlite3.OperationalError | sqlite3.InterfaceError):
        # sqlite3 reports a lock held too long, a file it cannot open and a missing schema all as
        # OperationalError (a misspelt column too, which the suite catches long before a deploy).
        return True
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    sqlalchemy_exc = sys.modules.get("sqlalchemy.exc")
    if sqlalchemy_exc is not None and isinstance(exc, sqlalchemy_exc.DBAPIError):
        if exc.connection_invalidated or isinstance(
            exc, sqlalchemy_exc.OperationalError | sqlalchemy_exc.InterfaceError
        ):
            return True
        return exc.orig is not None and exc.orig is not exc and is_database_trouble(exc.orig)
    if sqlalchemy_exc is not None and isinstance(exc, sqlalchemy_exc.DisconnectionError | sqlalchemy_exc.TimeoutError):
        return True
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(exc, psycopg.Error):
        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            return True
        state = getattr(exc, "sqlstate", None) or ""
        return state.startswith(_TRANSIENT_SQLSTATE_PREFIXES) or state in _SCHEMA_NOT_READY_SQLSTATES
    return False
