"""executions: index job and status filters in id order (the lists' order)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 12:00:00

The execution lists (all, by status, by job) are ordered newest first by id, and count their
rows by status. (job_id, created_at) and (status, created_at) matched neither: a list filtered by
job walked the primary key backwards past every other job's rows (~50,000 rows for one job in a
thousand), and a deep page filtered by status sorted every matching row (100 ms for the last
page of 5,000 failed runs). (job_id, id) and (status, id) serve those lists, their counts and the
dashboard's per-status counts with index-only scans. No query orders or filters executions by
job or status together with created_at, so the two indexes are replaced rather than added to: an
execution's status changes three times in its life and every index costs each of those updates.

On PostgreSQL the indexes are built and dropped CONCURRENTLY (outside a transaction), so the
scheduler and workers keep writing to executions while this runs; it takes about a second per
million rows. A concurrent build that is interrupted leaves an INVALID index behind, which
IF NOT EXISTS would then skip: drop it (`DROP INDEX CONCURRENTLY ix_executions_...`) and upgrade
again.
"""
from alembic import op

# revision identifiers, used by Alembic.
revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

_NEW = (("ix_executions_job_id", ["job_id", "id"]),
        ("ix_executions_status_id", ["status", "id"]))
_OLD = (("ix_executions_job_created", ["job_id", "created_at"]),
        ("ix_executions_status_created", ["status", "created_at"]))


def _replace(create, drop):
    if op.get_bind().dialect.name == "postgresql":
        with op.get_context().autocommit_block():
            for name, columns in create:
                op.create_index(name, "executions", columns, postgresql_concurrently=True, if_not_exists=True)
            for name, _columns in drop:
                op.drop_index(name, table_name="executions", postgresql_concurrently=True, if_exists=True)
        return
    for name, columns in create:
        op.create_index(name, "executions", columns)
    for name, _columns in drop:
        op.drop_index(name, table_name="executions")


def upgrade():
    _replace(create=_NEW, drop=_OLD)


def downgrade():
    _replace(create=_OLD, drop=_NEW)
