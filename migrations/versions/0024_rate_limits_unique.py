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
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("unique", sa.Boolean(), nullable=False, server_default=sa.text("false")))
        batch.add_column(sa.Column("unique_key", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("rate_limit", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("rate_starts", _JSON, nullable=True))
        batch.add_column(sa.Column("steps", _JSON, nullable=True))
    with op.batch_alter_table("queues") as batch:
        batch.add_column(sa.Column("rate_limit", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("rate_starts", _JSON, nullable=True))
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("unique_key", sa.String(length=200), nullable=True))
    op.create_index(
        "uq_executions_unique_key",
        "executions",
        ["unique_key"],
        unique=True,
        postgresql_where=sa.text(_HELD),
        sqlite_where=sa.text(_HELD),
    )


def downgrade():
    op.drop_index("uq_executions_unique_key", table_name="executions")
    with op.batch_alter_table("executions") as batch:
        batch.drop_column("unique_key")
    with op.batch_alter_table("queues") as batch:
        batch.drop_column("rate_starts")
        batch.drop_column("rate_limit")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("steps")
        batch.drop_column("rate_starts")
        batch.drop_column("rate_limit")
        batch.drop_column("unique_key")
        batch.drop_column("unique")
