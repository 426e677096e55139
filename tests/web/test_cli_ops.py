"""`flask health`, `flask prune-history`, `flask ensure-dev-user`."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.clock import utcnow
from app.extensions import db as database
from app.models import AuditEvent, Execution, User, WebSession
from app.services import audit_trail
from tests.factories import make_alert, make_execution, make_heartbeat, make_job, make_user
from tests.helpers.cli import assert_error, cli_events, ok, ok_json, row_counts

# --- health ---------------------------------------------------------------------------------------


def test_health_on_an_idle_deployment(cli):
    out = ok(cli("health"))
    assert out.startswith("Ready: yes\n  database: ok\n  migrations: ok")
    assert "Schedulers:\n  (none seen)" in out and "Workers:\n  (none seen)" in out
    assert "Queue depth:    0 due now" in out and "Oldest pending: none" in out


def test_health_reports_heartbeats_queue_and_counts(app, cli):
    make_heartbeat("scheduler-1", "scheduler", age_seconds=3)
    make_heartbeat("worker-1", "worker", age_seconds=app.config["HEARTBEAT_STALE_SECONDS"] + 30)
    job = make_job()
    now = utcnow()
    make_execution(job, "pending", available_at=now - timedelta(seconds=90))
    make_execution(job, "retry_scheduled", attempts=1, available_at=now - timedelta(seconds=10))
    make_execution(job, "retry_scheduled", attempts=1, available_at=now + timedelta(minutes=5))
    make_execution(job, "running", attempts=1)
    make_execution(job, "succeeded", attempts=1)
    make_alert(job)
    make_alert(job, resolved=True)

    report = ok_json(cli("health", "--json"))
    assert report["readiness"]["ready"] is True and report["now"].endswith("Z")
    [scheduler] = report["schedulers"]
    [worker] = report["workers"]
    assert scheduler["id"] == "scheduler-1" and scheduler["stale"] is False and 2 <= scheduler["age_seconds"] < 30
    assert worker["stale"] is True and worker["last_seen"].endswith("Z") and worker["pid"] == 4242
    queue = report["queue"]
    assert (queue["depth"], queue["retries_waiting"], queue["in_flight"]) == (2, 1, 1)
    assert 89 <= queue["oldest_pending_age_seconds"] < 120 and queue["oldest_pending_at"].endswith("Z")
    assert report["executions_by_status"]["retry_scheduled"] == 2
    assert report["executions_by_status"]["succeeded"] == 1 and report["executions_by_status"]["failed"] == 0
    assert report["jobs"] == {"total": 1, "enabled": 1} and report["open_alerts"] == 1

    assert (scheduler["status"], worker["status"], worker["state"]) == ("alive", "lost", "stale")
    assert report["serving_workers"] == 0
    out = ok(cli("health"))
    assert "scheduler-1" in out and "alive" in out and "lost" in out and "stale (no heartbeat for > 60s)" in out
    assert "2 due now, 1 retries waiting, 1 in flight" in out and "ago)" in out


def test_health_exits_1_when_not_ready_but_still_prints_the_report(app, cli):
    app.config["READYZ_REQUIRE_HEARTBEATS"] = True
    make_heartbeat("scheduler-old", "scheduler", age_seconds=3600)
    result = cli("health", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["readiness"]["ready"] is False and report["schedulers"][0]["stale"] is True
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: not ready: scheduler_heartbeat (no scheduler seen in 60s)")


def alive_and_stopped_workers(app):
    """A worker that really ran and stopped (its last heartbeat says so, and is seconds old) and
    one heartbeating as running."""
    from app.services.engine.worker import Worker

    Worker(app, worker_id="w-stopped").run(burst=True)
    beat = make_heartbeat("w-alive", "worker", age_seconds=1)
    beat.info = {"state": "running", "busy": 0, "slots": 4}
    database.session.commit()


def test_health_with_one_alive_and_one_stopped_worker(app, cli):
    alive_and_stopped_workers(app)
    app.config["READYZ_REQUIRE_WORKER_HEARTBEAT"] = True
    report = ok_json(cli("health", "--json"))
    statuses = {w["id"]: (w["status"], w["serving"]) for w in report["workers"]}
    assert statuses == {"w-alive": ("alive", True), "w-stopped": ("stopped", False)}
    assert report["serving_workers"] == 1 and report["readiness"]["ready"] is True
    listed = {w["id"]: w["status"] for w in ok_json(cli("worker", "list", "--json"))}
    assert listed == {"w-alive": "alive", "w-stopped": "stopped"}  # the same words

    out = ok(cli("health"))
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("w-")}
    assert "alive" in rows["w-alive"] and "stopped" in rows["w-stopped"] and "alive" not in rows["w-stopped"]
    assert "Serving workers: 1 of 2" in out

    from tests.helpers.web import WebClient

    ready = WebClient(app).get("/readyz")
    body = ready.get_json()
    assert ready.status_code == 200 and body["serving_workers"] == 1
    assert {w["id"]: w["status"] for w in body["workers"]} == {"w-alive": "alive", "w-stopped": "stopped"}


def test_health_and_readyz_count_a_stopped_worker_as_not_serving(app, cli):
    from app.services.engine.worker import Worker
    from tests.helpers.web import WebClient

    Worker(app, worker_id="w-stopped").run(burst=True)
    app.config["READYZ_REQUIRE_WORKER_HEARTBEAT"] = True
    result = cli("health")
    assert result.exit_code == 1 and "stopped" in result.stdout
    assert (
        result.stderr.strip() == "Error: not ready: worker_heartbeat (no worker serving: none alive and running in 60s)"
    )
    ready = WebClient(app).get("/readyz")
    assert ready.status_code == 503 and ready.get_json()["checks"]["worker_heartbeat"]["ok"] is False


# --- prune-history --------------------------------------------------------------------------------


def execution_count() -> int:
    database.session.rollback()
    return database.session.scalar(select(func.count()).select_from(Execution))


def test_prune_history_dry_run_then_for_real(cli):
    job = make_job(retention_count=2, retention_days=0)
    for _ in range(5):
        make_execution(job, "succeeded", attempts=1)
    make_execution(job, "pending")
    out = ok(cli("prune-history", "--dry-run"))
    assert "would delete 3 execution(s) (dry run, nothing deleted)" in out and execution_count() == 6
    doc = ok_json(cli("prune-history", "--json"))
    assert doc == {
        "deleted": 3,
        "dry_run": False,
        "by_job": {str(job.id): 3},
        "more": False,
        "audit_deleted": 0,
        "sessions_deleted": 0,
        "events_deleted": 0,
    }
    assert execution_count() == 3
    [event] = cli_events("history_pruned")
    assert event.payload["deleted"] == 3 and event.payload["by_job"] == {str(job.id): 3}
    assert "Retention deleted 0 execution(s)" in ok(cli("prune-history"))


def test_prune_history_counts_then_deletes_old_audit_events_and_expired_sessions(app, cli):
    app.config["AUDIT_RETENTION_DAYS"] = 30
    app.config["SESSION_MAX_AGE_HOURS"] = 24
    now = utcnow()
    user = make_user("sam")
    for age in (timedelta(days=31), timedelta(days=29)):
        audit_trail.record_change("cli", "updated", "job", 1, {"x": 1}, {"x": 2}, now=now - age)
    for key, age in (("old", timedelta(hours=25)), ("young", timedelta(hours=23))):
        database.session.add(WebSession(user_id=user.id, token_hash=key.ljust(64, "0"), created_at=now - age))
    database.session.commit()

    out = ok(cli("prune-history", "--dry-run"))
    assert "would delete 1 audit event(s) older than AUDIT_RETENTION_DAYS and 1 web session(s)" in out
    assert _ages(AuditEvent, now) == [timedelta(days=31), timedelta(days=29)]
    assert _ages(WebSession, now) == [timedelta(hours=25), timedelta(hours=23)]

    doc = ok_json(cli("prune-history", "--json"))
    assert doc["audit_deleted"] == 1 and doc["sessions_deleted"] == 1
    assert _ages(AuditEvent, now) == [timedelta(days=29)]
    assert _ages(WebSession, now) == [timedelta(hours=23)]


def _ages(model, now) -> list[timedelta]:
    """How old each row older than an hour is, oldest first (the rows the test made)."""
    database.session.rollback()
    stamps = database.session.scalars(select(model.created_at).where(model.created_at < now - timedelta(hours=1)))
    return sorted((now - stamp for stamp in stamps), reverse=True)


# --- ensure-dev-user ------------------------------------------------------------------------------


def users() -> list[User]:
    database.session.rollback()
    return list(database.session.scalars(select(User)))


def test_ensure_dev_user_refuses_the_default_password_with_debug_off(app, cli):
    assert app.config["CRONWELL_DEBUG"] is False  # the test environment runs with DEBUG=0
    before = row_counts()
    assert_error(cli("ensure-dev-user"), "refusing to create 'admin' with the default password while DEBUG=0")
    assert row_counts() == before


def test_ensure_dev_user_creates_admin_admin_in_debug_and_warns(app, cli):
    app.config["CRONWELL_DEBUG"] = True
    result = cli("ensure-dev-user")
    assert ok(result).strip() == "Created admin user 'admin'"
    assert "Warning: created 'admin' with the default password 'admin'" in result.stderr
    [user] = users()
    assert user.username == "admin" and user.superuser and user.active and user.check_password("admin")
    assert [(m.organization.name, m.role) for m in user.memberships] == [("default", "admin")]
    [event] = cli_events("user_created")
    assert event.payload == {"username": "admin", "role": "admin", "organization": "default", "superuser": True}

    again = cli("ensure-dev-user")
    assert ok(again) == "" and "Warning: user 'admin' already exists; left unchanged" in again.stderr
    assert len(users()) == 1


@pytest.mark.parametrize("debug", [False, True])
def test_ensure_dev_user_with_a_configured_password(app, cli, debug):
    app.config.update(CRONWELL_DEBUG=debug, DEV_ADMIN_USERNAME="ops", DEV_ADMIN_PASSWORD="a long passphrase")
    result = cli("ensure-dev-user")
    assert "Created admin user 'ops'" in ok(result) and result.stderr == ""
    [user] = users()
    assert user.username == "ops" and user.check_password("a long passphrase") and not user.check_password("admin")
