"""A worker's leases: renewed with its heartbeat for all its running rows at once, and given up
for a row it had to kill, so recovery may settle it at once."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from app.domain.states import RECORDABLE
from app.sql.statuses import sql_statuses
from app.sql.transport import DBConnection, Statement, execute, with_lists

_RENEW = f"""
UPDATE executions
SET lease_expires_at = CASE WHEN lease_expires_at > :floor THEN lease_expires_at ELSE :floor END,
    updated_at = :now
WHERE id {{ids}} AND claimed_by = :worker_id AND status IN ({sql_statuses(RECORDABLE)})
RETURNING id, lease_expires_at
"""
RENEW_LEASES = with_lists(_RENEW, {"ids": "bigint"}, datetimes=("floor", "now"), returns_datetimes=(1,))


def renew_leases(
    conn: DBConnection, execution_ids: Sequence[int], *, worker_id: str, now: datetime, lease_seconds: int
) -> dict[int, datetime]:
    """Extend the leases of a worker's running rows to at least `now + lease_seconds` (a lease
    already longer, covering a job's timeout, is kept). Guarded by owner and status: a row
    recovered, cancelled or finished meanwhile is not renewed and is missing from the result,
    {id: lease_expires_at}, which tells the worker it lost that row."""
    if not execution_ids:
        return {}
    floor = now + timedelta(seconds=lease_seconds)
    params = {"ids": sorted(execution_ids), "worker_id": worker_id, "floor": floor, "now": now}
    return dict(execute(conn, RENEW_LEASES, params).rows)


EXPIRE_LEASE = Statement(
    f"""
    UPDATE executions SET lease_expires_at = :expired
    WHERE id = :id AND status IN ({sql_statuses(RECORDABLE)}) AND claimed_by = :worker_id
    """,
    datetimes=("expired",),
)


def expire_lease(conn: DBConnection, execution_id: int, *, worker_id: str, now: datetime) -> bool:
    """A stopping worker gives up a running row it had to kill, so recovery may settle it now."""
    params = {"id": execution_id, "worker_id": worker_id, "expired": now - timedelta(microseconds=1)}
    return execute(conn, EXPIRE_LEASE, params).rowcount == 1


_RELEASE_UNHELD = f"""
UPDATE executions SET lease_expires_at = :expired
WHERE claimed_by = :worker_id AND status IN ({sql_statuses(RECORDABLE)}) AND started_at >= :since
  AND lease_expires_at > :expired AND NOT (id {{held}})
RETURNING id
"""
RELEASE_UNHELD = with_lists(_RELEASE_UNHELD, {"held": "bigint"}, datetimes=("expired", "since"))


def release_unheld(
    conn: DBConnection, held: Sequence[int], *, worker_id: str, since: datetime, now: datetime
) -> list[int]:
    """Give up the running rows the database says this worker claimed (since `since`, when the
    process started) but the worker does not hold: claims it never learned of (a commit whose
    acknowledgement was lost) or whose record did not survive a failover to an asynchronous
    replica (the result recorded on the old primary is gone, the claim is not). The worker runs
    nothing it does not hold, so expiring their leases lets recovery settle them now rather than
    when the lease runs out. Returns their ids."""
    params = {"held": sorted(held), "worker_id": worker_id, "since": since, "expired": now - timedelta(microseconds=1)}
    return sorted(row[0] for row in execute(conn, RELEASE_UNHELD, params).rows)
