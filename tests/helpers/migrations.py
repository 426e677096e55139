"""Helpers for migration tests: a fresh empty database on each backend, `flask db` against it,
and plain SQL reads (the models describe the newest schema, not the one being migrated)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, text

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


def flask_db(url: str, instance: Path, *args: str) -> None:
    """Run `flask db ARGS` against the database at `url`; fail the test if it fails."""
    app = create_app(env=app_env_for(url, instance))
    with app.app_context():
        result = app.test_cli_runner().invoke(args=["db", *args])
        assert result.exit_code == 0, f"flask db {' '.join(args)}:\n{result.output}\n{result.exception!r}"
        from app.extensions import db

        db.engine.dispose()


def engine_for(url: str):
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


def rows(url: str, sql: str, params: dict | None = None) -> list[tuple]:
    """Every row `sql` returns, as tuples."""
    engine = engine_for(url)
    with engine.connect() as conn:
        found = [tuple(row) for row in conn.execute(text(sql), params or {})]
    engine.dispose()
    return found
