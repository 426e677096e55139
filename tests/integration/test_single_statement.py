"""`single_statement_on`: one statement in autocommit on a PostgreSQL connection the caller keeps.

The worker keeps one connection for its whole life and runs most turns through this, so what a
turn leaves behind on that connection is kept until the worker exits. Real PostgreSQL: the point
is the connection's state between turns.
"""

from __future__ import annotations

import pytest
from psycopg.pq import TransactionStatus
from sqlalchemy import text

from app.database import single_statement_on

TURNS = 50


def _server_status(conn) -> TransactionStatus:
    return conn.connection.dbapi_connection.info.transaction_status


def test_each_statement_commits_alone_and_the_connection_goes_back_to_transactions(pg_app):
    from app.extensions import db

    with db.engine.connect() as conn:
        for _ in range(3):
            with single_statement_on(conn):
                conn.execute(text("SELECT 1"))
                assert _server_status(conn) == TransactionStatus.IDLE  # no BEGIN was sent
            conn.execute(text("SELECT 1"))
            assert _server_status(conn) == TransactionStatus.INTRANS
            conn.rollback()


def test_a_failed_statement_also_gives_the_connection_back_in_transactions(pg_app):
    from app.extensions import db

    with db.engine.connect() as conn:
        with pytest.raises(Exception, match="division by zero"), single_statement_on(conn):
            conn.execute(text("SELECT 1 / 0"))
        conn.execute(text("SELECT 1"))
        assert _server_status(conn) == TransactionStatus.INTRANS
        conn.rollback()


def test_turns_leave_nothing_on_the_kept_connection(pg_app):
    """Setting the isolation level through `Connection.execution_options` registered a reset
    with the pool on every call, kept until the connection is returned: a worker's parent grew
    by about 0.4 KB per execution for as long as it ran."""
    from app.extensions import db

    with db.engine.connect() as conn:
        conn.execute(text("SELECT 1"))
        conn.rollback()
        resets = conn.connection._connection_record.finalize_callback  # what the pool runs on return
        before = len(resets)
        for _ in range(TURNS):
            with single_statement_on(conn):
                conn.execute(text("SELECT 1"))
        assert len(resets) == before
