"""Migration 0015 on both databases: the index the retention pass deletes expired web sessions
through, and the (id, created_at) index the executions list reads a date range from; a downgrade
takes both away again."""

from __future__ import annotations

from sqlalchemy import inspect

from tests.helpers import migrations
from tests.helpers.migrations import engine_for, flask_db

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend


def _indexes(url: str, table: str) -> dict[str, list[str]]:
    engine = engine_for(url)
    try:
        return {index["name"]: index["column_names"] for index in inspect(engine).get_indexes(table)}
    finally:
        engine.dispose()


def test_0015_adds_the_session_age_and_date_range_indexes_and_takes_them_back(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0014")
    assert "ix_web_sessions_created_at" not in _indexes(fresh_url, "web_sessions")
    assert "ix_executions_id_created" not in _indexes(fresh_url, "executions")

    flask_db(fresh_url, tmp_path, "upgrade", "0015")
    assert _indexes(fresh_url, "web_sessions")["ix_web_sessions_created_at"] == ["created_at"]
    assert _indexes(fresh_url, "executions")["ix_executions_id_created"] == ["id", "created_at"]

    flask_db(fresh_url, tmp_path, "downgrade", "0014")
    assert "ix_web_sessions_created_at" not in _indexes(fresh_url, "web_sessions")
    assert "ix_executions_id_created" not in _indexes(fresh_url, "executions")
