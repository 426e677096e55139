"""Helpers for migration tests: a fresh empty database on each backend, `flask db` against it,
and plain SQL reads (the models describe the newest schema, not the one being migrated)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, inspect, text

from app import create_app
from tests.helpers.databases import app_env_for
from tests.helpers.pg import plain_url


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_url(request, tmp_path):
    """The URL of an empty database (no revision applied), on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.sqlite3'}"
        return
    admin = request.getfixturevalue("pg_url")
    name = f"cronwell_migration_{tmp_path.name[-20:]}".replace("-", "_").lower()
    base = plain_url(admin).rsplit("/", 1)[0]
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield admin.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def flask_db(url: str, instance: Path, *args: str) -> str:
    """Run `flask db ARGS` against the database at `url`; fail the test if it fails. Returns what
    it wrote (stdout and stderr)."""
    app = create_app(env=app_env_for(url, instance))
    with app.app_context():
        result = app.test_cli_runner().invoke(args=["db", *args])
        assert result.exit_code == 0, f"flask db {' '.join(args)}:\n{result.output}\n{result.exception!r}"
        from app.extensions import db

        db.engine.dispose()
    return result.output


def engine_for(url: str):
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


def columns_and_indexes(url: str, columns_of: str, indexes_of: str) -> tuple[set[str], dict[str, list[str]]]:
    """The column names of table `columns_of`, and the indexes of `indexes_of` with their columns."""
    engine = engine_for(url)
    try:
        found = inspect(engine)
        columns = {column["name"] for column in found.get_columns(columns_of)}
        return columns, {index["name"]: index["column_names"] for index in found.get_indexes(indexes_of)}
    finally:
        engine.dispose()


def rows(url: str, sql: str, params: dict | None = None) -> list[tuple]:
    """Every row `sql` returns, as tuples."""
    engine = engine_for(url)
    with engine.connect() as conn:
        found = [tuple(row) for row in conn.execute(text(sql), params or {})]
    engine.dispose()
    return found


def seed_executions(url: str) -> None:
    """Three executions of one job in the default queue (two scheduled, one manual), at 0013."""
    from sqlalchemy import text

    engine = engine_for(url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO jobs (name, description, task, config, schedule_type, schedule, timezone, enabled,"
                " overlap_policy, misfire_policy, misfire_grace_seconds, max_attempts, retry_backoff_seconds,"
                " timeout_seconds, alert_mode, retention_count, retention_days, queue_id, priority, created_at,"
                " updated_at, project_id) SELECT 'nightly', '', 'always_succeed', '{}', 'interval', '{\"every\": \"1m\"}',"
                " 'UTC', true, 'skip', 'coalesce', 60, 3, 10, 30, 'web', 0, 0, q.id, 0, :now, :now, q.project_id"
                " FROM queues AS q WHERE q.id = 1"
            ),
            {"now": "2026-06-01 12:00:00"},
        )
        for n, trigger in enumerate(("schedule", "schedule", "manual")):
            conn.execute(
                text(
                    "INSERT INTO executions (job_id, scheduled_for, trigger, idempotency_key, status, attempts,"
                    " max_attempts, queue_id, priority, exclusive, available_at, output, error, created_at,"
                    " updated_at) SELECT id, :at, :trigger, :key, 'pending', 0, 3, 1, 0, false, :at, '', '', :at, :at"
                    " FROM jobs WHERE name = 'nightly'"
                ),
                {"at": f"2026-06-01 12:0{n}:00", "trigger": trigger, "key": f"k{n}"},
            )
    engine.dispose()
