"""compose.yaml, compose.prod.yaml, the Dockerfile, .env.example and gunicorn.conf.py, checked
without Docker: every service, command, healthcheck and environment variable.

The compose helpers (`load_compose`, `interpolate`, `service_command`) live in tests/helpers/compose.py,
shared with tests/integration/test_smoke_processes.py, which runs the same commands as real processes.
"""

from __future__ import annotations

import re
import runpy
import shlex
from pathlib import Path

import pytest
import yaml

from cli.deploy import check_deployment
from config import DEV_SECRET_KEY, load_settings, refuse_insecure_start
from tests.helpers.compose import MissingVariable, interpolate, load_compose, merged_environment, service_command

ROOT = Path(__file__).resolve().parents[2]
APP_SERVICES = ("migrate", "web", "scheduler", "worker")
LONG_RUNNING = ("postgres", "redis", "web", "scheduler", "worker")


def documented_variables() -> set[str]:
    """The names .env.example documents (set or commented out)."""
    text = (ROOT / ".env.example").read_text()
    return set(re.findall(r"^#?\s?([A-Z][A-Z0-9_]+)=", text, flags=re.MULTILINE))


def config_variables() -> set[str]:
    """Every environment variable config.py reads."""
    source = (ROOT / "config.py").read_text()
    return set(re.findall(r'(?:env\.get\(|_int\(env,\s*)"([A-Z][A-Z0-9_]+)"', source))


LEAN_CLI = ["python", "-m", "cli"]  # `flask` without Flask's plugin scan (cli/__main__.py)


def flask_commands(command: list[str]) -> list[list[str]]:
    """The `flask ...` and `python -m cli ...` invocations in an exec-form command (including
    `sh -c "a && b"`), as the arguments after the program."""
    if command[:2] == ["sh", "-c"]:
        parts = [shlex.split(part) for part in command[2].split("&&")]
    else:
        parts = [command]
    found = []
    for part in parts:
        if part[:1] == ["flask"]:
            found.append(part[1:])
        elif part[:3] == LEAN_CLI:
            found.append(part[3:])
    return found


# --- compose.yaml -------------------------------------------------------------------------------


def test_compose_has_every_service_with_restart_policies_and_healthchecks():
    services = load_compose()["services"]
    assert set(services) == {"postgres", "redis", "migrate", "web", "scheduler", "worker"}
    for name in LONG_RUNNING:
        service = services[name]
        assert service["restart"] == "unless-stopped", name
        test = service["healthcheck"]["test"]
        assert test[0] == "CMD" and len(test) > 1, name
        for key in ("interval", "timeout", "retries"):
            assert key in service["healthcheck"], (name, key)
    assert services["migrate"]["restart"] == "no"  # a one-shot: a failed migration must stay failed


def test_postgres_keeps_its_data_in_a_volume_and_is_checked_with_pg_isready():
    compose = load_compose()
    postgres = compose["services"]["postgres"]
    assert postgres["image"].startswith("postgres:")
    assert "pgdata:/var/lib/postgresql/data" in postgres["volumes"] and "pgdata" in compose["volumes"]
    assert postgres["healthcheck"]["test"][1] == "pg_isready"
    assert compose["services"]["redis"]["healthcheck"]["test"][1:] == ["redis-cli", "ping"]


