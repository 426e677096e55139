"""Alembic environment, run by `flask db ...` (Flask-Migrate, set up by cli/db.py) in the app context.

The engine and the metadata are the app's own `db` as registered with Flask-Migrate, so migrations
run against exactly the database the app is configured for (DATABASE_URL) and autogenerate
compares with the models.
"""

import logging
from logging.config import fileConfig

from alembic import context
from flask import current_app

# On PostgreSQL autogenerate skips the foreign keys to executions that triggers enforce (0016).
from app.models.execution import autogenerate_filter

config = context.config
migrate = current_app.extensions["migrate"]  # flask_migrate._MigrateConfig: its db and options
db = migrate.db

# Alembic's progress lines (INFO) on stderr; keep the application's loggers alive when migrations
# run inside an already configured process (the tests, `flask db`).
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)
logger = logging.getLogger("alembic.env")

# compare_type and render_as_batch, given to Migrate in cli/db.py (MIGRATE_OPTIONS).
CONFIGURE_ARGS = migrate.configure_args


def render_item(type_, obj, autogen_context):
    """Render UTCDateTime as the plain DateTime it is in DDL, so migrations import no app code."""
    from app.models.types import UTCDateTime

    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def skip_empty_autogenerate(context, revision, directives):
    """With --autogenerate and no schema change, write no (empty) revision file."""
    if getattr(config.cmd_opts, "autogenerate", False) and directives[0].upgrade_ops.is_empty():
        directives[:] = []
        logger.info("No changes in schema detected.")


def run_migrations_offline():
    """`--sql`: print the SQL for the database's dialect instead of running it."""
    context.configure(
        url=db.engine.url,
        target_metadata=db.metadata,
        literal_binds=True,
        render_item=render_item,
        include_object=autogenerate_filter(db.engine.dialect.name),
        **CONFIGURE_ARGS,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online():
    """Run the migrations on a connection from the app's engine, in one transaction."""
    with db.engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # SQLite changes a table by copying it into a new one and dropping the old one; with
            # foreign keys enforced, dropping `jobs` would cascade-delete every execution. The
            # pragma only takes effect outside a transaction, so it is set on the driver connection before
            # ours begins, and the keys are checked before the migration commits.
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
        context.configure(
            connection=connection,
            target_metadata=db.metadata,
            render_item=render_item,
            include_object=autogenerate_filter(connection.dialect.name),
            process_revision_directives=skip_empty_autogenerate,
            **CONFIGURE_ARGS,
        )
        try:
            with context.begin_transaction():
                context.run_migrations()
                if sqlite:
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise RuntimeError(f"migration left rows whose foreign keys point nowhere: {broken[:5]}")
        finally:
            if sqlite:
                connection.connection.driver_connection.execute("PRAGMA foreign_keys=ON")


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
