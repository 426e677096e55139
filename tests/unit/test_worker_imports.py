"""`flask worker run` and `flask scheduler run` build an app without the web, for their memory.

Not a size test: it checks the reason for the size. Each probe is a fresh interpreter that goes
through the real `flask` command line (`flask.cli.main` with the process's argv, so the app kind
comes from `app.process_kind` as in production), then imports what the command imports when it
starts its loop, and lists the modules it holds. The web stack (blueprints, WTForms,
flask-smorest/apispec/webargs, flask-jwt-extended, the other command modules) is most of the
memory the worker parent used to carry and none of it is used there; Flask-Login and gunicorn
are not imported there either. No installed package adds a Flask plugin command (Flask imports
every plugin command into every `flask` process before it reads the command line); `python -m
cli` (cli/__main__.py) is the same command line without that scan, should one ever be installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import click
import pytest

from app import CLI, HELP, SCHEDULER, WEB, WORKER, create_app, process_kind
from config import BASE_DIR
from tests.helpers.databases import app_env_for

# Top-level packages a worker or scheduler must not import.
WEB_PACKAGES = (
    "flask_wtf",
    "wtforms",
    "flask_smorest",
    "apispec",
    "webargs",
    "marshmallow",
    "flask_jwt_extended",
    "jwt",
    "flask_login",  # only sign-in needs it (User answers Flask-Login's questions itself)
    "gunicorn",  # only the web server (its logger class lives in app/gunicorn_logs.py)
    "limits",  # the API's and the sign-in's request limits (app/request_limits.py)
)
# What Flask's plugin scan brought into every `flask` process while Flask-Limiter was installed:
# its `flask limiter` command, with limits, rich and asyncio.
PLUGIN_PACKAGES = ("flask_limiter", "limits", "rich")
# Cronwell modules only the web server and the other commands need.
WEB_MODULES = ("app.web", "app.api", "app.auth", "app.dashboard", "app.metrics_routes", "cli.job", "cli.demo")

# What the worker parent loaded without calling it: app.scheduling with croniter
# and dateutil (cli/common.py imported it for its error type and time-zone helpers; only the
# scheduler and the job commands use it), and the read side and use cases `worker list` and `worker
# stop` need (scoping, callers, permissions). Prefixes: each package with everything below it.
WORKER_ABSENT = (
    # ADR 0012: the worker app kind has no database (its command hands over to app.worker_process)
    "sqlalchemy",
    "flask_sqlalchemy",
    "app.models",
    "app.store",
    "croniter",
    "dateutil",
    "app.scheduling",
    "app.services.read",
    "app.services.scoping",
    "app.services.caller",
    "app.services.use_cases",
)

ENGINE_MODULE = {WORKER: "app.services.engine.worker", SCHEDULER: "app.services.engine.scheduler"}


# How the probe starts the command line: as the `flask` script does, or as `python -m cli` does
# (runpy runs cli/__main__.py as __main__ with argv[0] set to its path, as -m does).
FLASK = "from flask.cli import main; sys.argv = ['flask', *COMMAND]; main()"
PYTHON_M_CLI = "import runpy; sys.argv = ['-m', *COMMAND]; runpy.run_module('cli', run_name='__main__', alter_sys=True)"


def _modules_after(command: list[str], then_import: str, tmp_path, flask_app: str | None, entry: str = FLASK) -> dict:
    probe = (
        "import sys, json\n"
        f"COMMAND = {[*command, '--help']!r}\n"
        "try:\n"
        f"    {entry}\n"
        "except SystemExit:\n"
        "    pass\n"
        f"import {then_import}\n"
        "print(json.dumps({'modules': sorted(sys.modules)}))\n"
    )
    env = {**os.environ, **app_env_for(f"sqlite:///{tmp_path / 'probe.db'}", tmp_path)}
    if flask_app:
        env["FLASK_APP"] = flask_app
    else:
        env.pop("FLASK_APP", None)
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env, cwd=BASE_DIR
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _not_for_the_worker(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if any(m == w or m.startswith(w + ".") for w in WORKER_ABSENT))


def _web_parts(modules: list[str]) -> list[str]:
    found = [m for m in modules if m.split(".")[0] in WEB_PACKAGES]
    found += [m for m in modules if any(m == w or m.startswith(w + ".") for w in WEB_MODULES)]
    found += [m for m in modules if m.endswith(".routes")]
    return sorted(found)


@pytest.mark.parametrize("kind", [WORKER, SCHEDULER])
@pytest.mark.parametrize("flask_app", [None, "app"], ids=["wsgi.py", "FLASK_APP=app"])
def test_worker_and_scheduler_processes_do_not_import_the_web(kind, flask_app, tmp_path):
    modules = _modules_after([kind, "run"], ENGINE_MODULE[kind], tmp_path, flask_app)["modules"]
    assert ENGINE_MODULE[kind] in modules
    assert _web_parts(modules) == []
    if kind == WORKER:
        assert _not_for_the_worker(modules) == []


def test_the_probe_sees_the_web_stack_in_other_commands(tmp_path):
    """The same probe on a command that is not Cronwell's (the web app is loaded to look for it)
    finds the web parts: the check above can fail."""
    modules = _modules_after(["not-ours"], "app.services.engine.worker, app.gunicorn_logs", tmp_path, None)
    assert "app.web" in modules["modules"]
    assert "flask_smorest" in modules["modules"]
    assert "flask_login" in modules["modules"]
    assert "gunicorn.glogging" in modules["modules"]
    assert "limits" in modules["modules"]


# What only the web server needs: pages, the API, sign-in, forms, the server (the definitions'
# marshmallow schemas are the commands' too).
WEB_SERVER_ONLY = ("app.web", "app.api", "app.auth", "app.dashboard", "flask_smorest", "flask_wtf", "wtforms")
WEB_SERVER_ONLY += ("flask_login", "flask_jwt_extended", "gunicorn")


def _web_server_parts(modules: list[str]) -> list[str]:
    found = [m for m in modules if any(m == w or m.startswith(w + ".") for w in WEB_SERVER_ONLY)]
    return sorted(found + [m for m in modules if m.endswith(".routes")])


def _command_modules(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if m.startswith("cli.") and m not in ("cli.common", "cli.job_fields"))


@pytest.mark.parametrize("flask_app", [None, "app"], ids=["wsgi.py", "FLASK_APP=app"])
def test_a_command_imports_its_own_module_only_and_no_web(flask_app, tmp_path):
    """Start-up is paid by every command: `flask job add` loads cli/job.py (and what it needs),
    not the other commands' modules nor the web stack; `flask --help` loads no command module
    and not SQLAlchemy (the lazy commands, cli/__init__.py)."""
    modules = _modules_after(["job", "add"], "json", tmp_path, flask_app)["modules"]
    assert _web_server_parts(modules) == []
    assert "cli.job" in modules
    assert {"cli.token", "cli.demo", "cli.db", "cli.audit", "cli.batch", "cli.verify"} & set(modules) == set()
    listing = _modules_after([], "json", tmp_path, flask_app)["modules"]
    assert _command_modules(listing) == []
    assert [m for m in listing if m.split(".")[0] in ("sqlalchemy", "flask_sqlalchemy")] == []
    assert _web_parts(listing) == []


def _plugin_parts(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in PLUGIN_PACKAGES)


@pytest.mark.parametrize("kind", [WORKER, SCHEDULER])
@pytest.mark.parametrize("flask_app", [None, "app"], ids=["wsgi.py", "FLASK_APP=app"])
def test_python_m_cli_runs_them_lean_and_without_flask_plugins(kind, flask_app, tmp_path):
    modules = _modules_after([kind, "run"], ENGINE_MODULE[kind], tmp_path, flask_app, entry=PYTHON_M_CLI)["modules"]
    assert ENGINE_MODULE[kind] in modules
    assert _web_parts(modules) == []  # the lean kind: process_kind knows cli/__main__.py
    assert _plugin_parts(modules) == []
    if kind == WORKER:
        assert _not_for_the_worker(modules) == []


def test_the_probe_sees_what_the_worker_does_without_elsewhere(tmp_path):
    """The scheduler loads croniter and `worker list` the read side: the worker's check can fail."""
    scheduler = _modules_after([SCHEDULER, "run"], ENGINE_MODULE[SCHEDULER], tmp_path, None, entry=PYTHON_M_CLI)
    assert {"croniter", "dateutil", "app.scheduling", "sqlalchemy", "app.models", "app.store"} <= set(
        _not_for_the_worker(scheduler["modules"])
    )
    listing = _modules_after([WORKER, "list"], "app.services.read.workers", tmp_path, None, entry=PYTHON_M_CLI)
    assert {"app.services.read.workers", "app.services.scoping"} <= set(_not_for_the_worker(listing["modules"]))


