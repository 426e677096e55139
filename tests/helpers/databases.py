"""Where the test databases come from: the shared PostgreSQL server, the environment an app under
test runs with, and the migration every test database gets (`flask db upgrade`).

The fixtures in tests/conftest.py and tests/faults/conftest.py build on these; tests that start
their own processes import them directly.
"""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest

from app import create_app

PG_ADMIN_URL = os.environ.get("CRONWELL_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
IN_CI = os.environ.get("CI", "").lower() == "true"
# The Fernet key alert channels are sealed with under test (DEBUG=0 needs one, as in production).
CHANNEL_SECRET_KEY = "0uJ8O41ZQsHRbSvIeuy3RtEK6n_TYRiokR1GZI3p3_Y="


def pg_unreachable() -> str | None:
    """Why the shared PostgreSQL cannot be used, or None when it answers."""
    try:
        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return None
    except Exception as exc:  # noqa: BLE001 - any failure means unreachable
        return f"PostgreSQL unreachable at {PG_ADMIN_URL}: {exc}"


def require_postgres() -> None:
    """Skip the test when PostgreSQL is unreachable; fail it under CI=true."""
    problem = pg_unreachable()
    if problem:
        if IN_CI:
            pytest.fail(problem + " (CI=true: PostgreSQL tests must run)")
        pytest.skip(problem)


def app_env_for(url: str, instance_dir: Path) -> dict:
    """The environment an app under test (and any `flask ...` process it starts) runs with."""
    return {
        "DATABASE_URL": url,
        "INSTANCE_DIR": str(instance_dir),
        "LOG_FORMAT": "text",
        "LOG_LEVEL": "WARNING",
        "DEBUG": "0",
        "SECRET_KEY": "test-secret-key",
        "CHANNEL_SECRET_KEY": CHANNEL_SECRET_KEY,
    }


def migrate(url: str, instance_dir: Path) -> None:
    """Bring the database at `url` to the newest schema through `flask db upgrade` itself."""
    app = create_app(env=app_env_for(url, instance_dir))
    with app.app_context():
        result = app.test_cli_runner().invoke(args=["db", "upgrade"])
        assert result.exit_code == 0, f"flask db upgrade failed:\n{result.output}\n{result.exception!r}"
        from app.extensions import db

        db.engine.dispose()
