"""Migration 0018 (channels) on both databases: the channel kind check takes `slack` and `teams`; a
downgrade removes those channels (and their deliveries) and restores the old check."""

from __future__ import annotations

import pytest
from sqlalchemy import exc, text

from tests.helpers import migrations
from tests.helpers.migrations import engine_for, flask_db, rows

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend


def _add_channel(url: str, name: str, kind: str) -> None:
    engine = engine_for(url)
    try:
        with engine.begin() as conn:
            project = conn.execute(text("SELECT id FROM projects ORDER BY id LIMIT 1")).scalar()
            conn.execute(
                text(
                    "INSERT INTO alert_channels (project_id, name, kind, target, kinds, enabled, created_at, updated_at) "
                    "VALUES (:project, :name, :kind, 'https://hooks.example.com/x', '[]', true, "
                    "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                ),
                {"project": project, "name": name, "kind": kind},
            )
    finally:
        engine.dispose()


def test_0018_channels_admits_slack_and_teams_and_a_downgrade_takes_them_away(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0017")
    with pytest.raises(exc.IntegrityError):
        _add_channel(fresh_url, "early", "slack")

    flask_db(fresh_url, tmp_path, "upgrade", "0018")
    for kind in ("webhook", "slack", "teams"):
        _add_channel(fresh_url, kind, kind)
    with pytest.raises(exc.IntegrityError):
        _add_channel(fresh_url, "pager", "pager")

    flask_db(fresh_url, tmp_path, "downgrade", "0017")
    assert rows(fresh_url, "SELECT name FROM alert_channels ORDER BY name") == [("webhook",)]
    with pytest.raises(exc.IntegrityError):
        _add_channel(fresh_url, "late", "teams")


def test_0018_keeps_channel_ids_unique_on_sqlite(tmp_path):
    """The rebuild that changes the check keeps AUTOINCREMENT and its counter, both ways: a deleted
    channel's id is never handed to a new one."""
    url = f"sqlite:///{tmp_path / 'channels.sqlite3'}"
    flask_db(url, tmp_path, "upgrade", "0017")
    _add_channel(url, "first", "webhook")
    _add_channel(url, "second", "webhook")
    engine = engine_for(url)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM alert_channels WHERE name = 'second'"))
    engine.dispose()

    for revision in ("0018", "0017"):
        flask_db(url, tmp_path, "upgrade" if revision == "0018" else "downgrade", revision)
        (sql,) = rows(url, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'alert_channels'")[0]
        assert "AUTOINCREMENT" in sql
        _add_channel(url, f"after {revision}", "webhook")
    assert rows(url, "SELECT id, name FROM alert_channels ORDER BY id") == [
        (1, "first"),
        (3, "after 0018"),
        (4, "after 0017"),
    ]
