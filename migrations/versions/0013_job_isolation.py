"""pooled isolation (issue 19): a job runs in a fresh process or in a reused pool process

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


def upgrade():
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("isolation", sa.String(length=10), server_default="process", nullable=False))
    with op.batch_alter_table("jobs") as batch:
        batch.create_check_constraint(op.f("ck_jobs_isolation"), sa.text("isolation IN ('process', 'pool')"))


def downgrade():
    # Pool jobs run in a fresh process per attempt again: the older schema has only that.
    with op.batch_alter_table("jobs") as batch:
        batch.drop_constraint(op.f("ck_jobs_isolation"), type_="check")
        batch.drop_column("isolation")
