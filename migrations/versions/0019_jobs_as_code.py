"""jobs as code: the file (or API source) that owns a job

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04 18:00:00

- `jobs.managed_by`: the source whose `flask job apply` (or `POST .../apply`) last created or
  updated the job, e.g. `file:jobs/nightly.yaml`; NULL for a job made by hand. `--prune` deletes
  only jobs managed by the source being applied, so hand-made jobs are never pruned.
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("managed_by", sa.String(length=300), nullable=True))


def downgrade():
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("managed_by")
