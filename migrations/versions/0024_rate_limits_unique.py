"""rate limits and unique runs

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06 01:00:00

- `jobs.unique` and `jobs.unique_key`: while a run of the job's key (the job itself unless a key
  is named) is pending, retrying or running, another trigger returns that run instead of adding one.
- `executions.unique_key` with the partial unique index `uq_executions_unique_key` over the
  waiting and in-flight statuses: the database, not a read-then-write, keeps it to one such run.
- `jobs.steps`: a workflow's steps (JSON), checked by the job definition.
- `rate_limit` (`N/second|minute|hour`) on jobs and queues, and `rate_starts`, the instants of the
  last N starts (epoch seconds, newest first) that the worker's claim keeps under the row's lock.
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

_JSON = sa.JSON().with_variant(JSONB(), "postgresql")
# The same text as the model's (SQLite matches an ON CONFLICT target's WHERE to it term by term).
_HELD = "unique_key IS NOT NULL AND status IN ('claimed', 'pending', 'retry_scheduled', 'running')"


def upgrade():
    # Columns are added in place (ALTER TABLE ADD COLUMN), never by a batch rebuild: see downgrade.
    op.add_column("jobs", sa.Column("unique", sa.Boolean(), nullable=False, server_default=sa.text("false")))
    op.add_column("jobs", sa.Column("unique_key", sa.String(length=200), nullable=True))
    op.add_column("jobs", sa.Column("rate_limit", sa.String(length=32), nullable=True))
    op.add_column("jobs", sa.Column("rate_starts", _JSON, nullable=True))
    op.add_column("jobs", sa.Column("steps", _JSON, nullable=True))
    op.add_column("queues", sa.Column("rate_limit", sa.String(length=32), nullable=True))
    op.add_column("queues", sa.Column("rate_starts", _JSON, nullable=True))
    op.add_column("executions", sa.Column("unique_key", sa.String(length=200), nullable=True))
    op.create_index(
        "uq_executions_unique_key",
        "executions",
        ["unique_key"],
        unique=True,
        postgresql_where=sa.text(_HELD),
        sqlite_where=sa.text(_HELD),
    )


def downgrade():
    # Each column is dropped in place (SQLite 3.35+ and PostgreSQL alike), never by a batch rebuild
    # of the table: on SQLite a rebuild drops the table's AUTOINCREMENT and turns its column checks
    # into table checks, after which an older migration's DROP COLUMN of a checked column fails.
    op.drop_index("uq_executions_unique_key", table_name="executions")
    for table, columns in (
        ("executions", ("unique_key",)),
        ("queues", ("rate_starts", "rate_limit")),
        ("jobs", ("steps", "rate_starts", "rate_limit", "unique_key", "unique")),
    ):
        for column in columns:
            op.execute(f'ALTER TABLE {table} DROP COLUMN "{column}"')
