"""the worker an event names, in a column of its own

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-07 15:00:00

`events.worker_id` holds the worker an event names (its payload's `worker_id`, which stays there
too: lease recoveries, cancels, a worker's own events), filled by the writers from now on and here
from the payloads of the events already stored. `ix_events_worker_id_id` (worker_id, id), partial
on `worker_id IS NOT NULL`, holds only those events, so the events list filtered by a worker walks
its index backwards from the cursor instead of reading payloads until it has a page (at 1M events
the query for a worker named by few events read up to every row, 185-520 ms; with the index
0.04-0.11 ms, docs/performance.md).

On PostgreSQL each step is its own transaction (the column, the index built CONCURRENTLY, then the
copy): adding the column locks the table for an instant only, and the copy reads the table without
holding that lock. An event written by a process still on the previous release after this
migration (a rolling upgrade) names its worker in the payload only, which the list shows but its
worker filter does not find. An interrupted concurrent build leaves an INVALID index that IF NOT
EXISTS would skip: drop it (`DROP INDEX CONCURRENTLY ix_events_worker_id_id`) and upgrade again.
"""

import sqlalchemy as sa
from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

INDEX = "ix_events_worker_id_id"
NAMED = "worker_id IS NOT NULL"
# As `worker_named` reads it: a worker_id that is set and not empty, at most 200 characters.
COPY = {
    "postgresql": "UPDATE events SET worker_id = left(payload ->> 'worker_id', 200)"
    " WHERE payload ? 'worker_id' AND payload ->> 'worker_id' <> ''",
    "sqlite": "UPDATE events SET worker_id = substr(json_extract(payload, '$.worker_id'), 1, 200)"
    " WHERE json_extract(payload, '$.worker_id') IS NOT NULL AND json_extract(payload, '$.worker_id') <> ''",
}


def upgrade():
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        with op.get_context().autocommit_block():
            op.execute("ALTER TABLE events ADD COLUMN IF NOT EXISTS worker_id VARCHAR(200)")
            op.create_index(
                INDEX,
                "events",
                ["worker_id", "id"],
                postgresql_where=sa.text(NAMED),
                postgresql_concurrently=True,
                if_not_exists=True,
            )
            op.execute(COPY[dialect] + " AND worker_id IS NULL")
    else:  # in place, as the downgrade
        op.add_column("events", sa.Column("worker_id", sa.String(length=200), nullable=True))
        op.execute(COPY[dialect])
        op.create_index(INDEX, "events", ["worker_id", "id"], sqlite_where=sa.text(NAMED))


def downgrade():
    if op.get_bind().dialect.name == "postgresql":
        with op.get_context().autocommit_block():
            op.drop_index(INDEX, table_name="events", postgresql_concurrently=True, if_exists=True)
            op.execute("ALTER TABLE events DROP COLUMN IF EXISTS worker_id")
    else:
        # In place, never a batch rebuild (on SQLite a rebuild drops a table's AUTOINCREMENT).
        op.drop_index(INDEX, table_name="events")
        op.execute("ALTER TABLE events DROP COLUMN worker_id")
