"""the console at 10M executions: ix_executions_job_id carries status, finished_at and created_at

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 01:10:00

The jobs list shows, per job on the page, its newest finished execution (when, what outcome) and
the 24 h success rate, and can be filtered by last outcome (docs/performance.md, "10M
executions"). All of them walk `ix_executions_job_id (job_id, id)` and then read every entry's row from
the heap for `finished_at`, `status` or `created_at`: the outcome filter a heap visit per job of
the table (1,000 visits, twice: the count and the page), the success rate a day of rows. At 10M
executions those rows are no longer in memory, and the jobs pages missed p95 50 ms.

With the three columns in the index (INCLUDE, PostgreSQL 11+) all of those are index-only scans.
No index is added: every insert and update of an execution (none is HOT, since status is indexed)
writes an entry into each index anyway, so the wider entry costs bytes (about 22 to 48 bytes a
row, 214 to about 500 MB at 10M), not another write. The index is rebuilt CONCURRENTLY (a new
index, then the old one dropped and the new one renamed), so the scheduler and workers keep
writing while it builds; an interrupted build leaves an INVALID `ix_executions_job_id_covering`:
drop it (`DROP INDEX CONCURRENTLY ix_executions_job_id_covering`) and upgrade again.

SQLite has no INCLUDE: nothing changes there.
"""

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

JOB_INDEX = "ix_executions_job_id"
INCLUDE = "status, finished_at, created_at"


def _rebuild_job_index(include: str) -> None:
    """Replace ix_executions_job_id (job_id, id) by the same with `include` columns (or none),
    without blocking writers."""
    building = f"{JOB_INDEX}_covering" if include else f"{JOB_INDEX}_plain"
    with op.get_context().autocommit_block():
        op.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {building} ON executions (job_id, id)"
            + (f" INCLUDE ({include})" if include else "")
        )
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {JOB_INDEX}")
        op.execute(f"ALTER INDEX {building} RENAME TO {JOB_INDEX}")


def upgrade():
    if op.get_bind().dialect.name == "postgresql":
        _rebuild_job_index(INCLUDE)


def downgrade():
    if op.get_bind().dialect.name == "postgresql":
        _rebuild_job_index("")
