"""Ids are never handed out twice: a bookmark, a script's `flask job trigger 4` or an event's job_id
keeps naming the row it named, even after the newest row was deleted (SQLite reused max(id) + 1
before migration 0008 rebuilt the tables with AUTOINCREMENT)."""

from __future__ import annotations

import sqlite3

from sqlalchemy import delete

from app.extensions import db
from app.models import Alert, Execution, User
from app.services.use_cases import jobs
from tests.factories import make_alert, make_execution, make_job, utc
from tests.helpers.databases import app_env_for

NOW = utc(2026, 6, 1, 12)


def test_a_deleted_newest_job_id_is_not_given_to_the_next_job(app):
    make_job("first", now=NOW)
    newest = make_job("second", now=NOW)
    jobs.delete_job(newest.id, now=NOW, actor="test")
    assert make_job("third", now=NOW).id > newest.id


def test_execution_alert_and_user_ids_are_not_reused(app):
    job = make_job("job", now=NOW)
    execution = make_execution(job, "succeeded", now=NOW)
    alert = make_alert(job, message="broke", now=NOW)
    user = User(username="someone", password_hash="x", created_at=NOW)
    db.session.add(user)
    db.session.commit()
    old = {"execution": execution.id, "alert": alert.id, "user": user.id}

    for model, row_id in ((Alert, old["alert"]), (Execution, old["execution"]), (User, old["user"])):
        db.session.execute(delete(model).where(model.id == row_id))
    db.session.commit()

    assert make_execution(job, "succeeded", now=NOW).id > old["execution"]
    assert make_alert(job, message="again", now=NOW).id > old["alert"]
    again = User(username="someone-else", password_hash="x", created_at=NOW)
    db.session.add(again)
    db.session.commit()
    assert again.id > old["user"]


def _rows(path, sql):
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


def test_the_migration_keeps_an_existing_sqlite_file_from_reusing_ids(tmp_path):
    """An installation from before 0008: its tables get AUTOINCREMENT, rows and indexes survive,
    and ids the event log remembers (a job deleted earlier) are not handed out again."""
    from app import create_app

    path = tmp_path / "old.sqlite3"
    application = create_app({"TESTING": True}, env=app_env_for(f"sqlite:///{path}", tmp_path / "instance"))
    with application.app_context():
        runner = application.test_cli_runner()
        assert runner.invoke(args=["db", "upgrade", "0007"]).exit_code == 0
        before = _rows(path, "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        with sqlite3.connect(path) as conn:
            conn.execute(
                "INSERT INTO jobs (name, description, task, config, schedule_type, schedule, timezone, enabled,"
                " overlap_policy, misfire_policy, misfire_grace_seconds, max_attempts, retry_backoff_seconds,"
                " timeout_seconds, alert_mode, retention_count, retention_days, queue_id, priority, created_at,"
                " updated_at) VALUES ('kept', '', 'always_succeed', '{}', 'interval', '{\"every\": \"1m\"}', 'UTC',"
                " 1, 'skip', 'coalesce', 60, 3, 10, 30, 'web', 500, 30, 1, 0, '2026-06-01', '2026-06-01')"
            )
            # Job 7 existed once: it was deleted, the event log still names it.
            conn.execute(
                "INSERT INTO events (type, job_id, actor, payload, created_at)"
                " VALUES ('job_deleted', 7, 'test', '{}', '2026-06-01')"
            )
        assert runner.invoke(args=["db", "upgrade", "0008"]).exit_code == 0
        after = _rows(path, "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
        for table in ("jobs", "executions", "alerts", "users"):
            (sql,) = _rows(path, f"SELECT sql FROM sqlite_master WHERE type = 'table' AND name = '{table}'")[0]
            assert "AUTOINCREMENT" in sql, table
        # Every index is back exactly as it was (partial ones keep their WHERE).
        added = {"ix_executions_trigger_id", "ix_web_sessions_user_id"}  # the indexes 0008 adds
        assert sorted(row for row in after if row[0] not in added) == sorted(before)
        assert _rows(path, "SELECT id, name FROM jobs") == [(1, "kept")]
        # The counter starts past the id the event log remembers.
        assert _rows(path, "SELECT seq FROM sqlite_sequence WHERE name = 'jobs'") == [(7,)]
        assert runner.invoke(args=["db", "upgrade"]).exit_code == 0
        for table in ("jobs", "executions", "alerts", "users"):  # later rebuilds keep AUTOINCREMENT
            (sql,) = _rows(path, f"SELECT sql FROM sqlite_master WHERE type = 'table' AND name = '{table}'")[0]
            assert "AUTOINCREMENT" in sql, table
        # ... and the counter: a rebuild must not restart it at the highest id it copied (1).
        assert _rows(path, "SELECT seq FROM sqlite_sequence WHERE name = 'jobs'") == [(7,)]
        newest = make_job("new", now=NOW)
        assert newest.id == 8
        jobs.delete_job(newest.id, now=NOW, actor="test")
        assert make_job("newer", now=NOW).id == newest.id + 1
        db.engine.dispose()
