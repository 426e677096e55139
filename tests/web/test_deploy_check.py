"""`flask check-deploy [--strict]`, `flask check-heartbeat`, and the refusal to start production
processes with the development SECRET_KEY."""

from __future__ import annotations

import json
import socket
from datetime import timedelta

import pytest

from app.clock import utcnow
from app.extensions import db as database
from app.models import Heartbeat
from cli.deploy import check_deployment
from config import DEV_SECRET_KEY, InsecureSettings, load_settings, refuse_insecure_start

CHANNEL_KEY = "Kpu2vVHcH4qkRrJ2rI8Dh3uEQ3b1j2cM4nq0mYt6sXo="
PRODUCTION = {
    "CRONWELL_DEBUG": False,
    "DEBUG": False,
    "WEBUI_AUTH": True,
    "SECRET_KEY": "s" * 48,
    "CHANNEL_SECRET_KEY": CHANNEL_KEY,
    "SCHEDULER_CLI_SECRET": "cli-secret",
    "SQLALCHEMY_DATABASE_URI": "postgresql+psycopg://db/cronwell",
    "REDIS_URL": "redis://cache:6379/0",
    "GUNICORN_WORKERS": 4,
    "SECURE_COOKIES": True,
    "METRICS_ENABLED": True,
    "METRICS_TOKEN": "scrape-token",
}


@pytest.fixture
def run(app):
    runner = app.test_cli_runner()

    def invoke(*args: str):
        return runner.invoke(args=list(args))

    return invoke


def codes(config: dict) -> list[str]:
    return [finding.code for finding in check_deployment(config)]


# --- the checks (pure) ----------------------------------------------------------------------------


def test_a_production_configuration_has_no_warnings():
    assert codes(PRODUCTION) == []


@pytest.mark.parametrize(
    "change, code",
    [
        ({"WEBUI_AUTH": False}, "auth_off"),
        ({"CRONWELL_DEBUG": True}, "debug_on"),
        ({"SECRET_KEY": DEV_SECRET_KEY}, "secret_key_default"),
        ({"SECRET_KEY": "short-but-not-default"}, "secret_key_short"),
        ({"CHANNEL_SECRET_KEY": None}, "channel_key"),
        ({"CHANNEL_SECRET_KEY": "not-a-fernet-key"}, "channel_key"),
        ({"SCHEDULER_CLI_SECRET": None}, "cli_secret_unset"),
        ({"SQLALCHEMY_DATABASE_URI": "sqlite:////srv/cronwell.sqlite3"}, "sqlite"),
        ({"REDIS_URL": None}, "redis_absent"),
        ({"SECURE_COOKIES": False}, "cookies_insecure"),
        ({"METRICS_TOKEN": None}, "metrics_open"),
    ],
)
def test_each_risk_is_reported_with_its_code(change, code):
    assert codes({**PRODUCTION, **change}) == [code]


def test_redis_is_only_needed_when_gunicorn_runs_several_workers():
    assert codes({**PRODUCTION, "REDIS_URL": None, "GUNICORN_WORKERS": 1}) == []
    [finding] = check_deployment({**PRODUCTION, "REDIS_URL": None, "GUNICORN_WORKERS": 3})
    assert "3 workers" in finding.message and "per process" in finding.message


def test_the_development_defaults_collect_every_warning():
    settings = load_settings({})
    assert codes(settings) == ["debug_on", "secret_key_default", "cli_secret_unset", "sqlite", "redis_absent"]


def test_the_sqlite_warning_says_one_machine_is_fine():
    [finding] = check_deployment({**PRODUCTION, "SQLALCHEMY_DATABASE_URI": "sqlite:///x"})
    assert "one machine" in finding.message and "several hosts" in finding.message


# --- the command ------------------------------------------------------------------------------------


def test_check_deploy_warns_but_exits_0_without_strict(app, run):
    app.config.update(WEBUI_AUTH=False, SCHEDULER_CLI_SECRET=None)
    result = run("check-deploy")
    assert result.exit_code == 0, result.output
    assert "WARNING auth_off:" in result.stdout and "WARNING cli_secret_unset:" in result.stdout
    assert result.stdout.strip().endswith("warning(s)")


def test_check_deploy_strict_exits_1_on_any_warning(app, run):
    app.config.update(WEBUI_AUTH=False)
    assert run("check-deploy", "--strict").exit_code == 1


def test_check_deploy_strict_exits_0_on_a_clean_configuration(app, run):
    app.config.update(PRODUCTION)
    result = run("check-deploy", "--strict")
    assert result.exit_code == 0, result.output
    assert result.stdout == "check-deploy: no warnings\n"


def test_check_deploy_json(app, run):
    app.config.update(PRODUCTION, SECRET_KEY=DEV_SECRET_KEY)
    result = run("check-deploy", "--json", "--strict")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["strict"] is True
    assert [w["code"] for w in report["warnings"]] == ["secret_key_default"]


def test_check_deploy_never_prints_secret_values(app, run):
    app.config.update(PRODUCTION, SCHEDULER_CLI_SECRET="very-secret-cli-value", SECRET_KEY="tiny-secret")
    result = run("check-deploy", "--json")
    assert "very-secret-cli-value" not in result.output and "tiny-secret" not in result.output


