"""What an idle worker reads to decide how long it may sleep: when the next waiting row becomes
claimable, whether rows it could not claim are waiting, and whether an order waits for it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.domain.states import CLAIMABLE, IN_FLIGHT
from app.sql.statuses import sql_statuses
from app.sql.transport import DBConnection, Statement, execute, read_datetime, with_lists

# A workflow's anchor row (queue_id NULL) waits for its steps, never for a worker: it is not work.
_WAITING = f"status IN ({sql_statuses(CLAIMABLE)}) AND queue_id IS NOT NULL{{queues}}"


def _statement(text: str, **options: Any) -> tuple[Statement, Statement]:
    """The statement over every queue, and the one limited to the worker's `queue_ids`."""
    return (
        Statement(text.format(queues=""), **options),
        with_lists(text.format(queues=" AND queue_id {queue_ids}"), {"queue_ids": "bigint"}, **options),
    )


# After a turn: the earliest row that becomes claimable later than the turn's instant, and
# whether rows claimable at that instant are still waiting (held back by a limit, a paused queue,
# a busy job, a task this worker does not run), which the worker then looks at again every poll.
OUTLOOK = _statement(
    f"""
    SELECT (SELECT min(available_at) FROM executions WHERE {_WAITING} AND available_at > :after),
           EXISTS (SELECT 1 FROM executions WHERE {_WAITING} AND available_at <= :after)
    """,
    datetimes=("after",),
)

# At a quiet wake-up (nothing running, nothing waiting at the last look, no NOTIFY since): the
# earliest waiting row of any time, whether an order waits, and whether any run's lease expired
# (an idle worker then helps recover it), in one read (one transaction).
IDLE_LOOK = _statement(
    f"""
    SELECT (SELECT min(available_at) FROM executions WHERE {_WAITING}),
           EXISTS (SELECT 1 FROM worker_commands WHERE worker_id = :worker_id AND acted_at IS NULL),
           EXISTS (SELECT 1 FROM executions WHERE status IN ({sql_statuses(IN_FLIGHT)}) AND lease_expires_at < :now)
    """,
    datetimes=("now",),
)


@dataclass(frozen=True)
class Outlook:
    next_at: datetime | None  # the earliest available_at later than the turn's instant
    held_back: bool  # rows claimable at the turn's instant still wait


@dataclass(frozen=True)
class IdleLook:
    earliest: datetime | None  # the earliest available_at of any waiting row
    orders: bool  # an unacted command waits for this worker
    expired_leases: bool = False  # a run's lease expired: recovery has work


def _params(queue_ids: Sequence[int] | None, **params: object) -> tuple[int, dict[str, object]]:
    if queue_ids:
        return 1, {**params, "queue_ids": list(queue_ids)}
    return 0, params


def outlook(conn: DBConnection, *, after: datetime, queue_ids: Sequence[int] | None = None) -> Outlook:
    """What waits in `queue_ids` (or any queue) after a turn at `after`: an occurrence written
    ahead, a retry, a delayed run (`next_at`), or rows the turn could not claim (`held_back`). A
    paused queue or a busy exclusive job may still hold `next_at` back then; the worker simply
    finds nothing and sleeps again."""
    which, params = _params(queue_ids, after=after)
    row = execute(conn, OUTLOOK[which], params).rows[0]
    return Outlook(next_at=read_datetime(row[0]), held_back=bool(row[1]))


def idle_look(conn: DBConnection, *, worker_id: str, now: datetime, queue_ids: Sequence[int] | None = None) -> IdleLook:
    which, params = _params(queue_ids, worker_id=worker_id, now=now)
    row = execute(conn, IDLE_LOOK[which], params).rows[0]
    return IdleLook(earliest=read_datetime(row[0]), orders=bool(row[1]), expired_leases=bool(row[2]))


def earliest_claimable(
    conn: DBConnection, *, after: datetime, queue_ids: Sequence[int] | None = None
) -> datetime | None:
    """The earliest available_at later than `after` of a waiting row (`outlook`'s `next_at`)."""
    return outlook(conn, after=after, queue_ids=queue_ids).next_at
