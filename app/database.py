"""Engine-level database behaviour that must hold in every process.

SQLite (the embedded default) runs in WAL mode so the web UI can read while the scheduler and
worker write, with a busy timeout so writers queue on the lock instead of failing at once.
A transaction that will write starts with BEGIN IMMEDIATE (see `begin_write`,
`write_transaction`): a deferred transaction that reads and then writes can fail when another
process committed in between, and taking the lock up front is what serialises claims and ticks
across processes on one machine. PostgreSQL needs none of this: row locks do the work there;
behind a transaction-pooling PgBouncer it only must not prepare statements (`configure_engine`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from flask import Flask
from sqlalchemy import Engine, event
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, scoped_session

from app.sql.connections import configure_sqlite, follow_database_clock

_immediate: ContextVar[bool] = ContextVar("cronwell_sqlite_immediate", default=False)


def init_app(app: Flask) -> None:
    from app.extensions import db

    with app.app_context():
        configure_engine(
            db.engine,
            transaction_pooling=app.config.get("DATABASE_TRANSACTION_POOLING", False),
            ping_after_idle=app.config.get("DATABASE_PING_AFTER_IDLE", False),
        )
        if db.engine.dialect.name == "postgresql" and not app.testing:
            # Measure the clock before anything reads it (a CLI command takes `now` first thing):
            # the first connection does it (`follow_database_clock`) and stays in the pool.
            try:
                with db.engine.connect():
                    pass
            except Exception:  # noqa: BLE001 - unreachable: the first real statement will say so
                pass


def transaction_pooling_from_environment() -> bool:
    """DATABASE_TRANSACTION_POOLING as a process without an app (a task process) sees it."""
    return os.environ.get("DATABASE_TRANSACTION_POOLING", "").strip().lower() in ("1", "true", "yes", "on")


def configure_engine(engine: Engine, *, transaction_pooling: bool | None = None, ping_after_idle: bool = False) -> None:
    """SQLite: pragmas and explicit BEGIN handling. PostgreSQL behind a transaction-pooling
    PgBouncer (`transaction_pooling`, default from the environment): never prepare statements.

    A prepared statement lives in one server session, and transaction pooling hands each
    transaction whichever server session is free, so psycopg's automatic prepare (on a
    statement's fifth use) would later name a statement that session never saw. PgBouncer 1.18
    (Debian 12) cannot track them; without prepares every statement is planned where it runs.
    `ping_after_idle` (the scheduler process): `ping_when_idle` instead of `pool_pre_ping`.
    """
    if getattr(engine, "_cronwell_configured", False):
        return
    if engine.dialect.name == "postgresql":
        engine._cronwell_configured = True  # type: ignore[attr-defined]
        if transaction_pooling is None:
            transaction_pooling = transaction_pooling_from_environment()
        never_prepare = bool(transaction_pooling)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection, record):
            if never_prepare:
                dbapi_connection.prepare_threshold = None
            follow_database_clock(dbapi_connection)
            record.info[_CHECKED_IN_AT] = time.monotonic()

        if ping_after_idle:
            ping_when_idle(engine)
        return
    if engine.dialect.name != "sqlite":
        return
    engine._cronwell_configured = True  # type: ignore[attr-defined]

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        # Transaction control taken from pysqlite, so we can say BEGIN IMMEDIATE ourselves.
        configure_sqlite(dbapi_connection)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection):
        conn.exec_driver_sql("BEGIN IMMEDIATE" if _immediate.get() else "BEGIN")


# A pooled connection idle this long is pinged before it is handed out (a restart or failover
# may have closed it); one used more recently is handed out as it is.
PING_AFTER_IDLE_SECONDS = 1.0
_CHECKED_IN_AT = "cronwell_checked_in_at"


def ping_when_idle(engine: Engine) -> None:
    """SQLAlchemy's `pool_pre_ping`, but only for connections idle `PING_AFTER_IDLE_SECONDS`.

    The ping is a transaction of its own on the server: the scheduler's tick checks a connection
    out several times within milliseconds, and a ping before each was half of what an idle
    scheduler cost the database. A connection back in the pool for under a second has not
    missed a restart unless one happened in that second; a statement on it then fails, the
    pool is invalidated, and the scheduler's loop retries as for any database error (so only
    the scheduler process uses this: a web request would answer that error). Raising
    DisconnectionError from the checkout event is the pool's documented way to discard a dead
    connection and check out a fresh one."""

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection, record):
        record.info[_CHECKED_IN_AT] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection, record, _proxy):
        checked_in_at = record.info.get(_CHECKED_IN_AT)
        if checked_in_at is not None and time.monotonic() - checked_in_at < PING_AFTER_IDLE_SECONDS:
            return
        try:
            alive = engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:  # noqa: BLE001 - any failure of the ping: the connection is gone
            raise DisconnectionError(f"pooled connection failed its ping: {exc}") from exc
        if not alive:
            raise DisconnectionError("pooled connection failed its ping")


def is_sqlite(bind) -> bool:
    return bind.dialect.name == "sqlite"


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A Core transaction that will write; commits on success, rolls back on error."""
    with engine.connect() as conn:
        with write_transaction_on(conn):
            yield conn


@contextmanager
def write_transaction_on(conn: Connection) -> Iterator[Connection]:
    """`write_transaction` on a connection the caller keeps (the worker holds one for its turns).

    On SQLite the transaction starts with BEGIN IMMEDIATE (see the "begin" listener), so a
    writer queues for the lock up front instead of failing when it first writes.
    """
    token = _immediate.set(True)
    try:
        with conn.begin():
            _immediate.reset(token)
            token = None
            yield conn
    finally:
        if token is not None:
            _immediate.reset(token)


@contextmanager
def single_statement_on(conn: Connection) -> Iterator[Connection]:
    """Run exactly one write statement on a kept PostgreSQL connection, in autocommit.

    One statement is atomic on its own; leaving out BEGIN saves a round trip, which the worker
    pays on every turn. Only for callers that issue a single statement: anything more would not
    be one transaction.
    """
    if conn.dialect.name != "postgresql":
        raise ValueError("single_statement_on is for PostgreSQL; use write_transaction_on")
    # Set on the DBAPI connection, not with `conn.execution_options(isolation_level=...)`: that
    # also registers a reset with the pool each time, kept until the connection is returned, and
    # the worker keeps its connection for its whole life, so they piled up (about 0.25 KB a turn,
    # 0.4 KB of RSS per execution while draining, without end). This resets it itself.
    dbapi_connection = conn.connection.dbapi_connection
    conn.dialect.set_isolation_level(dbapi_connection, "AUTOCOMMIT")
    try:
        yield conn
        conn.commit()  # ends SQLAlchemy's autobegun Transaction; the database already committed
    except BaseException:
        conn.rollback()
        raise
    finally:
        conn.dialect.set_isolation_level(dbapi_connection, conn.default_isolation_level)


def begin_write(session: Session | scoped_session[Any]) -> Connection:
    """Make the session's current transaction a write transaction and return its connection.

    On SQLite an open read transaction is ended first (it holds no changes at this point in a
    service) so that the new one starts with BEGIN IMMEDIATE.
    """
    if isinstance(session, scoped_session):
        session = session()
    if not is_sqlite(session.get_bind()):
        return session.connection()
    if session.in_transaction():
        if session.new or session.dirty or session.deleted:
            raise RuntimeError("begin_write called with unflushed changes in the session")
        session.commit()
    token = _immediate.set(True)
    try:
        return session.connection()
    finally:
        _immediate.reset(token)
