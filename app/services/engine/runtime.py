"""What the worker engine runs on instead of a Flask app (docs/adr/0012-worker-parent-on-dbapi.md).

A worker needs three things from its surroundings: its settings (`config.load_settings`'s
mapping, or a Flask app's `config`, which is the same mapping), its database as bare DB-API
connections (`app.sql.connections.Database`: psycopg or sqlite3, configured as every Cronwell
connection is), and the dashboard cache whose keys it deletes when it changed what a page
shows. None of them needs SQLAlchemy or Flask, so the worker parent can run without either.

`from_settings` builds the runtime from the settings alone (the worker process);
`from_app` builds it from a Flask app (tests, and whatever already has an app), sharing that
app's cache, so a test that reads the dashboard sees what the worker invalidated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app import cache as dashboard_cache
from app.sql.connections import Database

if TYPE_CHECKING:
    from flask import Flask


@dataclass
class WorkerRuntime:
    settings: Mapping[str, Any]
    database: Database
    cache: dashboard_cache.Cache | None = None  # None: nobody reads what this process would delete

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> WorkerRuntime:
        # Without Redis the dashboard cache is each process's own dict: what a worker deleted
        # there would never reach the web's, so it keeps none.
        cache = dashboard_cache.from_settings(settings) if settings.get("REDIS_URL") else None
        return cls(settings, database_from_settings(settings, settings["SQLALCHEMY_DATABASE_URI"]), cache)

    @classmethod
    def from_app(cls, app: Flask) -> WorkerRuntime:
        # The URL the app's engine opens, too: config.absolute_sqlite_url resolved a relative
        # SQLite path as Flask-SQLAlchemy would, so no engine is needed to know it (the worker
        # app kind has none).
        url = app.config["SQLALCHEMY_DATABASE_URI"]
        return cls(app.config, database_from_settings(app.config, url), app.extensions.get("cronwell_cache"))


def database_from_settings(settings: Mapping[str, Any], url: str) -> Database:
    return Database(
        url,
        transaction_pooling=bool(settings.get("DATABASE_TRANSACTION_POOLING")),
        listen_url=settings.get("DATABASE_LISTEN_URL"),
    )