@pytest.mark.parametrize("kind", [WORKER, SCHEDULER, "job"])
def test_flask_itself_loads_no_plugin_packages(kind, tmp_path):
    """Through the `flask` script too: no plugin command brings limits or rich into a process that
    serves no request."""
    modules = _modules_after([kind] if kind == "job" else [kind, "run"], "json", tmp_path, "app")["modules"]
    assert _plugin_parts(modules) == []


def test_python_m_cli_has_flasks_commands(app):
    """The same command line as `flask`, and `flask` itself has no plugin commands: a package that
    adds one fails this test (its command would load into every `flask` process)."""
    from flask.cli import ScriptInfo
    from flask.cli import cli as flask_cli

    from cli.__main__ import cli as cronwell_cli

    def names(group) -> set[str]:
        ctx = click.Context(group, obj=ScriptInfo(create_app=lambda: app))
        return set(group.list_commands(ctx))

    ours = names(cronwell_cli)
    assert {"worker", "scheduler", "job", "db", "run", "shell", "routes"} <= ours
    assert names(flask_cli) == ours


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (["/venv/bin/flask", "worker", "run", "--workers", "8"], WORKER),
        (["flask", "scheduler", "run"], SCHEDULER),
        (["flask", "--app", "wsgi", "worker", "run"], WORKER),
        (["flask", "-A", "app", "--debug", "scheduler", "run", "--once"], SCHEDULER),
        (["flask", "--env-file=.env", "worker", "run"], WORKER),
        (["/x/site-packages/flask/__main__.py", "worker", "run"], WORKER),
        (["/srv/cronwell/cli/__main__.py", "worker", "run", "--workers", "4"], WORKER),
        (["/srv/cronwell/cli/__main__.py", "--app", "app", "scheduler", "run"], SCHEDULER),
        (["/srv/cronwell/cli/__main__.py", "job", "list"], CLI),
        (["flask", "worker", "list"], CLI),
        (["flask", "worker"], CLI),
        (["flask", "job", "run"], CLI),
        (["flask", "--app", "app", "db", "upgrade"], CLI),
        (["flask", "prune-history"], CLI),
        (["flask", "--help"], HELP),
        (["flask", "--version"], HELP),
        (["flask"], HELP),
        (["flask", "--debug"], HELP),
        (["flask", "run", "--port", "5000"], WEB),
        (["flask", "routes"], WEB),
        (["flask", "shell"], WEB),
        (["flask", "openapi", "print"], WEB),
        (["gunicorn", "--config", "gunicorn.conf.py", "wsgi:app"], WEB),
        (["/venv/bin/pytest", "worker", "run"], WEB),
        ([], WEB),
    ],
)
def test_process_kind_from_the_command_line(argv, kind):
    assert process_kind(argv) == kind


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown app kind 'wokrer'"):
        create_app(kind="wokrer")


