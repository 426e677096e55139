"""Migration 0022 on both databases: users get a display time zone (UTC for those already there),
and the event log's `(type, id)` and `(job_id, id)` indexes replace the `job_id` one; a
downgrade puts the old shape back."""

from __future__ import annotations

from tests.helpers import migrations
from tests.helpers.migrations import columns_and_indexes, engine_for, flask_db, rows

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend


def test_0022_adds_the_time_zone_and_the_event_indexes_and_takes_them_back(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0019")
    engine = engine_for(fresh_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO users (username, password_hash, active, superuser, created_at) "
            "VALUES ('kept', 'x', true, false, '2026-06-01 00:00:00')"
        )
    engine.dispose()
    columns, indexes = columns_and_indexes(fresh_url, "users", "events")
    assert "time_zone" not in columns and indexes["ix_events_job_id"] == ["job_id"]

    flask_db(fresh_url, tmp_path, "upgrade", "0022")
    columns, indexes = columns_and_indexes(fresh_url, "users", "events")
    assert "time_zone" in columns
    assert rows(fresh_url, "SELECT time_zone FROM users WHERE username = 'kept'") == [("UTC",)]
    assert indexes["ix_events_type_id"] == ["type", "id"] and indexes["ix_events_job_id_id"] == ["job_id", "id"]
    assert indexes["ix_events_job_id_type_id"] == ["job_id", "type", "id"]
    assert "ix_events_job_id" not in indexes

    flask_db(fresh_url, tmp_path, "downgrade", "0019")
    columns, indexes = columns_and_indexes(fresh_url, "users", "events")
    assert "time_zone" not in columns and indexes["ix_events_job_id"] == ["job_id"]
    assert "ix_events_type_id" not in indexes
