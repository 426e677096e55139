"""a display time zone per user; the event log's indexes for its list

Revision ID: 0022
Revises: 0019
Create Date: 2026-12-06 01:20:00

- `users.time_zone`: the IANA zone every page shows that user's times in (default `UTC`).
- `events`: `(type, id)`, `(job_id, id)` and `(job_id, type, id)` replace the single-column
  `job_id` index, so the events list (newest first, by kind, by job or both, paged by id) walks
  an index backwards from its cursor instead of sorting or scanning every matching row.
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("users") as batch:
        batch.add_column(sa.Column("time_zone", sa.String(length=64), nullable=False, server_default="UTC"))
    with op.batch_alter_table("events") as batch:
        batch.create_index("ix_events_type_id", ["type", "id"], unique=False)
        batch.create_index("ix_events_job_id_id", ["job_id", "id"], unique=False)
        batch.create_index("ix_events_job_id_type_id", ["job_id", "type", "id"], unique=False)
        batch.drop_index("ix_events_job_id")


def downgrade():
    with op.batch_alter_table("events") as batch:
        batch.create_index("ix_events_job_id", ["job_id"], unique=False)
        batch.drop_index("ix_events_job_id_type_id")
        batch.drop_index("ix_events_job_id_id")
        batch.drop_index("ix_events_type_id")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("time_zone")
