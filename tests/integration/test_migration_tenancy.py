"""Migration 0007 on both databases: an installation with users, jobs and executions moves into
one `default` organization holding the `default` project; each user becomes a member of it with
the role they had, every admin a superuser; every job and execution is reachable from the project
through its queue. Downgrading gives each user one role again."""

from __future__ import annotations

from sqlalchemy import text

from tests.helpers import migrations
from tests.helpers.migrations import engine_for, flask_db, rows

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend

NOW = "2026-06-01 12:00:00"


def seed_before_tenancy(url: str) -> None:
    """Three users (one per role), two queues of the default project, jobs and executions."""
    engine = engine_for(url)
    with engine.begin() as conn:
        for user_id, name, role in ((1, "ada", "admin"), (2, "otto", "operator"), (3, "vera", "viewer")):
            conn.execute(
                text(
                    "INSERT INTO users (id, username, password_hash, active, role, created_at)"
                    " VALUES (:id, :name, 'x', true, :role, :now)"
                ),
                {"id": user_id, "name": name, "role": role, "now": NOW},
            )
        conn.execute(
            text(
                "INSERT INTO queues (project_id, name, description, priority, paused, slots_taken, created_at,"
                " updated_at) SELECT id, 'reports', '', 0, false, 0, :now, :now FROM projects WHERE name = 'default'"
            ),
            {"now": NOW},
        )
        for job_id, name, queue in ((1, "a", "default"), (2, "b", "reports")):
            conn.execute(
                text(
                    "INSERT INTO jobs (id, name, description, task, config, schedule_type, schedule, timezone, enabled,"
                    " overlap_policy, misfire_policy, misfire_grace_seconds, max_attempts, retry_backoff_seconds,"
                    " timeout_seconds, alert_mode, retention_count, retention_days, queue_id, priority, created_at,"
                    " updated_at) SELECT :id, :name, '', 'always_succeed', '{}', 'interval', '{\"every\": \"1m\"}',"
                    " 'UTC', true, 'skip', 'coalesce', 60, 3, 10, 30, 'web', 500, 30, q.id, 0, :now, :now"
                    " FROM queues AS q WHERE q.name = :queue"
                ),
                {"id": job_id, "name": name, "queue": queue, "now": NOW},
            )
        for execution_id, job_id, status in ((1, 1, "pending"), (2, 2, "succeeded"), (3, 2, "failed")):
            conn.execute(
                text(
                    "INSERT INTO executions (id, job_id, scheduled_for, trigger, idempotency_key, status, attempts,"
                    " max_attempts, queue_id, priority, exclusive, available_at, finished_at, output, error,"
                    " created_at, updated_at) SELECT :id, :job, :now, 'manual', :key, :status, :attempts, 3,"
                    " j.queue_id, 0, true, :now, :finished, '', '', :now, :now FROM jobs AS j WHERE j.id = :job"
                ),
                {
                    "id": execution_id,
                    "job": job_id,
                    "key": f"k{execution_id}",
                    "status": status,
                    "attempts": 0 if status == "pending" else 1,
                    "now": NOW,
                    "finished": None if status == "pending" else NOW,
                },
            )
        for alert_id, job_id in ((1, 2), (2, None)):  # one of a job, one whose job was deleted
            conn.execute(
                text(
                    "INSERT INTO alerts (id, job_id, execution_id, kind, message, created_at)"
                    " VALUES (:id, :job, NULL, 'dead_letter', 'x', :now)"
                ),
                {"id": alert_id, "job": job_id, "now": NOW},
            )
    engine.dispose()


REACHABLE_EXECUTIONS = (
    "SELECT e.id, o.name, p.name FROM executions AS e JOIN jobs AS j ON j.id = e.job_id"
    " JOIN queues AS q ON q.id = j.queue_id JOIN projects AS p ON p.id = q.project_id"
    " JOIN organizations AS o ON o.id = p.organization_id ORDER BY e.id"
)


def test_an_installation_moves_into_the_default_organization_and_back(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0006")
    seed_before_tenancy(fresh_url)
    flask_db(fresh_url, tmp_path, "upgrade", "0007")

    assert rows(fresh_url, "SELECT name FROM organizations") == [("default",)]
    assert rows(
        fresh_url, "SELECT p.name, o.name FROM projects AS p JOIN organizations AS o ON o.id = p.organization_id"
    ) == [("default", "default")]
    assert rows(
        fresh_url,
        "SELECT u.username, m.role, o.name FROM memberships AS m JOIN users AS u ON u.id = m.user_id"
        " JOIN organizations AS o ON o.id = m.organization_id ORDER BY u.id",
    ) == [("ada", "admin", "default"), ("otto", "operator", "default"), ("vera", "viewer", "default")]
    superusers = rows(fresh_url, "SELECT username FROM users WHERE superuser ORDER BY id")
    assert superusers == [("ada",)]  # every admin, and only admins
    assert rows(fresh_url, REACHABLE_EXECUTIONS) == [
        (1, "default", "default"),
        (2, "default", "default"),
        (3, "default", "default"),
    ]
    assert rows(fresh_url, "SELECT count(*) FROM jobs") == [(2,)]
    # Alerts keep their project (their job's; the default one when the job is gone).
    assert rows(
        fresh_url, "SELECT a.id, p.name FROM alerts AS a JOIN projects AS p ON p.id = a.project_id ORDER BY a.id"
    ) == [(1, "default"), (2, "default")]

    # The rest of the chain applies on top (the audit log and later revisions).
    flask_db(fresh_url, tmp_path, "upgrade")
    assert rows(fresh_url, "SELECT count(*) FROM executions") == [(3,)]

    flask_db(fresh_url, tmp_path, "downgrade", "0006")
    assert rows(fresh_url, "SELECT username, role FROM users ORDER BY id") == [
        ("ada", "admin"),
        ("otto", "operator"),
        ("vera", "viewer"),
    ]
    assert rows(fresh_url, "SELECT name FROM projects") == [("default",)]
    assert rows(fresh_url, "SELECT id, job_id FROM executions ORDER BY id") == [(1, 1), (2, 2), (3, 2)]


def test_project_names_are_unique_within_an_organization_only(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0007")
    engine = engine_for(fresh_url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO organizations (name, created_at) VALUES ('acme', :now)"), {"now": NOW})
        conn.execute(
            text(
                "INSERT INTO projects (organization_id, name, description, created_at)"
                " SELECT id, 'default', '', :now FROM organizations WHERE name = 'acme'"
            ),
            {"now": NOW},
        )
    engine.dispose()
    assert rows(fresh_url, "SELECT count(*) FROM projects WHERE name = 'default'") == [(2,)]

    flask_db(fresh_url, tmp_path, "downgrade", "0006")  # names become site-wide again: acme's is prefixed
    assert sorted(rows(fresh_url, "SELECT name FROM projects")) == [("acme-default",), ("default",)]
