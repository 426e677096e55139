"""index the foreign keys that deleting executions has to follow

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29 12:45:00

Deleting an execution (retention, `flask prune-history`) makes the database find the rows that
point at it: its retries (executions.retry_of_id, ON DELETE SET NULL) and its alerts
(alerts.execution_id, ON DELETE SET NULL). Neither column was indexed, so every deleted row
scanned the whole executions table: at 1.2M rows, deleting 200 executions took 33 s and held the
scheduler's retention transaction that long. Attempts and dead letters were already covered by
their unique indexes on execution_id.

retry_of_id is indexed only where set: retries are a small share of executions, and the index
then costs nothing on the hot path (claims and completions never set it).
On PostgreSQL the indexes are built CONCURRENTLY, as in 0002.
"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

_WHERE = sa.text("retry_of_id IS NOT NULL")


def upgrade():
    postgres = op.get_bind().dialect.name == "postgresql"
    options = dict(postgresql_concurrently=True, if_not_exists=True) if postgres else {}

    def build():
        op.create_index("ix_executions_retry_of_id", "executions", ["retry_of_id"],
                        postgresql_where=_WHERE, sqlite_where=_WHERE, **options)
        op.create_index("ix_alerts_execution_id", "alerts", ["execution_id"], **options)

    if postgres:
        with op.get_context().autocommit_block():
            build()
    else:
        build()


def downgrade():
    postgres = op.get_bind().dialect.name == "postgresql"
    options = dict(postgresql_concurrently=True, if_exists=True) if postgres else {}

    def drop():
        op.drop_index("ix_alerts_execution_id", table_name="alerts", **options)
        op.drop_index("ix_executions_retry_of_id", table_name="executions", **options)

    if postgres:
        with op.get_context().autocommit_block():
            drop()
    else:
        drop()
