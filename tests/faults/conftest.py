"""Fixtures for the fault scenarios: a private PostgreSQL cluster for the whole session (with a
migrated template database, so each test gets a fresh database in a fraction of a second), a
private Redis per test, the app on the test's database, and `flask ...` subprocesses.

The shared PostgreSQL (5432) and Redis (6379) are never stopped or restarted: every outage in
this package happens to a server the test started itself.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from app import create_app
from tests.helpers.databases import app_env_for, migrate
from tests.helpers.hosts import Hosts
from tests.helpers.processes import FlaskProcesses
from tests.helpers.servers import PrivatePostgres, PrivateRedis

TEMPLATE = "cronwell_fault_template"
_databases = itertools.count(1)


@pytest.fixture(scope="session")
def private_pg(tmp_path_factory) -> Iterator[PrivatePostgres]:
    """A PostgreSQL cluster only this test session uses; tests may stop and restart it."""
    server = PrivatePostgres()
    try:
        server.start()
        server.create_database(TEMPLATE)
        migrate(server.url(TEMPLATE), tmp_path_factory.mktemp("fault-template"))
        yield server
    finally:
        server.destroy()


@pytest.fixture
def fault_db(private_pg) -> str:
    """A fresh migrated database on the private cluster (started again if a test left it down)."""
    if not private_pg.accepting():
        private_pg.start()
    return private_pg.create_database(f"cronwell_fault_{os.getpid()}_{next(_databases)}", template=TEMPLATE)


@pytest.fixture
def fault_env(fault_db, tmp_path) -> dict:
    """What the app and every subprocess of the scenario run with."""
    env = app_env_for(fault_db, tmp_path / "instance")
    env.update({"LOG_FORMAT": "json", "LOG_LEVEL": "INFO", "WORKER_SHUTDOWN_GRACE_SECONDS": "10"})
    return env


@pytest.fixture
def fault_app(fault_env):
    """The app on the scenario's database, for setting up jobs and checking the ledger."""
    application = create_app({"TESTING": True}, env={**fault_env, "LOG_LEVEL": "WARNING"})
    with application.app_context():
        yield application
        from app.extensions import db

        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def processes(fault_env, tmp_path) -> Iterator[FlaskProcesses]:
    """`flask ...` subprocesses on the scenario's database; all are killed at teardown."""
    started = FlaskProcesses(fault_env, tmp_path / "process-logs")
    try:
        yield started
    finally:
        started.cleanup()


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    try:
        server.start()
        yield server
    finally:
        server.destroy()


@pytest.fixture
def hosts(processes, fault_db) -> Iterator[Hosts]:
    """Simulated hosts, each reaching the scenario's database through its own loopback proxy."""
    made = Hosts(processes, fault_db)
    try:
        yield made
    finally:
        processes.cleanup()  # the processes first, so none reconnects through a stopped proxy
        made.close()
