"""a display time zone per user; the event log's indexes for its list

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-06 01:20:00

- `users.time_zone`: the IANA zone every page shows that user's times in (default `UTC`).
- `events`: `(type, id)`, `(job_id, id)` and `(job_id, type, id)` replace the single-column
  `job_id` index, so the events list (newest first, by kind, by job or both, paged by id) walks
  an index backwards from its cursor instead of sorting or scanning every matching row.
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade():
    # In place, never a batch rebuild (on SQLite a rebuild drops a table's AUTOINCREMENT).
    op.add_column("users", sa.Column("time_zone", sa.String(length=64), nullable=False, server_default="UTC"))
    op.create_index("ix_events_type_id", "events", ["type", "id"], unique=False)
    op.create_index("ix_events_job_id_id", "events", ["job_id", "id"], unique=False)
    op.create_index("ix_events_job_id_type_id", "events", ["job_id", "type", "id"], unique=False)
    op.drop_index("ix_events_job_id", table_name="events")


def downgrade():
    op.create_index("ix_events_job_id", "events", ["job_id"], unique=False)
    op.drop_index("ix_events_job_id_type_id", table_name="events")
    op.drop_index("ix_events_job_id_id", table_name="events")
    op.drop_index("ix_events_type_id", table_name="events")
    op.execute("ALTER TABLE users DROP COLUMN time_zone")
