"""10M executions: autovacuum scaled to big tables; the queue index covers trigger and status; waiting rows by queue

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01 05:00:00

PostgreSQL's default autovacuum waits for 20 % of a table to be dead (and re-analyzes after 10 %
changed). At 10M executions that is 2,000,000 dead row versions before the first vacuum: hours
of claims, each leaving dead entries at the head of `ix_executions_claimable` that every later
claim steps over (docs/performance.md, "Degradation"), and a million changed rows before the
planner's estimates (which the capped counts show past 50,000) are refreshed, e.g. after
retention deleted a large backlog. The table's own storage parameters make the thresholds a
fixed fraction small enough at any size: vacuum after 2 % (+ 1,000 rows), analyze after 1 %,
and a vacuum allowed to work 10x faster than the default cost limit (the runbook's settings,
now applied by the schema instead of by hand). `attempts` gets the same treatment at 5 % / 2 %.

Table partitioning by time was considered and not used (docs/performance.md, "10M executions"):
the pages, statistics, the due query and the claim stay on their indexes at 10M rows. Dropping
a partition would spare retention its per-row foreign-key triggers, but the partition key would
have to join the primary key and every foreign key that points at executions (attempts, alerts,
dead letters, retries, batch parents), which SQLite cannot follow.

`ix_executions_queue_id (queue_id, id)` also carries trigger and status (INCLUDE, PostgreSQL
11+): the executions list filtered by queue and trigger (or queue and status) counts up to 50,001
matching rows, and with 20 queues at 10M rows that count fetched every candidate row from the
heap (a parallel scan of 21,000 pages, 560 ms on a loaded machine); from the index alone it reads
305 pages. No extra index: every update of an execution (three or four in its life, none HOT, since
status is indexed) writes an entry into each index anyway, so the wider entry costs bytes (the
index grows from about 22 to 47 bytes a row), not another write. It is rebuilt CONCURRENTLY (a
new index, then the old one dropped and the new one renamed), so writers go on meanwhile; an
interrupted build leaves an INVALID `ix_executions_queue_id_covering`: drop it and upgrade again.

`ix_executions_queue_waiting (queue_id, available_at) WHERE status IN ('pending',
'retry_scheduled')`: one queue's statistics (`flask queue stats`, the API's queue statistics)
count that queue's waiting rows. With 139,000 rows waiting in another queue at 10M rows, the
planner intersected the status index with the queue's 489,000 entries (450 ms loaded); from this
index it reads the queue's own waiting rows (0.26 ms). Partial, so only a row that enters the
queue writes an entry (claiming it leaves the predicate). Built CONCURRENTLY on PostgreSQL.

SQLite has neither autovacuum parameters nor INCLUDE; it gets the partial index.
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

SETTINGS = {
    "executions": {
        "autovacuum_vacuum_scale_factor": "0.02",
        "autovacuum_vacuum_threshold": "1000",
        "autovacuum_analyze_scale_factor": "0.01",
        "autovacuum_vacuum_cost_limit": "2000",
    },
    "attempts": {
        "autovacuum_vacuum_scale_factor": "0.05",
        "autovacuum_analyze_scale_factor": "0.02",
    },
}


QUEUE_INDEX = "ix_executions_queue_id"


def _rebuild_queue_index(include: str) -> None:
    """Replace ix_executions_queue_id (queue_id, id) by the same with `include` columns (or none),
    without blocking writers."""
    building = f"{QUEUE_INDEX}_covering" if include else f"{QUEUE_INDEX}_plain"
    with op.get_context().autocommit_block():
        op.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {building} ON executions (queue_id, id)"
            + (f" INCLUDE ({include})" if include else "")
        )
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {QUEUE_INDEX}")
        op.execute(f"ALTER INDEX {building} RENAME TO {QUEUE_INDEX}")


WAITING_INDEX = "ix_executions_queue_waiting"
WAITING = "status IN ('pending', 'retry_scheduled')"


def upgrade():
    if op.get_bind().dialect.name != "postgresql":
        op.create_index(WAITING_INDEX, "executions", ["queue_id", "available_at"], sqlite_where=sa.text(WAITING))
        return
    with op.get_context().autocommit_block():
        op.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {WAITING_INDEX} ON executions (queue_id, available_at)"
            f" WHERE {WAITING}"
        )
    for table, settings in SETTINGS.items():
        values = ", ".join(f"{name} = {value}" for name, value in settings.items())
        op.execute(f"ALTER TABLE {table} SET ({values})")
    _rebuild_queue_index("trigger, status")


def downgrade():
    if op.get_bind().dialect.name != "postgresql":
        op.drop_index(WAITING_INDEX, table_name="executions")
        return
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {WAITING_INDEX}")
    _rebuild_queue_index("")
    for table, settings in SETTINGS.items():
        op.execute(f"ALTER TABLE {table} RESET ({', '.join(settings)})")
