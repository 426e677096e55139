"""Shared fixtures: apps on SQLite and on a real PostgreSQL database, clocks and factories.

Every test that asks for `app` runs twice, once per backend. Isolation:
- SQLite: each test gets a copy of a migrated template file (a template database).
- PostgreSQL: one database per test session, migrated once; tables are truncated around each
  test. Rollback isolation is not an option because the services commit, and the concurrency
  tests need committed rows visible to other processes.
When CI=true a PostgreSQL that cannot be reached fails the run instead of skipping it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text

from app import create_app
from tests.helpers.databases import IN_CI, PG_ADMIN_URL, app_env_for, migrate, require_postgres
from tests.helpers.processes import FlaskProcesses

TABLES = (
    "users, jobs, executions, attempts, dead_letters, alerts, events, heartbeats, worker_commands, queues, projects"
)
# What migration 0004 creates in every installation; a truncated test database gets it back.
DEFAULT_ROWS = (
    "INSERT INTO projects (name, description, created_at) VALUES ('default', '', now());"
    "INSERT INTO queues (project_id, name, description, priority, paused, slots_taken, created_at, updated_at)"
    " SELECT id, 'default', '', 0, false, 0, now(), now() FROM projects WHERE name = 'default'"
)

_pg_tests_passed = 0


def pytest_configure(config):
    config.addinivalue_line("markers", "postgres: needs a real PostgreSQL server")
    config.addinivalue_line("markers", "slow: takes more than a few seconds (real processes)")
    config.addinivalue_line("markers", "soak: long load runs, run by hand with -m soak")
    config.addinivalue_line("markers", "e2e: real browser end-to-end tests")


def pytest_collection_modifyitems(config, items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec and callspec.params.get("backend") == "postgres":
            item.add_marker(pytest.mark.postgres)


def pytest_runtest_logreport(report):
    global _pg_tests_passed
    if report.when == "call" and report.passed and "postgres" in report.keywords:
        _pg_tests_passed += 1


def pytest_sessionfinish(session, exitstatus):
    # A green CI run must mean the PostgreSQL suite ran, not that it was skipped.
    if IN_CI and session.testscollected and _pg_tests_passed == 0 and exitstatus == 0:
        print("\nCI=true but no PostgreSQL test passed: failing the run")
        session.exitstatus = 1


@pytest.fixture(scope="session")
def pg_url(tmp_path_factory):
    """A fresh, migrated PostgreSQL database for this test session."""
    require_postgres()
    name = f"cronwell_test_{os.getpid()}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    migrate(url, tmp_path_factory.mktemp("pg-instance"))
    yield url
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    """A migrated SQLite file that each test copies."""
    directory = tmp_path_factory.mktemp("sqlite-template")
    path = directory / "template.sqlite3"
    migrate(f"sqlite:///{path}", directory)
    return path


def truncate_all(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
        for statement in DEFAULT_ROWS.split(";"):
            conn.execute(statement)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request) -> str:
    return request.param


@pytest.fixture
def database_url(backend, request, tmp_path) -> str:
    if backend == "postgres":
        url = request.getfixturevalue("pg_url")
        truncate_all(url)
        return url
    template = request.getfixturevalue("sqlite_template")
    path = tmp_path / "cronwell.sqlite3"
    shutil.copyfile(template, path)
    return f"sqlite:///{path}"


@pytest.fixture
def app_env(database_url, tmp_path) -> dict:
    """The environment the app (and any subprocess we start) runs with."""
    return app_env_for(database_url, tmp_path / "instance")


@pytest.fixture
def app(app_env):
    application = create_app({"TESTING": True}, env=app_env)
    with application.app_context():
        yield application
        from app.extensions import db

        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def pg_backend():
    return "postgres"


@pytest.fixture
def pg_app(pg_url, tmp_path):
    """An app on PostgreSQL only, for tests whose point is PostgreSQL behaviour."""
    truncate_all(pg_url)
    application = create_app({"TESTING": True}, env=app_env_for(pg_url, tmp_path / "instance"))
    with application.app_context():
        yield application
        from app.extensions import db

        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def db(app):
    from app.extensions import db as database

    return database


class FakeClock:
    """An injectable clock that only moves when a test moves it."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta) -> datetime:
        from datetime import timedelta

        self.now = self.now + timedelta(**delta)
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC))


@pytest.fixture
def sql(db):
    """Run a raw SQL statement and return rows; for assertions that look under the ORM."""

    def run(statement: str, **params):
        return db.session.execute(text(statement), params).fetchall()

    return run


@pytest.fixture
def flask_processes(app_env, tmp_path) -> Iterator[FlaskProcesses]:
    """Start `flask ...` subprocesses against the test app's database; all are killed at teardown."""
    processes = FlaskProcesses(app_env, tmp_path / "process-logs")
    try:
        yield processes
    finally:
        processes.cleanup()
