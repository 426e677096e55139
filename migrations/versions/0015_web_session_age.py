"""web sessions past SESSION_MAX_AGE_HOURS, and the executions list in a date range

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 05:00:00

- `ix_web_sessions_created_at`: a web session now lasts at most SESSION_MAX_AGE_HOURS from
  sign-in (its age is read from the existing `created_at`, so no column is added) and the
  retention pass deletes the rows past that age; the index finds them without reading the table.
- `ix_executions_id_created` (id, created_at): the executions list filtered by a date range is
  bounded by ids (the first ids created at the range's ends) and tested exactly on created_at.
  Neither the primary key nor `ix_executions_created` holds both, so counting the range and
  stepping over its rows to a deep page visited the heap once per row (50,000 rows for page 1000
  of a day at a million executions). With both columns in one index both are index-only scans.
  On PostgreSQL it is built CONCURRENTLY (outside a transaction), so the scheduler and workers keep
  writing while it builds, about a second per million rows on a quiet machine. An interrupted
  concurrent build leaves an INVALID index that IF NOT EXISTS would skip: drop it
  (`DROP INDEX CONCURRENTLY ix_executions_id_created`) and upgrade again.
"""

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade():
    op.create_index(op.f("ix_web_sessions_created_at"), "web_sessions", ["created_at"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        with op.get_context().autocommit_block():
            op.create_index(
                "ix_executions_id_created",
                "executions",
                ["id", "created_at"],
                postgresql_concurrently=True,
                if_not_exists=True,
            )
    else:
        op.create_index("ix_executions_id_created", "executions", ["id", "created_at"])


def downgrade():
    if op.get_bind().dialect.name == "postgresql":
        with op.get_context().autocommit_block():
            op.drop_index(
                "ix_executions_id_created", table_name="executions", postgresql_concurrently=True, if_exists=True
            )
    else:
        op.drop_index("ix_executions_id_created", table_name="executions")
    op.drop_index(op.f("ix_web_sessions_created_at"), table_name="web_sessions")
