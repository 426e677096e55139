"""The worker parent's `Database` (app/sql/connections.py) on SQLite and PostgreSQL: its short
transactions (heartbeat, lease renewal, control check, about once a second) reuse one idle
connection instead of opening a new one each time, and a connection that failed is never reused."""

from __future__ import annotations

import pytest

from app.services.engine.runtime import WorkerRuntime


@pytest.fixture
def database(app):
    database = WorkerRuntime.from_app(app).database
    yield database
    database.close()


def _server_session(conn, dialect: str):
    cursor = conn.cursor()
    cursor.execute("SELECT pg_backend_pid()" if dialect == "postgresql" else "SELECT 1")
    return cursor.fetchone()[0]


def test_short_transactions_reuse_one_idle_connection(database):
    with database.reading() as first:
        session = _server_session(first, database.dialect)
    with database.write_transaction() as second:
        assert second is first
        assert _server_session(second, database.dialect) == session
        second.cursor().execute("UPDATE heartbeats SET pid = pid WHERE id = 'nobody'")
    with database.reading() as third:
        assert third is first


def test_two_at_once_get_two_connections_and_one_is_kept(database):
    with database.reading() as outer, database.reading() as inner:
        assert inner is not outer
    with database.reading() as again:
        assert again in (outer, inner)


def test_a_connection_that_failed_is_closed_not_reused(database):
    with pytest.raises(ZeroDivisionError), database.write_transaction() as broken:
        broken.cursor().execute("SELECT 1")
        raise ZeroDivisionError  # anything, mid-transaction
    with database.reading() as fresh:
        assert fresh is not broken
        assert _server_session(fresh, database.dialect)  # and it works


def test_close_drops_the_idle_connection(database):
    with database.reading() as kept:
        pass
    database.close()
    with database.reading() as fresh:
        assert fresh is not kept
