"""Shared fixtures: apps on SQLite and on a real PostgreSQL database, clocks and factories.

Every test that asks for `app` runs twice, once per backend. Isolation:
- SQLite: each test gets a copy of a migrated template file (a template database).
- PostgreSQL: one database per test process (each pytest-xdist worker has its own), cloned from a
  template migrated once per run; tables are truncated around each test. Rollback isolation is not an option because the services commit, and the concurrency
  tests need committed rows visible to other processes.
When CI=true a PostgreSQL that cannot be reached fails the run instead of skipping it.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from filelock import FileLock
from flask import Flask
from jinja2.bccache import Bucket, BytecodeCache
from psycopg.types.json import Json
from sqlalchemy import text

from app import create_app
from tests.helpers.databases import IN_CI, PG_ADMIN_URL, app_env_for, migrate, pg_unreachable, require_postgres
from tests.helpers.processes import FlaskProcesses

_pg_tests_passed = 0


class _CompiledTemplates(BytecodeCache):
    """Jinja's compiled templates kept for the whole test process: every test makes its own app,
    and each app's Jinja environment would otherwise parse and compile every template it renders
    again (a fifth of a page test's time). Keyed by template and source checksum, as Jinja's own
    file cache is, so an edited template compiles afresh."""

    def __init__(self) -> None:
        self._code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        code = self._code.get(bucket.key)
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: Bucket) -> None:
        self._code[bucket.key] = bucket.bytecode_to_string()


Flask.jinja_options = {**Flask.jinja_options, "bytecode_cache": _CompiledTemplates()}
# Names this run's shared template database. The controller picks it when it loads this file, before
# xdist starts the workers, and they inherit it through the environment.
_RUN_ID = os.environ.setdefault("CRONWELL_TEST_RUN_ID", uuid.uuid4().hex[:12])
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")


def _drop_template() -> None:
    if pg_unreachable():
        return
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "cronwell_template_{_RUN_ID}" WITH (FORCE)')


def pytest_configure(config):
    config.addinivalue_line("markers", "postgres: needs a real PostgreSQL server")
    config.addinivalue_line("markers", "slow: takes more than a few seconds (real processes)")
    config.addinivalue_line("markers", "soak: long load runs, run by hand with -m soak")
    config.addinivalue_line("markers", "e2e: real browser end-to-end tests")


def pytest_collection_modifyitems(config, items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_postgres = callspec and callspec.params.get("backend") == "postgres"
        if on_postgres or "pg_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


def pytest_runtest_logreport(report):
    global _pg_tests_passed
    if report.when == "call" and report.passed and "postgres" in report.keywords:
        _pg_tests_passed += 1


def pytest_sessionfinish(session, exitstatus):
    if not _XDIST_WORKER:
        _drop_template()
    # A green CI run must mean the PostgreSQL suite ran, not that it was skipped. Under xdist the
    # controller sees every worker's reports, so the count is the whole run's.
    if IN_CI and session.testscollected and _pg_tests_passed == 0 and exitstatus == 0:
        print("\nCI=true but no PostgreSQL test passed: failing the run")
        session.exitstatus = 1


@pytest.fixture(scope="session")
def pg_template(tmp_path_factory) -> str:
    """The name of a migrated PostgreSQL database that test databases are cloned from.

    Under pytest-xdist the workers share one template per run: the first to take the lock migrates
    it, the rest wait and clone it, so the migration runs once however many workers there are.
    The controller drops it when the run ends (`pytest_sessionfinish`).
    """
    require_postgres()
    name = f"cronwell_template_{_RUN_ID}"
    shared = tmp_path_factory.getbasetemp().parent if _XDIST_WORKER else tmp_path_factory.getbasetemp()
    with FileLock(str(shared / f"{name}.lock")):
        done = shared / f"{name}.ready"
        if not done.exists():
            with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                conn.execute(f'CREATE DATABASE "{name}"')
            migrate(_pg_url_for(name), tmp_path_factory.mktemp("pg-template"))
            done.touch()
    return name


@pytest.fixture(scope="session")
def pg_url(pg_template):
    """A fresh, migrated PostgreSQL database for this test process (one per xdist worker)."""
    name = f"cronwell_test_{os.getpid()}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{pg_template}"')
    url = _pg_url_for(name)
    _snapshot_migrated_rows(url)
    yield url
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _pg_url_for(name: str) -> str:
    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    """A migrated SQLite file that each test copies."""
    directory = tmp_path_factory.mktemp("sqlite-template")
    path = directory / "template.sqlite3"
    migrate(f"sqlite:///{path}", directory)
    return path


# The rows migrations create in every installation (the default project and queue, ...), read once
# per database right after it is migrated; a truncated test database gets them back. Reading them
# instead of listing them keeps this file out of every issue that adds a table or a default row.
_migrated_rows: dict[str, list[tuple[str, list[str], list[tuple]]]] = {}


def _tables(conn) -> list[str]:
    rows = conn.execute(
        "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'alembic_version'"
        " ORDER BY tablename"
    ).fetchall()
    return [row[0] for row in rows]


def _snapshot_migrated_rows(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        snapshot = []
        for table in _tables(conn):
            cursor = conn.execute(f'SELECT * FROM "{table}"')
            # JSON values come back as Python objects; wrap them to go back in.
            rows = [tuple(Json(v) if isinstance(v, dict | list) else v for v in row) for row in cursor.fetchall()]
            if rows:
                snapshot.append((table, [column.name for column in cursor.description], rows))
        _migrated_rows[url] = snapshot


_TRUNCATE_FROM_BYTES = 1 << 20
_TABLE_SIZES = (
    "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
    " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')"
)


def truncate_all(url: str) -> None:
    """Back to the migrated rows: every table emptied, every id sequence restarted, the rows the
    migrations made put back, in one transaction. DELETE where a table is small: TRUNCATE gives
    each table new files and writes them out, about a second for the whole schema, which every
    test on PostgreSQL would pay, while the tables a test fills are mostly a few rows. A table a
    test filled past `_TRUNCATE_FROM_BYTES` is truncated (deleting it would be slower and leave
    its dead rows to the next tests' scans)."""
    with psycopg.connect(url) as conn:
        # Foreign keys and the reference triggers do not fire while the rows go and come back (the
        # rows were consistent when read).
        conn.execute("SET LOCAL session_replication_role = replica")
        sizes = dict(conn.execute(_TABLE_SIZES).fetchall())
        tables = _tables(conn)
        large = [table for table in tables if sizes.get(table, 0) >= _TRUNCATE_FROM_BYTES]
        if large:
            conn.execute("TRUNCATE " + ", ".join(f'"{table}"' for table in large) + " CASCADE")
        for table in tables:
            if table not in large:
                conn.execute(f'DELETE FROM "{table}"')
        conn.execute(
            "SELECT setval(s.oid::regclass, 1, false) FROM pg_class s"
            " JOIN pg_namespace n ON n.oid = s.relnamespace WHERE s.relkind = 'S' AND n.nspname = 'public'"
        )
        for table, columns, rows in _migrated_rows.get(url, []):
            names = ", ".join(f'"{column}"' for column in columns)
            marks = ", ".join(["%s"] * len(columns))
            with conn.cursor() as cursor:
                cursor.executemany(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', rows)
            if "id" in columns:
                conn.execute(
                    f"SELECT setval(pg_get_serial_sequence('\"{table}\"', 'id'), max(id)) FROM \"{table}\""
                    f" WHERE pg_get_serial_sequence('\"{table}\"', 'id') IS NOT NULL"
                )


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