_RECORDING_PROBE = """
import json, sys
from app import metrics
if sys.argv[1] == "serving":
    metrics.enable_recording()  # what metrics_exposition.serve does for --metrics-port, and the web at start
metrics.observe_claim(3)
metrics.observe_outcome("succeeded", retried=False)
metrics.observe_dead_letter("failed")
metrics.observe_cancelled()
loaded = "prometheus_client" in sys.modules
finished = loaded and sys.modules["prometheus_client"].REGISTRY.get_sample_value(
    "cronwell_executions_finished_total", {"status": "succeeded"}
)
print(json.dumps({"loaded": loaded, "finished": finished}))
"""


@pytest.mark.parametrize(
    ("mode", "multiprocess", "expected"),
    [
        ("unread", False, {"loaded": False, "finished": False}),
        ("serving", False, {"loaded": True, "finished": 1.0}),
        ("unread", True, {"loaded": True, "finished": 1.0}),  # and written where the web sums them
    ],
)
def test_a_worker_records_metrics_only_where_they_are_read(mode, multiprocess, expected, tmp_path):
    """Without --metrics-port (and PROMETHEUS_MULTIPROC_DIR) nothing can read a worker's or a
    scheduler's counters: they are skipped and prometheus_client is never imported (1 MB)."""
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    if multiprocess:
        env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", _RECORDING_PROBE, mode],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=BASE_DIR,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout) == expected
    if multiprocess:
        assert list(tmp_path.glob("counter_*.db"))
