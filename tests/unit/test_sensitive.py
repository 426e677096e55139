"""Which environment variables a task process may not inherit (app/sensitive.py)."""

from __future__ import annotations

import pytest

from app.sensitive import is_sensitive_variable, task_environment


@pytest.mark.parametrize(
    "name,value",
    [
        ("DATABASE_URL", "sqlite:////srv/cronwell.db"),
        ("REDIS_URL", "redis://cache:6379/0"),
        ("SECRET_KEY", "x"),
        ("SCHEDULER_CLI_SECRET", "x"),
        ("METRICS_TOKEN", "x"),
        ("DEV_ADMIN_PASSWORD", "x"),
        ("PGPASSWORD", "x"),
        ("GITHUB_TOKEN", "x"),
        ("PARTNER_API_KEY", "x"),
        ("SESSION_COOKIE", "x"),
        ("BACKUP_TARGET", "sftp://backup:hunter22@files.internal/"),
        ("REPORTS_DB", "postgresql+psycopg://reports@db/reports"),
    ],
)
def test_secrets_and_database_addresses_are_sensitive(name, value):
    assert is_sensitive_variable(name, value)


@pytest.mark.parametrize(
    "name,value",
    [("PATH", "/usr/bin:/bin"), ("HOME", "/home/cronwell"), ("TZ", "UTC"), ("DOCS_URL", "https://example.org/")],
)
def test_ordinary_variables_are_not(name, value):
    assert not is_sensitive_variable(name, value)


def test_task_environment_keeps_only_the_ordinary_variables():
    env = {"PATH": "/bin", "SECRET_KEY": "s3cr3t-value", "DATABASE_URL": "postgresql://u:p@h/d", "LANG": "C.UTF-8"}
    assert task_environment(env) == {"PATH": "/bin", "LANG": "C.UTF-8"}


def test_task_environment_keeps_the_variables_http_task_secrets_lists_but_never_cronwells_own():
    env = {
        "PATH": "/bin",
        "HTTP_TASK_SECRETS": "PARTNER_TOKEN, DATABASE_URL,SECRET_KEY",
        "PARTNER_TOKEN": "t0ken-value",
        "OTHER_TOKEN": "not-listed",
        "DATABASE_URL": "postgresql://u:p@h/d",
        "SECRET_KEY": "s3cr3t-value",
    }
    assert task_environment(env) == {
        "PATH": "/bin",
        "HTTP_TASK_SECRETS": "PARTNER_TOKEN, DATABASE_URL,SECRET_KEY",
        "PARTNER_TOKEN": "t0ken-value",
    }
