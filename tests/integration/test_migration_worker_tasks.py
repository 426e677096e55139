"""Migration 0025 (worker tasks) on both databases: heartbeats get the `tasks` a worker advertises
and worker commands may be `reload`; a downgrade drops the reload orders, the column and the
new check, and the whole chain still goes down to base."""

from __future__ import annotations

import pytest
from sqlalchemy import exc, inspect, text

from tests.helpers import migrations
from tests.helpers.migrations import engine_for, flask_db, rows

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend


def _order(url: str, command: str) -> None:
    engine = engine_for(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO worker_commands (worker_id, command, issued_by, issued_at)"
                    " VALUES ('w-1', :command, 'test', CURRENT_TIMESTAMP)"
                ),
                {"command": command},
            )
    finally:
        engine.dispose()


def _columns(url: str, table: str) -> set[str]:
    engine = engine_for(url)
    try:
        return {column["name"] for column in inspect(engine).get_columns(table)}
    finally:
        engine.dispose()


def test_0025_adds_advertised_tasks_and_reload_orders_and_a_downgrade_takes_them_away(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0024")
    with pytest.raises(exc.IntegrityError):
        _order(fresh_url, "reload")
    _order(fresh_url, "drain")

    flask_db(fresh_url, tmp_path, "upgrade", "0025")
    assert "tasks" in _columns(fresh_url, "heartbeats")
    _order(fresh_url, "reload")
    with pytest.raises(exc.IntegrityError):
        _order(fresh_url, "restart")
    assert [c for _, c in rows(fresh_url, "SELECT id, command FROM worker_commands ORDER BY id")] == ["drain", "reload"]
    [(reload_id,)] = rows(fresh_url, "SELECT id FROM worker_commands WHERE command = 'reload'")

    flask_db(fresh_url, tmp_path, "downgrade", "0024")
    assert "tasks" not in _columns(fresh_url, "heartbeats")
    assert [c for _, c in rows(fresh_url, "SELECT id, command FROM worker_commands ORDER BY id")] == ["drain"]
    with pytest.raises(exc.IntegrityError):
        _order(fresh_url, "reload")
    _order(fresh_url, "stop")
    [(stop_id,)] = rows(fresh_url, "SELECT id FROM worker_commands WHERE command = 'stop'")
    assert stop_id > reload_id  # the rebuilt table's counter went on: no id handed out twice

    flask_db(fresh_url, tmp_path, "upgrade", "head")
    flask_db(fresh_url, tmp_path, "downgrade", "base")
