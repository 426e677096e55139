"""Migration 0023 (notification routing) on both databases: up, the new tables and columns with
their defaults and checks; down, back to 0019 with channels and their alert deliveries kept."""

from __future__ import annotations

import pytest
from sqlalchemy import exc, text

from tests.helpers import migrations
from tests.helpers.migrations import engine_for, flask_db, rows

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend


def _execute(url: str, sql: str, **params) -> None:
    engine = engine_for(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql), params)
    finally:
        engine.dispose()


CHANNEL = (
    "INSERT INTO alert_channels (project_id, name, kind, target, kinds, enabled, created_at, updated_at) "
    "VALUES ((SELECT id FROM projects ORDER BY id LIMIT 1), :name, 'webhook', 'https://hooks.example.com/x', "
    "'[]', true, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
)


def test_0023_adds_routing_and_a_downgrade_takes_it_away(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0019")
    _execute(fresh_url, CHANNEL, name="before")
    flask_db(fresh_url, tmp_path, "upgrade", "0023")
    assert rows(fresh_url, "SELECT name, group_seconds, quiet_start FROM alert_channels") == [("before", 600, None)]
    with pytest.raises(exc.IntegrityError):  # a quiet window needs both ends
        _execute(fresh_url, "UPDATE alert_channels SET quiet_start = '22:00'")
    _execute(
        fresh_url,
        "INSERT INTO notification_routes (project_id, job_id, events, channel_ids, updated_by, updated_at) "
        "VALUES ((SELECT id FROM projects ORDER BY id LIMIT 1), NULL, '[\"failure\"]', NULL, 't', CURRENT_TIMESTAMP)",
    )
    with pytest.raises(exc.IntegrityError):  # one default per project
        _execute(
            fresh_url,
            "INSERT INTO notification_routes (project_id, job_id, events, channel_ids, updated_by, updated_at) "
            "VALUES ((SELECT id FROM projects ORDER BY id LIMIT 1), NULL, '[]', NULL, 't', CURRENT_TIMESTAMP)",
        )
    _execute(
        fresh_url,
        "INSERT INTO notices (event, message, dedup_key, details, created_at) "
        "VALUES ('failure', 'x', 'failure:execution:1', '{}', CURRENT_TIMESTAMP)",
    )
    with pytest.raises(exc.IntegrityError):  # a run is noticed once
        _execute(
            fresh_url,
            "INSERT INTO notices (event, message, dedup_key, details, created_at) "
            "VALUES ('failure', 'y', 'failure:execution:1', '{}', CURRENT_TIMESTAMP)",
        )

    flask_db(fresh_url, tmp_path, "downgrade", "0019")
    assert rows(fresh_url, "SELECT name FROM alert_channels") == [("before",)]
    engine = engine_for(fresh_url)
    try:
        from sqlalchemy import inspect

        tables = set(inspect(engine).get_table_names())
        columns = {c["name"] for c in inspect(engine).get_columns("alert_deliveries")}
    finally:
        engine.dispose()
    assert not {"notification_routes", "notices", "job_notify_state", "notice_cursors"} & tables
    assert "group_key" not in columns
    flask_db(fresh_url, tmp_path, "upgrade", "0023")  # and up again
