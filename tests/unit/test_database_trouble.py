"""Which errors the worker backs off and retries for (the database is down, restarting,
overloaded or not migrated yet) and which stop it (everything else)."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from psycopg import errors as pg_errors
from sqlalchemy import exc as sa_exc

from app.sql.connections import is_database_trouble


@pytest.mark.parametrize(
    "error",
    [
        sqlite3.OperationalError("database is locked"),
        sqlite3.OperationalError("no such table: executions"),
        psycopg.OperationalError("server closed the connection unexpectedly"),
        psycopg.InterfaceError("the connection is closed"),
        pg_errors.AdminShutdown("terminating connection due to administrator command"),
        pg_errors.TooManyConnections("sorry, too many clients already"),
        pg_errors.SerializationFailure("could not serialize access"),
        pg_errors.UndefinedTable('relation "executions" does not exist'),
        ConnectionResetError("reset by peer"),
        sa_exc.OperationalError("COMMIT", {}, Exception("server closed the connection unexpectedly")),
        sa_exc.ProgrammingError("SELECT", {}, pg_errors.UndefinedTable("no executions")),
    ],
    ids=lambda error: type(error).__name__,
)
def test_outages_and_a_missing_schema_are_database_trouble(error):
    assert is_database_trouble(error)


@pytest.mark.parametrize(
    "error",
    [
        AttributeError("'ForkServer' object has no attribute 'submit_within'"),
        KeyError("execution_id"),
        TypeError("unsupported operand"),
        pg_errors.UniqueViolation("duplicate key value"),
        pg_errors.UndefinedColumn('column "isolation" does not exist'),
        pg_errors.SyntaxError("syntax error at or near"),
        sa_exc.IntegrityError("INSERT", {}, pg_errors.UniqueViolation("duplicate key value")),
        sqlite3.IntegrityError("UNIQUE constraint failed"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_bugs_and_violated_constraints_are_not(error):
    assert not is_database_trouble(error)
