"""Migration 0019 (jobs as code) on both databases: jobs gain `managed_by`, NULL for the jobs that
existed; a downgrade drops it in place. On SQLite the jobs table is never rebuilt: it keeps its
AUTOINCREMENT (ids of deleted jobs are not handed out again) and `isolation` keeps its own column
check, so the older downgrades that drop that column still work."""

from __future__ import annotations

from sqlalchemy import inspect

from tests.helpers import migrations
from tests.helpers.migrations import engine_for, flask_db, rows

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend


def job_columns(url: str) -> set[str]:
    engine = engine_for(url)
    try:
        return {column["name"] for column in inspect(engine).get_columns("jobs")}
    finally:
        engine.dispose()


def jobs_table_sql(url: str) -> str:
    return rows(url, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'jobs'")[0][0]


def test_managed_by_added_and_dropped_without_rebuilding_jobs(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0018")
    migrations.seed_executions(fresh_url)  # a job (with executions) from before 0019
    before = rows(fresh_url, "SELECT id, name FROM jobs ORDER BY id")
    sqlite = fresh_url.startswith("sqlite")
    if sqlite:
        table_before = jobs_table_sql(fresh_url)
        assert "AUTOINCREMENT" in table_before

    flask_db(fresh_url, tmp_path, "upgrade", "0019")
    assert rows(fresh_url, "SELECT id, name, managed_by FROM jobs ORDER BY id") == [(*row, None) for row in before]

    flask_db(fresh_url, tmp_path, "downgrade", "0018")
    assert "managed_by" not in job_columns(fresh_url)
    assert rows(fresh_url, "SELECT id, name FROM jobs ORDER BY id") == before
    if sqlite:
        assert jobs_table_sql(fresh_url) == table_before  # in place: the same table, not a copy

    flask_db(fresh_url, tmp_path, "downgrade", "0012")  # 0013 drops the column its check names
    assert "isolation" not in job_columns(fresh_url)
    assert rows(fresh_url, "SELECT id, name FROM jobs ORDER BY id") == before
