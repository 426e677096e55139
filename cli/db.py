"""`flask db ...`: schema migrations with Flask-Migrate, imported only when `flask db` runs.

Flask-Migrate (and with it Alembic, Mako and Pygments, about 10 MB) is not set up in create_app:
every `flask` process, the worker and the scheduler included, would carry it for nothing
(docs/adr/0007-own-db-command-over-alembic.md). `db_cli` is registered like every other command
group, but it becomes Flask-Migrate's own `db` group, and registers `Migrate` on the app, only
when a `flask db ...` command line is parsed. Flask-Migrate 4.x installs no `flask.commands`
entry point, so nothing else imports it.

On top of Flask-Migrate's commands, three house rules the deploys and the runbook rely on:
errors are one `Error: ...` line and exit 1 (a database that cannot be reached too),
`downgrade` needs an explicit REVISION (`-1`, `0001` or `base`: no silent one-step default), and
new revisions are numbered (`0004` after `0003`) unless `--rev-id` says otherwise.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

import click
from flask import current_app
from flask.cli import ScriptInfo
from sqlalchemy.exc import OperationalError

from app.extensions import MIGRATIONS_DIR, db

if TYPE_CHECKING:
    from alembic.config import Config
    from flask import Flask
    from flask_migrate import Migrate

# What env.py reads from `current_app.extensions["migrate"].configure_args`: compare column types
# in autogenerate, and render ALTERs as batch operations (SQLite rebuilds the table; PostgreSQL
# runs plain ALTER TABLE), so one style of migration file works on both databases.
MIGRATE_OPTIONS = {"compare_type": True, "render_as_batch": True}


def migrate_for(app: Flask) -> Migrate:
    """The app's Flask-Migrate extension, set up on first use (this imports Alembic)."""
    from flask_migrate import Migrate

    if "migrate" not in app.extensions:
        Migrate(app, db, directory=str(MIGRATIONS_DIR), **MIGRATE_OPTIONS)
    return app.extensions["migrate"].migrate


def alembic_config() -> Config:
    """Flask-Migrate's Alembic configuration for the current app (what `flask db upgrade` uses)."""
    return migrate_for(current_app._get_current_object()).get_config()


class _MigrateGroup(click.Group):
    """A stand-in for Flask-Migrate's `db` group that loads it when a `flask db` line is parsed.

    `flask --help` only reads the help text below; `flask db ...` takes over Flask-Migrate's
    options, callback and subcommands, then runs them with database errors as one line.
    """

    def __init__(self) -> None:
        super().__init__("db", help="Migrate the database schema (Flask-Migrate, migrations/).")
        self._loaded = False

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any):
        self._load()
        return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        if not current_app:  # `flask db` pushed it already; a bare CliRunner may not have
            ctx.with_resource(ctx.ensure_object(ScriptInfo).load_app().app_context())
        migrate_for(current_app._get_current_object())
        try:
            return super().invoke(ctx)
        except OperationalError as exc:  # cannot connect, or the database refused us
            raise click.ClickException(_one_line(f"database error: {getattr(exc, 'orig', None) or exc}")) from None

    def _load(self) -> None:
        if self._loaded:
            return
        from flask_migrate.cli import db as flask_migrate_group

        self.params = flask_migrate_group.params
        self.callback = flask_migrate_group.callback
        self.commands = flask_migrate_group.commands
        _require_downgrade_revision(self.commands["downgrade"])
        self.commands["upgrade"].ignore_unknown_options = True  # `upgrade +1`
        for name in ("revision", "migrate", "merge"):
            _number_new_revisions(self.commands[name])
        _errors_as_one_line()
        self._loaded = True


def _require_downgrade_revision(command: click.Command) -> None:
    """Flask-Migrate's `downgrade` defaults to -1; ours needs the target spelled out."""
    command.params = [
        click.Argument(["revision"], required=True) if param.name == "revision" else param for param in command.params
    ]
    command.ignore_unknown_options = True  # `downgrade -1` is a revision, not an option


def _number_new_revisions(command: click.Command) -> None:
    for param in command.params:
        if param.name == "rev_id":
            param.default = _next_rev_id
            param.show_default = "the next number, e.g. 0004 after 0003"


def _next_rev_id() -> str | None:
    """Our revisions are numbered (0001, 0002, ...): the next number; Alembic's random id otherwise."""
    from alembic.script import ScriptDirectory

    ids = [script.revision for script in ScriptDirectory(str(MIGRATIONS_DIR)).walk_revisions()]
    if not all(rev.isdigit() for rev in ids):
        return None
    return f"{max(map(int, ids), default=0) + 1:04d}"


class _OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return _one_line(record.getMessage())


def _errors_as_one_line() -> None:
    """Flask-Migrate logs `Error: <Alembic's refusal>` and exits 1: print it as the bare line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    logger = logging.getLogger("flask_migrate")
    logger.handlers[:] = [handler]
    logger.propagate = False


def _one_line(message: str) -> str:
    return " ".join(part.strip() for part in message.splitlines() if part.strip()) or "failed"


db_cli = _MigrateGroup()
