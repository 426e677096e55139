"""When an idle worker next has something to claim: the earliest waiting row's available_at."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from app.domain.states import CLAIMABLE
from app.sql.statuses import sql_statuses
from app.sql.transport import DBConnection, Statement, execute, read_datetime, with_lists

_EARLIEST = f"""
SELECT min(available_at) FROM executions
WHERE status IN ({sql_statuses(CLAIMABLE)}) AND available_at > :after{{queues}}
"""
EARLIEST_CLAIMABLE = Statement(_EARLIEST.format(queues=""), datetimes=("after",))
EARLIEST_CLAIMABLE_IN_QUEUES = with_lists(
    _EARLIEST.format(queues=" AND queue_id {queue_ids}"), {"queue_ids": "bigint"}, datetimes=("after",)
)


def earliest_claimable(
    conn: DBConnection, *, after: datetime, queue_ids: Sequence[int] | None = None
) -> datetime | None:
    """The earliest available_at later than `after` of a waiting row (in `queue_ids`, or any
    queue): an occurrence written ahead, a retry, a delayed run. A paused queue or a busy
    exclusive job may still hold it back then; the worker simply finds nothing and sleeps again."""
    if queue_ids:
        result = execute(conn, EARLIEST_CLAIMABLE_IN_QUEUES, {"after": after, "queue_ids": list(queue_ids)})
    else:
        result = execute(conn, EARLIEST_CLAIMABLE, {"after": after})
    return read_datetime(result.scalar())