def test_start_order_is_database_then_migration_then_the_processes():
    services = load_compose()["services"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("web", "scheduler", "worker"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["postgres"]["condition"] == "service_healthy", name
        assert services[name]["image"] == services["migrate"]["image"] == "cronwell:latest"
        assert services[name]["build"] == "."


def test_the_commands_are_the_documented_ones():
    env: dict[str, str] = {}
    assert service_command("migrate", env) == [
        "sh",
        "-c",
        'flask db upgrade && flask ensure-dev-user --cli-secret "$SCHEDULER_CLI_SECRET"',
    ]
    assert service_command("web", env) == ["gunicorn", "--config", "gunicorn.conf.py", "wsgi:app"]
    # The long-running processes start without Flask's plugin scan (a smaller parent).
    assert service_command("scheduler", env) == [*LEAN_CLI, "scheduler", "run"]
    assert service_command("worker", env) == [*LEAN_CLI, "worker", "run", "--workers", "4"]
    assert service_command("worker", {"WORKER_SLOTS": "8"})[-1] == "8"


def test_every_flask_command_in_compose_exists_with_those_options(app):
    """Commands and healthchecks parse against the real CLI (an unknown option would exit 2)."""
    services = load_compose()["services"]
    invocations = []
    for name in APP_SERVICES:
        invocations += flask_commands(service_command(name, {}))
        if "healthcheck" in services[name]:
            invocations += flask_commands(services[name]["healthcheck"]["test"][1:])
    assert ["db", "upgrade"] in invocations and ["check-heartbeat", "worker"] in invocations
    runner = app.test_cli_runner()
    for args in invocations:
        result = runner.invoke(args=[*args, "--help"])
        assert result.exit_code == 0, (args, result.output)


def test_healthchecks_probe_readiness_and_heartbeats():
    services = load_compose()["services"]
    assert "/readyz" in services["web"]["healthcheck"]["test"][-1]
    assert services["scheduler"]["healthcheck"]["test"] == ["CMD", *LEAN_CLI, "check-heartbeat", "scheduler"]
    assert services["worker"]["healthcheck"]["test"] == ["CMD", *LEAN_CLI, "check-heartbeat", "worker"]


def test_every_environment_variable_is_a_documented_setting():
    documented = documented_variables()
    # Every ${VAR} in the files' values (comments are not values), collected by interpolating.
    seen: dict[str, str] = {}

    class Recorder(dict):
        def get(self, key, default=None):
            seen[key] = ""
            return "set"

    for file in ("compose.yaml", "compose.prod.yaml"):
        interpolate(load_compose(file), Recorder())
    interpolated = set(seen)
    assert {"SECRET_KEY", "POSTGRES_PASSWORD", "WORKER_SLOTS"} <= interpolated
    assert interpolated - documented == set()
    for name in APP_SERVICES:
        for file in ("compose.yaml", "compose.prod.yaml"):
            environment = load_compose(file)["services"][name].get("environment") or {}
            assert set(environment) - documented - {"FLASK_APP"} == set(), (file, name)


def test_env_example_documents_every_setting_of_config_and_gunicorn():
    documented = documented_variables()
    assert config_variables() - documented == set()
    gunicorn_vars = set(re.findall(r'os\.environ\.get\("([A-Z_]+)"', (ROOT / "gunicorn.conf.py").read_text()))
    assert gunicorn_vars and gunicorn_vars - documented == set()
    assert {"SCHEDULER_METRICS_PORT", "WORKER_METRICS_PORT", "METRICS_HOST"} <= documented


def test_app_services_share_the_database_redis_and_settings():
    for name in APP_SERVICES:
        env = merged_environment(name, {})
        assert env["DATABASE_URL"] == "postgresql://cronwell:cronwell@postgres:5432/cronwell", name
        assert env["REDIS_URL"] == "redis://redis:6379/0"
        settings = load_settings(env)  # every value parses
        assert settings["SQLALCHEMY_DATABASE_URI"].startswith("postgresql+psycopg://")
        assert settings["LOG_FORMAT"] == "json"


def test_metrics_are_exposed_where_the_processes_listen():
    services = load_compose()["services"]
    web = merged_environment("web", {})
    assert web["METRICS_ENABLED"] == "1" and web["PROMETHEUS_MULTIPROC_DIR"].startswith("/tmp/")
    assert "/tmp" in services["web"]["tmpfs"]
    for name, variable in (("scheduler", "SCHEDULER_METRICS_PORT"), ("worker", "WORKER_METRICS_PORT")):
        env = merged_environment(name, {})
        assert env["METRICS_HOST"] == "0.0.0.0"
        assert services[name]["expose"] == [env[variable]]
        assert "PROMETHEUS_MULTIPROC_DIR" not in env  # the multiprocess files are the web's alone
        assert services[name]["init"] is True


def test_the_worker_gets_longer_than_its_shutdown_grace_to_stop():
    worker = load_compose()["services"]["worker"]
    grace = int(merged_environment("worker", {})["WORKER_SHUTDOWN_GRACE_SECONDS"])
    assert int(worker["stop_grace_period"].rstrip("s")) > grace


def test_development_compose_runs_in_development_mode():
    env = merged_environment("web", {})
    assert env["DEBUG"] == "1" and env["SECRET_KEY"] == ""
    refuse_insecure_start(load_settings(env))  # DEBUG=1: the development key is allowed


# --- compose.prod.yaml ---------------------------------------------------------------------------

PROD_FILES = ("compose.yaml", "compose.prod.yaml")
PROD_SECRETS = {
    "SECRET_KEY": "k" * 48,
    "SCHEDULER_CLI_SECRET": "cli-secret-value",
    "POSTGRES_PASSWORD": "pg-pass",
    "METRICS_TOKEN": "metrics-token-value",
    "CHANNEL_SECRET_KEY": "Kpu2vVHcH4qkRrJ2rI8Dh3uEQ3b1j2cM4nq0mYt6sXo=",
}


def test_production_override_sets_debug_off_secure_cookies_and_json_logs():
    for name in APP_SERVICES:
        env = merged_environment(name, PROD_SECRETS, PROD_FILES)
        assert (env["DEBUG"], env["SECURE_COOKIES"], env["LOG_FORMAT"]) == ("0", "1", "json"), name
        assert env["SECRET_KEY"] == PROD_SECRETS["SECRET_KEY"]
        assert env["DATABASE_URL"] == "postgresql://cronwell:pg-pass@postgres:5432/cronwell"


@pytest.mark.parametrize("missing", ["SECRET_KEY", "SCHEDULER_CLI_SECRET", "POSTGRES_PASSWORD", "CHANNEL_SECRET_KEY"])
def test_production_override_refuses_to_start_without_each_secret(missing):
    override = load_compose("compose.prod.yaml")["services"]
    for value in ("", None):
        env = {k: v for k, v in PROD_SECRETS.items() if k != missing}
        if value is not None:
            env[missing] = value
        for name in APP_SERVICES:
            with pytest.raises(MissingVariable, match=missing):
                interpolate(override[name]["environment"], env)


def test_secrets_use_the_required_form_in_every_production_service():
    override = load_compose("compose.prod.yaml")["services"]
    for name in APP_SERVICES:
        env = override[name]["environment"]
        for variable in ("SECRET_KEY", "SCHEDULER_CLI_SECRET", "CHANNEL_SECRET_KEY"):
            assert re.fullmatch(r"\$\{" + variable + r":\?.+\}", env[variable]), (name, variable)
    assert override["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")


def test_a_production_deployment_with_its_secrets_passes_check_deploy():
    for name in ("web", "scheduler", "worker"):
        env = merged_environment(name, PROD_SECRETS, PROD_FILES)
        settings = load_settings(env)
        refuse_insecure_start(settings)
        assert check_deployment(settings) == [], name


def test_production_containers_are_hardened():
    override = load_compose("compose.prod.yaml")["services"]
    for name in APP_SERVICES:
        assert override[name]["read_only"] is True and override[name]["cap_drop"] == ["ALL"], name
        assert "no-new-privileges:true" in override[name]["security_opt"]


# --- Dockerfile and .dockerignore ----------------------------------------------------------------


def _dockerfile() -> list[str]:
    lines, pending = [], ""
    for raw in (ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pending += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            lines.append(pending.strip())
            pending = ""
    return lines


def test_dockerfile_is_slim_python_311_non_root_with_a_cached_dependency_layer():
    lines = _dockerfile()
    assert lines[0] == "FROM python:3.11-slim"
    index = {line.split()[0] + ":" + line: i for i, line in enumerate(lines)}

    def position(prefix: str) -> int:
        return next(i for key, i in index.items() if key.split(":", 1)[1].startswith(prefix))

    assert position("COPY requirements.lock") < position("RUN pip install") < position("COPY . .")
    # The image installs the lock (every package pinned with its hashes), not the loose input.
    install = next(line for line in lines if line.startswith("RUN pip install"))
    assert "--require-hashes -r requirements.lock" in install
    users = [line for line in lines if line.startswith("USER ")]
    assert users and users[-1].split()[1].split(":")[0] not in ("root", "0")
    assert position("USER ") > max(i for key, i in index.items() if key.startswith("RUN:"))
    cmd = next(line for line in lines if line.startswith("CMD "))
    assert yaml.safe_load(cmd[4:]) == service_command("web", {})
    assert not any("SECRET" in line for line in lines if line.startswith(("ENV", "ARG")))


def test_dockerignore_keeps_secrets_and_local_state_out_of_the_image():
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".env", ".venv", ".git", "instance", "tests"} <= ignored


# --- gunicorn.conf.py -------------------------------------------------------------------------------


def test_gunicorn_config_reads_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # never leak into this process
    monkeypatch.setenv("GUNICORN_WORKERS", "3")
    monkeypatch.setenv("GUNICORN_TIMEOUT", "45")
    monkeypatch.setenv("GUNICORN_BIND", "0.0.0.0:9000")
    config = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    assert (config["workers"], config["timeout"], config["bind"]) == (3, 45, "0.0.0.0:9000")
    assert config["worker_class"] == "gthread" and config["accesslog"] == "-" and config["errorlog"] == "-"
    assert config["logger_class"] == "app.gunicorn_logs.GunicornLogger"
    assert config["control_socket_disable"] is True
    assert callable(config["on_starting"]) and callable(config["child_exit"])


def test_gunicorn_config_refuses_production_with_the_development_secret(monkeypatch, tmp_path):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    monkeypatch.setenv("DEBUG", "0")
    monkeypatch.setenv("SECRET_KEY", DEV_SECRET_KEY)
    (tmp_path / "counter_1.db").write_text("stale")
    config = runpy.run_path(str(ROOT / "gunicorn.conf.py"))

    class Server:
        class log:
            messages = []

            @classmethod
            def critical(cls, message, **kwargs):
                cls.messages.append((message, kwargs))

    with pytest.raises(SystemExit):
        config["on_starting"](Server)
    assert "SECRET_KEY" in Server.log.messages[0][0]
    assert Server.log.messages[0][1]["extra"]["event"] == "refused_to_start"

    monkeypatch.setenv("SECRET_KEY", "x" * 40)
    monkeypatch.setenv("CHANNEL_SECRET_KEY", PROD_SECRETS["CHANNEL_SECRET_KEY"])
    config = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    config["on_starting"](Server)
    assert not (tmp_path / "counter_1.db").exists()  # metrics start from zero
