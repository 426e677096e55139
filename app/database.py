"""Engine-level database behaviour that must hold for every process.

SQLite (the embedded default) runs in WAL mode so the web UI can read while the scheduler and
worker write, with a busy timeout so writers queue on the lock instead of failing at once.
Writes that must not interleave use BEGIN IMMEDIATE (see `immediate_transaction`).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from flask import Flask
from sqlalchemy import Engine, event
from sqlalchemy.engine import Connection

SQLITE_BUSY_TIMEOUT_MS = 30_000


def init_app(app: Flask) -> None:
    from app.extensions import db

    with app.app_context():
        configure_engine(db.engine)


def configure_engine(engine: Engine) -> None:
    """Install SQLite pragmas and manual transaction control; no-op for PostgreSQL."""
    if engine.dialect.name != "sqlite" or getattr(engine, "_cronwell_configured", False):
        return
    engine._cronwell_configured = True  # type: ignore[attr-defined]

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        # Take over transaction control from pysqlite so BEGIN IMMEDIATE works as written.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection):
        mode = conn.info.pop("sqlite_begin", "BEGIN")
        conn.exec_driver_sql(mode)


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


@contextmanager
def immediate_transaction(engine: Engine) -> Iterator[Connection]:
    """A write transaction. On SQLite it takes the write lock up front (BEGIN IMMEDIATE), which
    serialises claims and ticks across processes; on PostgreSQL it is an ordinary transaction
    whose row locks (FOR UPDATE SKIP LOCKED) do the work."""
    with engine.connect() as conn:
        if is_sqlite(engine):
            conn.info["sqlite_begin"] = "BEGIN IMMEDIATE"
        with conn.begin():
            yield conn
