"""pooled isolation: a job runs in a fresh process or in a reused pool process

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 05:00:00

- jobs gain `isolation` ('process' | 'pool', default 'process'): every existing job keeps a
  fresh process per attempt; `pool` runs attempts in long-lived forked pool processes
  (app/executor/pool.py, docs/tasks.md "Isolation").
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_CHECK = "isolation IN ('process', 'pool')"


def upgrade():
    if op.get_bind().dialect.name == "sqlite":
        # A plain ADD COLUMN with its check inline: a batch rebuild of jobs would drop the table's
        # AUTOINCREMENT (migration 0008), and ids of deleted jobs would be handed out again.
        op.execute(
            "ALTER TABLE jobs ADD COLUMN isolation VARCHAR(10) DEFAULT 'process' NOT NULL"
            f" CONSTRAINT ck_jobs_isolation CHECK ({_CHECK})"
        )
        return
    op.add_column("jobs", sa.Column("isolation", sa.String(length=10), server_default="process", nullable=False))
    op.create_check_constraint(op.f("ck_jobs_isolation"), "jobs", sa.text(_CHECK))


def downgrade():
    # Pool jobs run in a fresh process per attempt again: the older schema has only that.
    if op.get_bind().dialect.name == "sqlite":
        # SQLite (3.35+) drops a column whose only constraint is its own check, without a rebuild.
        op.execute("ALTER TABLE jobs DROP COLUMN isolation")
        return
    op.drop_constraint(op.f("ck_jobs_isolation"), "jobs", type_="check")
    op.drop_column("jobs", "isolation")
