"""Migration 0021 on both databases: executions may have no job (a one-off run, with its task and
project, held by the `job_or_task` CHECK); downgrading deletes the one-off runs and keeps jobs'
executions, and upgrading again restores the columns."""

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


def execution_columns(url: str) -> set[str]:
    engine = engine_for(url)
    try:
        return {column["name"] for column in inspect(engine).get_columns("executions")}
    finally:
        engine.dispose()


def test_one_off_columns_check_and_downgrade(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade")
    app = create_app(env=app_env_for(fresh_url, tmp_path))
    with app.app_context():
        from app.extensions import db
        from app.services.use_cases import one_off_runs, runs

        job_id = make_job("kept", now=utcnow(), task="echo").id
        of_job = runs.trigger_run(job_id, {}, now=utcnow(), actor="test").id
        one_off = one_off_runs.create_run({"task": "echo"}, now=utcnow(), actor="test").execution.id
        db.session.remove()
        db.engine.dispose()
    assert rows(fresh_url, "SELECT id, job_id, task FROM executions ORDER BY id") == [
        (of_job, job_id, None),
        (one_off, None, "echo"),
    ]
    engine = engine_for(fresh_url)
    with pytest.raises(IntegrityError):  # no job and no task: neither kind of row
        with engine.begin() as conn:
            conn.execute(text("UPDATE executions SET task = NULL WHERE id = :id"), {"id": one_off})
    engine.dispose()

    flask_db(fresh_url, tmp_path, "downgrade", "0019")
    assert {"task", "project_id", "timeout_seconds"}.isdisjoint(execution_columns(fresh_url))
    assert rows(fresh_url, "SELECT id FROM executions ORDER BY id") == [(of_job,)]

    flask_db(fresh_url, tmp_path, "upgrade")
    assert {"task", "project_id", "timeout_seconds", "queued_ttl_seconds"} <= execution_columns(fresh_url)
