"""The store on PostgreSQL: what differs from `CommonStore` - the INSERT flavour, deleting by
array, the planner's statistics after a burst - and the worker's turn, whose one statement
(`TURN_SQL`, the hot path of the whole system) lives in app/sql/turn_postgresql.py so that the
worker parent can run it on a bare psycopg connection (ADR 0012).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from app.sql import turn
from app.sql.turn_postgresql import (  # noqa: F401  (re-exported: tests and benchmarks read them here)
    GENERIC_TURN_PLANS,
    LEASE_EXPIRES_AT,
    TURN_SQL,
    lease_expires_at_sql,
)
from app.store.common import CommonStore
from app.store.rows import Finished, Turn, executions

# The worker plans its turn once per connection (GENERIC_TURN_PLANS), with the statistics of that
# moment. Planned while `executions` looked empty (a new install, a table just emptied and
# analyzed), the plan reads the whole table for every candidate's overlap checks; when a burst
# then writes a thousand rows, each turn costs that squared (measured: 230-420 ms per turn at
# 1,000 waiting rows, against 2-6 ms with statistics; docs/performance.md, cron bursts). ANALYZE
# refreshes the statistics and invalidates the cached plans, so the next turn is planned for the
# table as it is. Autovacuum does the same, but up to a minute later, after the burst.
STALE_STATISTICS_MIN_ROWS = 250


def statistics_stale(written: int, estimated_rows: float | None) -> bool:
    """Whether a tick that wrote `written` rows leaves the planner's estimate of the table
    (`pg_class.reltuples`: -1 never analyzed, None unknown) far behind: the tick wrote a burst
    (STALE_STATISTICS_MIN_ROWS or more) larger than all the rows the statistics count. On a large
    table a burst is a small share of it and this never holds: ANALYZE stays autovacuum's job."""
    return written >= STALE_STATISTICS_MIN_ROWS and written > max(0.0, estimated_rows or 0.0)


class PostgresStore(CommonStore):
    dialect = "postgresql"

    def _insert(self) -> postgresql.Insert:
        return postgresql.insert(executions)

    def delete_executions(self, conn: Connection, ids: Sequence[int], *, chunk: int = 2000) -> int:
        """Delete executions by id, each chunk as one array parameter: an `IN` list of 5,000
        parameters was rendered and parsed in Python on every retention batch (Python CPU per
        5,000-row batch at 10M rows, profiled: 0.23 s with the list, 0.13 s with the array). The
        array goes as its text form ("{1,2,3}", ids are ints): psycopg's list dumper took 18 ms of
        Python CPU per 5,000 ids, the text form 1.5 ms (timeit)."""
        deleted = 0
        ids = sorted(int(execution_id) for execution_id in ids)
        for start in range(0, len(ids), chunk):
            deleted += conn.execute(
                text("DELETE FROM executions WHERE id = ANY(CAST(:ids AS bigint[]))"),
                {"ids": "{" + ",".join(map(str, ids[start : start + chunk])) + "}"},
            ).rowcount
        return deleted

    def refresh_planner_statistics(self, conn: Connection, *, written: int) -> bool:
        """ANALYZE executions when the statistics count fewer rows than a tick just wrote
        (`statistics_stale`), so that workers plan their turn for the table as it is now. A lock
        timeout keeps it from waiting behind a running (auto)vacuum of the table."""
        if written < STALE_STATISTICS_MIN_ROWS:
            return False  # not a burst, whatever the estimate: spare most ticks the catalog read
        estimated = conn.execute(text("SELECT reltuples FROM pg_class WHERE oid = to_regclass('executions')")).scalar()
        if not statistics_stale(written, estimated):
            return False
        conn.execute(text("SET LOCAL lock_timeout = '200ms'"))
        conn.execute(text("ANALYZE executions"))
        return True

    def record_and_claim(
        self,
        conn: Connection,
        finished: Sequence[Finished],
        *,
        worker_id: str,
        now: datetime,
        limit: int,
        queue_ids: Sequence[int] | None,
        lease_seconds: int,
        buffer_seconds: int,
        tasks: Sequence[str] | None = None,
    ) -> Turn:
        """A worker's turn in one statement (`TURN_SQL`, app/sql/turn_postgresql.py): record
        `finished`, then start up to `limit` due executions (cancelling those whose job was disabled)."""
        return turn.record_and_claim(
            conn,
            finished,
            worker_id=worker_id,
            now=now,
            limit=limit,
            queue_ids=queue_ids,
            lease_seconds=lease_seconds,
            buffer_seconds=buffer_seconds,
            tasks=tasks,
        )
