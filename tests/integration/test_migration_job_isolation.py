"""Migration 0013 on both databases: every job gets `isolation`, 'process' for the jobs that
existed (they keep a fresh process per attempt), only 'process' or 'pool' accepted; downgrading
drops the column and upgrading again restores the default."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from app import create_app
from app.clock import utcnow
from tests.factories import make_job
from tests.helpers import migrations
from tests.helpers.databases import app_env_for
from tests.helpers.migrations import engine_for, flask_db, rows

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend


def job_columns(url: str) -> set[str]:
    engine = engine_for(url)
    try:
        return {column["name"] for column in inspect(engine).get_columns("jobs")}
    finally:
        engine.dispose()


def test_isolation_column_default_check_and_downgrade(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade")
    app = create_app(env=app_env_for(fresh_url, tmp_path))
    with app.app_context():
        from app.extensions import db

        existing = make_job("existing", now=utcnow()).id
        pooled = make_job("pooled", now=utcnow(), isolation="pool").id
        db.session.remove()
        db.engine.dispose()
    assert rows(fresh_url, "SELECT id, isolation FROM jobs ORDER BY id") == [(existing, "process"), (pooled, "pool")]

    engine = engine_for(fresh_url)
    with pytest.raises(IntegrityError):
        with engine.begin() as conn:
            conn.execute(text("UPDATE jobs SET isolation = 'thread' WHERE id = :id"), {"id": existing})
    engine.dispose()

    flask_db(fresh_url, tmp_path, "downgrade", "0012")
    assert "isolation" not in job_columns(fresh_url)
    assert [name for (name,) in rows(fresh_url, "SELECT name FROM jobs ORDER BY id")] == ["existing", "pooled"]

    flask_db(fresh_url, tmp_path, "upgrade")  # jobs from before 0013 run as they always did
    assert rows(fresh_url, "SELECT isolation FROM jobs ORDER BY id") == [("process",), ("process",)]