# --- refusing to start ------------------------------------------------------------------------------


def test_refuse_insecure_start_only_in_production_with_the_development_key():
    refuse_insecure_start({"CRONWELL_DEBUG": True, "SECRET_KEY": DEV_SECRET_KEY})
    refuse_insecure_start({"CRONWELL_DEBUG": False, "SECRET_KEY": "x" * 40, "CHANNEL_SECRET_KEY": CHANNEL_KEY})
    for key in (DEV_SECRET_KEY, "", None):
        with pytest.raises(InsecureSettings, match="SECRET_KEY"):
            refuse_insecure_start({"CRONWELL_DEBUG": False, "SECRET_KEY": key, "CHANNEL_SECRET_KEY": CHANNEL_KEY})
    with pytest.raises(InsecureSettings):
        refuse_insecure_start(load_settings({"DEBUG": "0"}))


def test_production_without_a_channel_key_refuses_to_start_in_one_line_but_the_worker_starts():
    production = {"CRONWELL_DEBUG": False, "SECRET_KEY": "x" * 40}
    for key in (None, "", "too-short", f"{CHANNEL_KEY},nope"):
        with pytest.raises(InsecureSettings, match="CHANNEL_SECRET_KEY") as refused:
            refuse_insecure_start({**production, "CHANNEL_SECRET_KEY": key})
        assert "\n" not in str(refused.value) and str(refused.value).startswith("refusing to start: ")
    assert "Fernet.generate_key()" in str(refused.value)  # it says how to make one
    refuse_insecure_start(production, seals_channels=False)  # the worker never reads a channel
    refuse_insecure_start({**production, "CHANNEL_SECRET_KEY": f"{CHANNEL_KEY}, {CHANNEL_KEY}"})  # a rotation list
    refuse_insecure_start({"CRONWELL_DEBUG": True, "SECRET_KEY": DEV_SECRET_KEY})  # development derives one


def test_the_scheduler_refuses_production_without_a_channel_key_and_the_worker_does_not(app, run, caplog):
    app.config.update(CRONWELL_DEBUG=False, CHANNEL_SECRET_KEY=None)
    result = run("scheduler", "run", "--once")
    assert result.exit_code == 1
    [record] = [r for r in caplog.records if getattr(r, "event", None) == "refused_to_start"]
    assert "CHANNEL_SECRET_KEY is unset" in record.getMessage()
    assert database.session.scalar(database.select(Heartbeat.id)) is None  # it never started
    worker = run("worker", "run", "--once")
    assert worker.exit_code == 0, worker.output


@pytest.mark.parametrize("command", [["scheduler", "run", "--once"], ["worker", "run", "--once"]])
def test_scheduler_and_worker_refuse_production_with_the_development_key(app, run, command, caplog):
    app.config.update(CRONWELL_DEBUG=False, SECRET_KEY=DEV_SECRET_KEY)
    result = run(*command)
    assert result.exit_code == 1
    [record] = [r for r in caplog.records if getattr(r, "event", None) == "refused_to_start"]
    assert record.levelname == "CRITICAL" and "SECRET_KEY" in record.getMessage()
    assert database.session.scalar(database.select(Heartbeat.id)) is None  # it never started


def test_scheduler_starts_with_a_real_key(app, run):
    result = run("scheduler", "run", "--once")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("tick ")


# --- check-heartbeat ----------------------------------------------------------------------------------


def beat(kind: str, *, host: str, age_seconds: float, process_id: str | None = None) -> None:
    now = utcnow()
    database.session.add(
        Heartbeat(
            id=process_id or f"{kind}-{host}-1",
            kind=kind,
            host=host,
            pid=1,
            started_at=now - timedelta(hours=1),
            last_seen=now - timedelta(seconds=age_seconds),
            info={},
        )
    )
    database.session.commit()


def test_check_heartbeat_fails_without_a_heartbeat(run):
    result = run("check-heartbeat", "scheduler")
    assert result.exit_code == 1
    assert "no scheduler heartbeat from host" in result.stderr


def test_check_heartbeat_passes_for_a_fresh_heartbeat_on_this_host(run):
    beat("worker", host=socket.gethostname(), age_seconds=2)
    result = run("check-heartbeat", "worker")
    assert result.exit_code == 0, result.output
    assert run("check-heartbeat", "scheduler").exit_code == 1  # the other kind is not enough


def test_check_heartbeat_is_per_host_unless_asked_otherwise(run):
    beat("scheduler", host="another-host", age_seconds=2)
    assert run("check-heartbeat", "scheduler").exit_code == 1
    assert run("check-heartbeat", "scheduler", "--any-host").exit_code == 0


def test_check_heartbeat_rejects_a_stale_heartbeat(app, run):
    beat("scheduler", host=socket.gethostname(), age_seconds=app.config["HEARTBEAT_STALE_SECONDS"] + 5)
    assert run("check-heartbeat", "scheduler").exit_code == 1
    assert run("check-heartbeat", "scheduler", "--max-age", "3600").exit_code == 0
