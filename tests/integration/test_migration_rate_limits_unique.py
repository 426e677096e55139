"""Migration 0024 (rate limits and unique runs) on both databases: up adds the columns and the
partial unique index that keeps one waiting or running execution per unique key; down removes
them and leaves the rows."""

from __future__ import annotations

import pytest
from sqlalchemy import exc, inspect, text

from tests.helpers import migrations
from tests.helpers.migrations import engine_for, flask_db

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend


def _columns(url: str, table: str) -> set[str]:
    engine = engine_for(url)
    try:
        return {column["name"] for column in inspect(engine).get_columns(table)}
    finally:
        engine.dispose()


def _execution(url: str, key: str, *, status: str, unique_key: str | None) -> None:
    engine = engine_for(url)
    try:
        with engine.begin() as conn:
            job = conn.execute(text("SELECT id FROM jobs ORDER BY id LIMIT 1")).scalar()
            conn.execute(
                text(
                    "INSERT INTO executions (job_id, scheduled_for, trigger, idempotency_key, status, attempts,"
                    " max_attempts, available_at, finished_at, output, error, unique_key, created_at, updated_at)"
                    " VALUES (:job, CURRENT_TIMESTAMP, 'manual', :key, :status, 0, 3, CURRENT_TIMESTAMP,"
                    " CASE WHEN :pending THEN NULL ELSE CURRENT_TIMESTAMP END, '', '', :unique_key,"
                    " CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                ),
                {"job": job, "key": key, "status": status, "pending": status == "pending", "unique_key": unique_key},
            )
    finally:
        engine.dispose()


def _job(url: str) -> None:
    engine = engine_for(url)
    try:
        with engine.begin() as conn:
            queue, project = conn.execute(text("SELECT id, project_id FROM queues ORDER BY id LIMIT 1")).one()
            conn.execute(
                text(
                    "INSERT INTO jobs (name, task, config, schedule_type, schedule, queue_id, project_id, created_at,"
                    " updated_at) VALUES ('j', 'always_succeed', '{}', 'interval', '{\"every\": \"5m\"}', :q, :p,"
                    " CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                ),
                {"q": queue, "p": project},
            )
    finally:
        engine.dispose()


def test_0024_adds_unique_keys_and_rate_limits_and_a_downgrade_removes_them(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0024")
    assert {"unique", "unique_key", "rate_limit", "rate_starts"} <= _columns(fresh_url, "jobs")
    assert {"rate_limit", "rate_starts"} <= _columns(fresh_url, "queues")
    _job(fresh_url)
    _execution(fresh_url, "a", status="pending", unique_key="job:1")
    _execution(fresh_url, "b", status="succeeded", unique_key="job:1")  # ended: holds nothing
    with pytest.raises(exc.IntegrityError):
        _execution(fresh_url, "c", status="pending", unique_key="job:1")

    flask_db(fresh_url, tmp_path, "downgrade", "0019")
    assert "unique_key" not in _columns(fresh_url, "executions")
    assert not {"unique", "rate_limit"} & _columns(fresh_url, "jobs")
    assert "rate_limit" not in _columns(fresh_url, "queues")
    engine = engine_for(fresh_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM executions")).scalar() == 2
    finally:
        engine.dispose()
