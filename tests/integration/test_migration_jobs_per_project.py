"""Migration 0012 on both databases: every existing job gets its queue's project, names become
unique per project (two organizations may both have `nightly`), and the downgrade restores the
site-wide rule, refusing clearly while two projects share a name."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from app import create_app
from tests.helpers import migrations
from tests.helpers.databases import app_env_for
from tests.helpers.migrations import engine_for, flask_db, rows

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend

NOW = "2026-06-01 12:00:00"

INSERT_JOB = (
    "INSERT INTO jobs (id, name, description, task, config, schedule_type, schedule, timezone, enabled,"
    " overlap_policy, misfire_policy, misfire_grace_seconds, max_attempts, retry_backoff_seconds,"
    " timeout_seconds, alert_mode, retention_count, retention_days, queue_id, priority, created_at,"
    " updated_at{extra_columns}) SELECT :id, :name, '', 'always_succeed', '{{}}', 'interval', '{{\"every\": \"1m\"}}',"
    " 'UTC', true, 'skip', 'coalesce', 60, 3, 10, 30, 'web', 500, 30, q.id, 0, :now, :now{extra_values}"
    " FROM queues AS q JOIN projects AS p ON p.id = q.project_id JOIN organizations AS o"
    " ON o.id = p.organization_id WHERE o.name = :org AND q.name = :queue"
)


def insert_job(conn, job_id: int, name: str, org: str, queue: str = "default", *, with_project: bool = False):
    sql = INSERT_JOB.format(
        extra_columns=", project_id" if with_project else "", extra_values=", p.id" if with_project else ""
    )
    conn.execute(text(sql), {"id": job_id, "name": name, "org": org, "queue": queue, "now": NOW})


def seed_two_organizations(url: str) -> None:
    """At 0011: acme/web beside default/default, jobs in three queues of the two, one execution,
    and a deleted job whose id (4) must not come back."""
    engine = engine_for(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO organizations (name, created_at) VALUES ('acme', :now)"), {"now": NOW})
        conn.execute(
            text(
                "INSERT INTO projects (organization_id, name, description, created_at)"
                " SELECT id, 'web', '', :now FROM organizations WHERE name = 'acme'"
            ),
            {"now": NOW},
        )
        for project, queue in (("web", "default"), ("default", "reports")):
            conn.execute(
                text(
                    "INSERT INTO queues (project_id, name, description, priority, paused, slots_taken, created_at,"
                    " updated_at) SELECT id, :queue, '', 0, false, 0, :now, :now FROM projects WHERE name = :project"
                ),
                {"project": project, "queue": queue, "now": NOW},
            )
        insert_job(conn, 1, "nightly", "default")
        insert_job(conn, 2, "reports", "default", "reports")
        insert_job(conn, 3, "sync", "acme")
        insert_job(conn, 4, "gone", "acme")
        conn.execute(text("DELETE FROM jobs WHERE id = 4"))
        conn.execute(
            text(
                "INSERT INTO executions (id, job_id, scheduled_for, trigger, idempotency_key, status, attempts,"
                " max_attempts, queue_id, priority, exclusive, available_at, output, error, created_at, updated_at)"
                " SELECT 1, 3, :now, 'manual', 'k1', 'pending', 0, 3, queue_id, 0, true, :now, '', '', :now, :now"
                " FROM jobs WHERE id = 3"
            ),
            {"now": NOW},
        )
    engine.dispose()


JOB_PROJECTS = (
    "SELECT j.id, j.name, o.name, p.name FROM jobs AS j JOIN projects AS p ON p.id = j.project_id"
    " JOIN organizations AS o ON o.id = p.organization_id ORDER BY j.id"
)


def indexes_of_jobs(url: str) -> set[str]:
    if url.startswith("sqlite"):
        found = rows(
            url, "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs' AND sql IS NOT NULL"
        )
    else:
        found = rows(url, "SELECT indexname FROM pg_indexes WHERE tablename = 'jobs'")
    return {name for (name,) in found}


def test_jobs_take_their_queues_project_and_names_become_unique_per_project(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0011")
    seed_two_organizations(fresh_url)
    flask_db(fresh_url, tmp_path, "upgrade", "0012")

    assert rows(fresh_url, JOB_PROJECTS) == [
        (1, "nightly", "default", "default"),
        (2, "reports", "default", "default"),
        (3, "sync", "acme", "web"),
    ]
    # The rebuild (SQLite) keeps the other indexes, the rows that point at jobs and the id counter.
    assert {"ix_jobs_due", "ix_jobs_queue_id"} <= indexes_of_jobs(fresh_url)
    assert rows(fresh_url, "SELECT id, job_id FROM executions") == [(1, 3)]
    if fresh_url.startswith("sqlite"):
        assert rows(fresh_url, "SELECT seq FROM sqlite_sequence WHERE name = 'jobs'") == [(4,)]

    engine = engine_for(fresh_url)
    with engine.begin() as conn:  # acme may now have a `nightly` of its own...
        insert_job(conn, 5, "nightly", "acme", with_project=True)
    with pytest.raises(IntegrityError):  # ...but default/default cannot have two
        with engine.begin() as conn:
            insert_job(conn, 6, "nightly", "default", with_project=True)
    with pytest.raises(IntegrityError):  # and every job has a project
        with engine.begin() as conn:
            conn.execute(text("UPDATE jobs SET project_id = NULL WHERE id = 1"))
    engine.dispose()
    assert rows(fresh_url, "SELECT id FROM jobs WHERE name = 'nightly' ORDER BY id") == [(1,), (5,)]

    # The rest of the chain applies on top.
    flask_db(fresh_url, tmp_path, "upgrade")
    assert rows(fresh_url, "SELECT count(*) FROM jobs") == [(4,)]


def test_the_downgrade_refuses_names_two_projects_share_then_restores_the_site_wide_rule(fresh_url, tmp_path, caplog):
    flask_db(fresh_url, tmp_path, "upgrade", "0011")
    seed_two_organizations(fresh_url)
    flask_db(fresh_url, tmp_path, "upgrade", "0012")
    engine = engine_for(fresh_url)
    with engine.begin() as conn:
        insert_job(conn, 10, "nightly", "acme", with_project=True)
    engine.dispose()

    app = create_app(env=app_env_for(fresh_url, tmp_path))
    with app.app_context():
        result = app.test_cli_runner().invoke(args=["db", "downgrade", "0011"])
        from app.extensions import db

        db.engine.dispose()
    assert result.exit_code != 0
    message = caplog.text  # flask-migrate logs the migration's error as one `Error: ...` line
    assert "jobs of different projects share these names: 'nightly'" in message, message
    assert "flask job edit ID --name NEW" in message
    assert rows(fresh_url, "SELECT version_num FROM alembic_version") == [("0012",)]  # nothing changed

    engine = engine_for(fresh_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE jobs SET name = 'acme-nightly' WHERE id = 10"))
    engine.dispose()
    flask_db(fresh_url, tmp_path, "downgrade", "0011")
    assert rows(fresh_url, "SELECT id, name FROM jobs ORDER BY id") == [
        (1, "nightly"),
        (2, "reports"),
        (3, "sync"),
        (10, "acme-nightly"),
    ]
    engine = engine_for(fresh_url)
    with pytest.raises(IntegrityError):  # site-wide again
        with engine.begin() as conn:
            insert_job(conn, 11, "sync", "default")
    engine.dispose()
