"""The store on SQLite: the worker's turn composed of plain steps under the write lock.

The caller's write transaction starts with BEGIN IMMEDIATE (app/database.py), so nobody else
writes between the candidate SELECT and the UPDATEs: select-then-update cannot race, and
claiming and starting are one step here too (no session ever sees a row claimed). The lease is
computed in Python (`lease_duration`) because SQLite has no interval arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from sqlalchemy import bindparam, insert, select, text, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection

from app.domain.policies import lease_duration
from app.domain.states import CLAIMABLE, AttemptStatus
from app.domain.states import ExecutionStatus as S
from app.models.types import UTCDateTime
from app.sql.statuses import status_values
from app.store.common import CANDIDATE_ORDER, CANDIDATE_WHERE, CommonStore
from app.store.rows import (
    DISABLED_BEFORE_RUN,
    ClaimedExecution,
    Finished,
    Turn,
    attempts,
    claimed_columns,
    executions,
    jobs,
)

_CANDIDATES = f"""
SELECT e.id FROM executions AS e, queues AS q
WHERE {CANDIDATE_WHERE}
ORDER BY {CANDIDATE_ORDER}
LIMIT :limit
"""


class SqliteStore(CommonStore):
    dialect = "sqlite"

    def _insert(self):
        return sqlite.insert(executions)

    def _candidates(
        self, conn: Connection, *, now: datetime, limit: int, queue_ids: Sequence[int] | None
    ) -> list[ClaimedExecution]:
        """Due rows this worker may run, in claim order, read as the claimed shape."""
        params: dict = {"now": now, "limit": limit}
        typed = [bindparam("now", type_=UTCDateTime)]
        queue_filter = ""
        if queue_ids:
            queue_filter = "AND e.queue_id IN :queues"
            typed.append(bindparam("queues", expanding=True))
            params["queues"] = list(queue_ids)
        ids = list(
            conn.execute(text(_CANDIDATES.format(queue_filter=queue_filter)).bindparams(*typed), params).scalars()
        )
        if not ids:
            return []
        e, j = executions, jobs
        rows = conn.execute(
            select(*claimed_columns())
            .join_from(e, j, e.c.job_id == j.c.id)
            .where(e.c.id.in_(ids))
            .order_by(e.c.priority, e.c.available_at, e.c.id)
        )
        return [ClaimedExecution.from_mapping(row._mapping) for row in rows]

    def _free_slots(self, conn: Connection, queue_ids: set[int]) -> dict[int, int]:
        """Free slots of the limited queues among `queue_ids`: {queue id: limit - running}."""
        if not queue_ids:
            return {}
        rows = conn.execute(
            text(
                "SELECT q.id, q.concurrency_limit - (SELECT count(*) FROM executions AS e"
                f" WHERE e.queue_id = q.id AND e.status = '{S.RUNNING.value}' AND e.holds_slot) FROM queues AS q"
                " WHERE q.concurrency_limit IS NOT NULL AND q.id IN :ids"
            ).bindparams(bindparam("ids", expanding=True)),
            {"ids": sorted(queue_ids)},
        )
        return {queue_id: free for queue_id, free in rows}

    def _start(
        self,
        conn: Connection,
        item: ClaimedExecution,
        *,
        worker_id: str,
        now: datetime,
        lease_seconds: int,
        buffer_seconds: int,
        holds_slot: bool = False,
    ) -> tuple[ClaimedExecution, int] | None:
        """pending | retry_scheduled -> running with its lease, and its Attempt opened; returns
        the row and the attempt number, None if the row was no longer claimable."""
        e = executions
        lease = now + lease_duration(item.timeout_seconds, lease_seconds, buffer_seconds)
        number = conn.execute(
            update(e)
            .where(e.c.id == item.id, e.c.status.in_(status_values(CLAIMABLE)))
            .values(
                status=S.RUNNING.value,
                claimed_by=worker_id,
                started_at=now,
                attempts=e.c.attempts + 1,
                updated_at=now,
                lease_expires_at=lease,
                holds_slot=holds_slot,
            )
            .returning(e.c.attempts)
        ).scalar()
        if number is None:
            return None
        if holds_slot:  # the counter PostgreSQL keeps in its turn, kept here too for the statistics
            conn.execute(text("UPDATE queues SET slots_taken = slots_taken + 1 WHERE id = :id"), {"id": item.queue_id})
        conn.execute(
            insert(attempts).values(
                execution_id=item.id,
                number=number,
                worker_id=worker_id,
                status=AttemptStatus.RUNNING.value,
                started_at=now,
                output="",
                error="",
            )
        )
        return replace(item, lease_expires_at=lease), number

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
    ) -> Turn:
        """A worker's turn as steps: record `finished`, then start up to `limit` due executions
        (pending | retry_scheduled -> running + Attempt row), cancelling those whose job was
        disabled. The same results as PostgreSQL's one statement (tests/integration/test_store_parity.py)."""
        recorded = self.record_finished(conn, finished, worker_id=worker_id, now=now)
        if limit <= 0:
            return Turn(recorded, [], [])
        started: list[tuple[ClaimedExecution, int]] = []
        cancelled: list[ClaimedExecution] = []
        candidates = self._candidates(conn, now=now, limit=limit, queue_ids=queue_ids)
        # The write lock makes counting exact here: each limited queue may start as many as it
        # has slots free (its limit minus its running executions that hold a slot), the rest stay
        # pending. Same rule as PostgreSQL's slot counter, counted instead of kept.
        free = self._free_slots(conn, {item.queue_id for item in candidates})
        for item in candidates:
            if not item.job_enabled:
                if self.cancel_execution(conn, item.id, now=now, reason=DISABLED_BEFORE_RUN):
                    cancelled.append(item)
                continue
            limited = item.queue_id in free
            if limited:
                if free[item.queue_id] <= 0:
                    continue
                free[item.queue_id] -= 1
            pair = self._start(
                conn,
                item,
                worker_id=worker_id,
                now=now,
                lease_seconds=lease_seconds,
                buffer_seconds=buffer_seconds,
                holds_slot=limited,
            )
            if pair is not None:
                started.append(pair)
        started.sort(key=lambda pair: pair[0].id)
        return Turn(recorded, started, cancelled)
