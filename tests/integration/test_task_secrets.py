"""Task processes get no secrets: the worker, its real fork server and a task that reports what it
can see. Only tasks registered with needs_database=True receive the database URL."""

from __future__ import annotations

import json

import pytest

import tests.helpers.executor_tasks  # noqa: F401 - registers test_exec_environment here and in the zygote
from app.clock import utcnow
from app.executor import ForkServer
from app.extensions import db
from app.models import Execution
from app.services.engine.worker import Worker
from app.services.use_cases import jobs
from tests.factories import make_job

pytestmark = pytest.mark.timeout(120)

# What a deployment's environment holds, as the worker process would have it.
SECRET_ENVIRONMENT = {
    "DATABASE_URL": "postgresql://cronwell:db-pass-8f3a@db.internal:5432/cronwell",
    "REDIS_URL": "redis://:redis-pass-77c1@cache.internal:6379/0",
    "SECRET_KEY": "flask-secret-key-4b2e",
    "SCHEDULER_CLI_SECRET": "cli-secret-9d0c",
    "METRICS_TOKEN": "metrics-token-1a2b",
    "DEV_ADMIN_PASSWORD": "admin-password-2f2f",
    "PGPASSWORD": "pg-password-3c4d",
    "PARTNER_API_KEY": "api-key-5e6f",
    "BACKUP_TARGET": "sftp://backup:backup-pass-7a8b@files.internal/cronwell",
    "REPORTS_DB": "sqlite:////var/lib/cronwell/reports.db",
}
HARMLESS = {"CRONWELL_TASK_GREETING": "hello"}


def run_job(app, task: str, config: dict | None = None) -> Execution:
    job = make_job(now=utcnow(), task=task, config=config or {})
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    executor = ForkServer(preload=("app.tasks.catalog", "tests.helpers.executor_tasks"), kill_grace_seconds=0.5)
    Worker(app, worker_id="secrets-test", executor=executor).run(burst=True)
    db.session.rollback()
    return db.session.get(Execution, execution.id)


def test_a_task_process_sees_no_secret_in_its_environment_or_context(app, monkeypatch):
    for name, value in {**SECRET_ENVIRONMENT, **HARMLESS}.items():
        monkeypatch.setenv(name, value)
    look_for = sorted({*SECRET_ENVIRONMENT, *SECRET_ENVIRONMENT.values(), "db-pass-8f3a", "redis-pass-77c1"})

    row = run_job(app, "test_exec_environment", {"look_for": look_for})

    assert row.status == "succeeded", row.error
    report = json.loads(row.result)
    assert report["found"] == []
    assert report["database_url"] is None
    # A task outside the built-ins declares nothing here: it gets the base environment alone.
    assert "PATH" in report["names"] and "CRONWELL_TASK_GREETING" not in report["names"]
    assert set(report["names"]) <= {"PATH", "HOME", "LANG", "TZ"}


@pytest.mark.parametrize(
    "task,config,expected",
    [
        ("generate_report", {"title": "nightly"}, "nightly"),
        ("cleanup_old_runs", {"dry_run": True}, "dry run"),
    ],
)
def test_the_tasks_that_need_the_database_still_get_it(app, monkeypatch, task, config, expected):
    for name, value in SECRET_ENVIRONMENT.items():
        monkeypatch.setenv(name, value)  # the context, not the environment, carries the URL

    row = run_job(app, task, config)

    assert row.status == "succeeded", row.error
    assert expected in row.output.lower()
