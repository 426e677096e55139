"""Migration 0004 on both databases: an installation whose jobs and executions name queues by
string gets one queue row per name in the default project, and every row points at its queue by
key; downgrading gives the strings back."""

from __future__ import annotations

from sqlalchemy import text

from tests.helpers import migrations
from tests.helpers.migrations import engine_for, flask_db

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend

NOW = "2026-06-01 12:00:00"


def seed_old_schema(url: str) -> None:
    """Jobs in queues 'default' and 'reports' (strings, as before 0004) with executions."""
    engine = engine_for(url)
    with engine.begin() as conn:
        for job_id, name, queue in ((1, "a", "default"), (2, "b", "reports"), (3, "c", "reports")):
            conn.execute(
                text(
                    "INSERT INTO jobs (id, name, description, task, config, schedule_type, schedule, timezone, enabled,"
                    " overlap_policy, misfire_policy, misfire_grace_seconds, max_attempts, retry_backoff_seconds,"
                    " timeout_seconds, alert_mode, retention_count, retention_days, queue, priority, created_at,"
                    " updated_at) VALUES (:id, :name, '', 'always_succeed', '{}', 'interval', '{\"every\": \"1m\"}',"
                    " 'UTC', true, 'skip', 'coalesce', 60, 3, 10, 30, 'web', 500, 30, :queue, 0, :now, :now)"
                ),
                {"id": job_id, "name": name, "queue": queue, "now": NOW},
            )
        for execution_id, job_id, queue, status in (
            (1, 1, "default", "pending"),
            (2, 2, "reports", "succeeded"),
            (3, 3, "legacy", "pending"),
        ):
            conn.execute(
                text(
                    "INSERT INTO executions (id, job_id, scheduled_for, trigger, idempotency_key, status, attempts,"
                    " max_attempts, queue, priority, exclusive, available_at, finished_at, output, error, created_at,"
                    " updated_at) VALUES (:id, :job, :now, 'manual', :key, :status, :attempts, 3, :queue, 0, true, :now,"
                    " :finished, '', '', :now, :now)"
                ),
                {
                    "id": execution_id,
                    "job": job_id,
                    "key": f"k{execution_id}",
                    "status": status,
                    "attempts": 1 if status == "succeeded" else 0,
                    "queue": queue,
                    "now": NOW,
                    "finished": NOW if status == "succeeded" else None,
                },
            )
    engine.dispose()


def rows(url: str, sql: str) -> list[tuple]:
    engine = engine_for(url)
    with engine.connect() as conn:
        found = [tuple(row) for row in conn.execute(text(sql))]
    engine.dispose()
    return found


def test_queue_strings_become_queue_rows_and_back(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0003")
    seed_old_schema(fresh_url)
    flask_db(fresh_url, tmp_path, "upgrade")

    assert rows(fresh_url, "SELECT name FROM projects") == [("default",)]
    queues = dict(rows(fresh_url, "SELECT name, id FROM queues"))
    assert sorted(queues) == ["default", "legacy", "reports"]  # every name in use, plus default
    assert rows(fresh_url, "SELECT id, queue_id FROM jobs ORDER BY id") == [
        (1, queues["default"]),
        (2, queues["reports"]),
        (3, queues["reports"]),
    ]
    assert rows(fresh_url, "SELECT id, queue_id FROM executions ORDER BY id") == [
        (1, queues["default"]),
        (2, queues["reports"]),
        (3, queues["legacy"]),
    ]
    assert rows(fresh_url, "SELECT count(*) FROM queues WHERE paused OR concurrency_limit IS NOT NULL") == [(0,)]

    flask_db(fresh_url, tmp_path, "downgrade", "0003")
    assert rows(fresh_url, "SELECT id, queue FROM jobs ORDER BY id") == [(1, "default"), (2, "reports"), (3, "reports")]
    assert rows(fresh_url, "SELECT id, queue FROM executions ORDER BY id") == [
        (1, "default"),
        (2, "reports"),
        (3, "legacy"),
    ]
