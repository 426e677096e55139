"""jobs as code: the file (or API source) that owns a job

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04 18:00:00

- `jobs.managed_by`: the source whose `flask job apply` (or `POST .../apply`) last created or
  updated the job, e.g. `file:jobs/nightly.yaml`; NULL for a job made by hand. `--prune` deletes
  only jobs managed by the source being applied, so hand-made jobs are never pruned.

On SQLite both directions are a plain ALTER TABLE, never a batch rebuild of jobs: a rebuild
drops the table's AUTOINCREMENT (migration 0008; ids of deleted jobs would be handed out again)
and turns the column checks into table checks, after which SQLite refuses to drop the checked
column (`isolation`, migration 0013's downgrade).
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade():
    op.add_column("jobs", sa.Column("managed_by", sa.String(length=300), nullable=True))


def downgrade():
    # SQLite (3.35+) drops an unindexed, unconstrained column in place.
    op.execute("ALTER TABLE jobs DROP COLUMN managed_by")
