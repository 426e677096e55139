"""Cronwell: a database-backed, cron-like task scheduler.

`create_app()` builds the Flask app shared by the web UI, the CLI, the scheduler and the
worker. Nothing happens at import time; everything is wired here as a readable list of steps.

The app comes in kinds (`KINDS`). "web" is the whole app: pages, the REST API, sign-in and every
CLI command; the web server, the tests and Flask's own commands get it. `flask worker run`
and `flask scheduler run` get a "worker" or "scheduler" app instead (`process_kind` reads the
command line): the same settings, logging, cache and task catalog, no blueprints, no sign-in or
CSRF, and only their own command group; the scheduler's has the database, the worker's does not
(its command hands over to `python -m app.worker_process`, which opens its own connections). They never serve a request, and the web
stack (blueprints, WTForms, flask-smorest, marshmallow schemas, the request limits, the JWT manager,
OpenAPI generation) is about a fifth of a worker's memory (docs/performance.md, "Memory").
Any other command of Cronwell's (`flask job add`, `flask db upgrade`, ...) gets a "cli" app: the
database and the task catalog, no web stack, and its commands registered lazily (cli/__init__.py:
only the module of the command that runs is imported); `flask` alone or `flask --help` gets a
"help" app, which has nothing but the lazy command list. Flask's own `run`, `shell` and `routes`
get the web app.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Flask

# Flask (and even pathlib, which brings urllib.parse and ipaddress) is imported inside the
# functions, not here: the executor's zygote imports `app.*` task modules and forks every task
# from itself, so whatever this package imports at module level is memory every fork copies and
# a slower fork.


WEB = "web"
WORKER = "worker"
SCHEDULER = "scheduler"
CLI = "cli"
HELP = "help"
KINDS = (WEB, WORKER, SCHEDULER, CLI, HELP)
# Options the `flask` command itself takes before the command name, and whether each takes a value.
_FLASK_OPTIONS = {"--app": True, "-A": True, "--env-file": True, "-e": True, "--debug": False, "--no-debug": False}


def process_kind(argv: list[str]) -> str:
    """The app kind a process started with `argv` needs: "worker" for `flask worker run`,
    "scheduler" for `flask scheduler run` (or the same under `python -m cli`), "cli" for any other
    command of Cronwell's, "help" for `flask` alone or `flask --help`, "web" for anything else
    (gunicorn, Flask's own commands)."""
    from pathlib import PurePath

    program = PurePath(argv[0]) if argv else PurePath()
    # `flask`, `python -m flask`, and `python -m cli` (cli/__main__.py: flask without its plugins)
    if program.name != "flask" and program.parts[-2:] not in (("flask", "__main__.py"), ("cli", "__main__.py")):
        return WEB
    words = iter(argv[1:])
    command: list[str] = []
    for word in words:
        if word.startswith("-"):
            name = word.split("=", 1)[0]
            if _FLASK_OPTIONS.get(name) and "=" not in word:
                next(words, None)
            if name not in _FLASK_OPTIONS:
                return HELP  # --help, --version: the command list
            continue
        command = [word, *words][:2]
        break
    if not command:
        return HELP
    if command == ["worker", "run"]:
        return WORKER
    if command == ["scheduler", "run"]:
        return SCHEDULER
    from cli import NAMES

    return CLI if command[0] in NAMES else WEB


def create_app(
    overrides: Mapping | None = None, env: Mapping[str, str] | None = None, *, kind: str | None = None
) -> Flask:
    """Application factory: settings from the environment, then `overrides` (tests).

    `kind` is one of `KINDS`; by default the process's command line decides (`process_kind`), so
    both ways `flask` finds the app (FLASK_APP=app calls this factory, else wsgi.py does) agree."""
    if kind is None:
        kind = process_kind(sys.argv)
    if kind not in KINDS:
        raise ValueError(f"unknown app kind {kind!r}; expected one of {', '.join(KINDS)}")
    from pathlib import Path

    from flask import Flask

    from config import APP_INSTANCE_PATH, BASE_DIR, load_settings

    app = Flask(
        __name__,
        template_folder=str(BASE_DIR / "templates"),
        static_folder=str(BASE_DIR / "static"),
        instance_path=str(APP_INSTANCE_PATH),
    )
    app.config.from_mapping(load_settings(env))
    if overrides:
        app.config.update(overrides)
    Path(app.config["INSTANCE_DIR"]).mkdir(parents=True, exist_ok=True)

    register_logging(app)
    if kind == SCHEDULER:
        options = app.config["SQLALCHEMY_ENGINE_OPTIONS"]
        app.config["SQLALCHEMY_ENGINE_OPTIONS"] = {**options, "pool_pre_ping": False}
        app.config["DATABASE_PING_AFTER_IDLE"] = bool(options.get("pool_pre_ping"))
    if kind != HELP:
        register_extensions(app, web=kind == WEB, database=kind != WORKER)
    if kind == WEB:
        register_blueprints(app)
    register_cli(app, only=kind if kind in (WORKER, SCHEDULER) else None, lazy=kind in (CLI, HELP))
    return app


def register_logging(app: Flask) -> None:
    from app.logs import configure_logging

    configure_logging(app.config["LOG_FORMAT"], app.config["LOG_LEVEL"])


def register_extensions(app: Flask, *, web: bool = True, database: bool = True) -> None:
    if database:
        # Not for the worker kind: `worker run` only checks its options before it becomes
        # `python -m app.worker_process`, which opens its own connections (app/sql/connections.py),
        # so SQLAlchemy and the models never enter that process.
        from app import database as engine_setup
        from app import secret_box
        from app.extensions import db

        db.init_app(app)
        engine_setup.init_app(app)
        secret_box.init_app(app)  # the channels' columns seal and open with it
    if web:
        from app.extensions import csrf, login_manager

        login_manager.init_app(app)
        csrf.init_app(app)
    app.extensions["cronwell.task_load_errors"] = load_task_catalog(app.config.get("CRONWELL_TASK_MODULES", ""))
    from app import cache

    cache.init_app(app, sessions=database)


def load_task_catalog(modules: str) -> list[str]:
    """Load the built-in and the deployer's tasks; a module that cannot be loaded stops the
    process with one line on stderr and exit code 1 (the traceback too with `--debug`).

    `flask task check` is the exception: it gets the problems (returned here) to list them all."""
    from app.tasks import load_catalog
    from app.tasks.loading import TaskModuleError

    errors: list[str] | None = [] if _command(sys.argv) == ["task", "check"] else None
    try:
        load_catalog(modules, errors)
    except TaskModuleError as exc:
        if _debugging():
            raise
        print(f"Error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    return errors or []


def _command(argv: list[str]) -> list[str]:
    """The first two words after the program's own options (`flask --app x task check` -> task, check)."""
    words = iter(argv[1:])
    for word in words:
        if word.startswith("-"):
            if _FLASK_OPTIONS.get(word.split("=", 1)[0]) and "=" not in word:
                next(words, None)
            continue
        return [word, *words][:2]
    return []


def _debugging() -> bool:
    import os

    return "--debug" in sys.argv or os.environ.get("FLASK_DEBUG", "").lower() in ("1", "true", "yes")


def register_blueprints(app: Flask) -> None:
    from app.api import register_api
    from app.web import register_web

    register_web(app)
    register_api(app)  # after the web: the API's problem documents wrap the web's error pages


def register_cli(app: Flask, only: str | None = None, *, lazy: bool = False) -> None:
    from cli import register_commands

    register_commands(app, only=only, lazy=lazy)
