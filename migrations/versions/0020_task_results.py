"""task results: what a run's task returned, and which version of the task ran it

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06 01:00:00

- `executions.result`: the JSON text of the value the task returned (NULL when it returned
  None or did not succeed), kept apart from `output` (what it printed). At most RESULT_MAX_BYTES.
- `executions.task_version`: the code version of the task that ran the last attempt (its
  distribution's version, or a hash of its module file).
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("executions", sa.Column("result", sa.Text(), nullable=True))
    op.add_column("executions", sa.Column("task_version", sa.String(length=100), nullable=True))


def downgrade():
    # In place, never a batch rebuild of executions (on SQLite a rebuild drops its AUTOINCREMENT).
    for column in ("task_version", "result"):
        op.execute(f"ALTER TABLE executions DROP COLUMN {column}")
