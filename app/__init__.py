"""Cronwell: a database-backed, cron-like task scheduler.

`create_app()` builds the Flask app shared by the web UI, the CLI, the scheduler and the
worker. Nothing happens at import time; everything is wired here as a readable list of steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Flask

# Flask is imported inside the factory, not here: the executor's zygote imports `app.*` task
# modules and forks every task from itself, so whatever this package imports at module level
# is memory every fork copies and a slower fork.


def create_app(overrides: Mapping | None = None, env: Mapping[str, str] | None = None) -> Flask:
    """Application factory: settings from the environment, then `overrides` (tests)."""
    from flask import Flask

    from config import BASE_DIR, load_settings

    app = Flask(
        __name__,
        template_folder=str(BASE_DIR / "templates"),
        static_folder=str(BASE_DIR / "static"),
        instance_path=str(BASE_DIR / "instance"),
    )
    app.config.from_mapping(load_settings(env))
    if overrides:
        app.config.update(overrides)
    Path(app.config["INSTANCE_DIR"]).mkdir(parents=True, exist_ok=True)

    register_logging(app)
    register_extensions(app)
    register_blueprints(app)
    register_cli(app)
    return app


def register_logging(app: Flask) -> None:
    from app.logs import configure_logging

    configure_logging(app.config["LOG_FORMAT"], app.config["LOG_LEVEL"])


def register_extensions(app: Flask) -> None:
    from app import database
    from app.extensions import csrf, db, login_manager

    db.init_app(app)
    database.init_app(app)
    login_manager.init_app(app)
    csrf.init_app(app)
    from app.tasks import load_catalog

    load_catalog()
    from app import cache

    cache.init_app(app)


def register_blueprints(app: Flask) -> None:
    from app.api import register_api
    from app.web import register_web

    register_web(app)
    register_api(app)  # after the web: the API's problem documents wrap the web's error pages


def register_cli(app: Flask) -> None:
    from cli import register_commands

    register_commands(app)
