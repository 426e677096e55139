"""Expired-lease recovery: the worker holding a row is gone, so its work is settled for it.

A lease covers the job's hard timeout plus a buffer, so a lease can only expire when its worker
stopped heartbeating its work: crashed, killed, or cut off from the database. The abandoned
attempt is recorded; the execution is retried if attempts remain, otherwise dead-lettered. One
an operator asked to cancel ends cancelled instead: the request outlives the worker.
Runs in the scheduler tick and in idle workers; SKIP LOCKED lets them overlap safely.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from datetime import datetime

from app.domain.states import ExecutionStatus as S
from app.services.engine import callbacks, wakeups
from app.services.engine.dead_letters import dead_letter
from app.services.engine.sources import Source, writing
from app.sql import recovery as sql_recovery
from app.sql.events import insert_event
from app.sql.rows import ExpiredLease
from app.sql.transport import DBConnection

log = logging.getLogger("cronwell.recovery")


@dataclass
class RecoveryReport:
    released: int = 0  # legacy claimed rows, never started: back to pending
    retried: int = 0
    dead_lettered: int = 0
    cancelled: int = 0  # a cancel had been requested: cancelled, not retried
    job_ids: set[int] | None = None

    @property
    def total(self) -> int:
        return self.released + self.retried + self.dead_lettered + self.cancelled


def settle_abandoned(conn: DBConnection, row: ExpiredLease, *, now: datetime, reason: str) -> str | None:
    """Record the abandoned attempt and move the execution on; returns the new status or None if lost."""
    retry_at = None
    if row.status == S.RUNNING.value and row.attempts < row.max_attempts and row.cancel_requested_by is None:
        retry_at = now + row.retry_policy.delay(row.attempts, random.random())
    new_status = sql_recovery.recover_execution(conn, row, now=now, retry_at=retry_at, reason=reason)
    if new_status is None:
        return None
    insert_event(
        conn,
        "lease_recovered",
        now=now,
        job_id=row.job_id,
        execution_id=row.id,
        worker_id=row.claimed_by,
        from_status=row.status,
        to_status=new_status,
    )
    if new_status == S.CANCELLED.value:
        insert_event(
            conn,
            "execution_cancelled",
            now=now,
            actor=row.cancel_requested_by or "system",
            job_id=row.job_id,
            execution_id=row.id,
            attempt=row.attempts,
            worker_id=row.claimed_by,
            how="its worker was gone; settled by lease recovery",
        )
    if new_status == S.DEAD_LETTERED.value:
        dead_letter(
            conn,
            execution_id=row.id,
            job_id=row.job_id,
            job_name=row.job_name,
            alert_mode=row.alert_mode,
            status=new_status,
            reason=reason,
            now=now,
        )
    if new_status in (S.DEAD_LETTERED.value, S.CANCELLED.value):
        callbacks.after_final(conn, [row.id], now=now)  # on_failure; a batch's last item
    return new_status


def recover_expired_leases(database: Source, *, now: datetime, batch_size: int = 100) -> RecoveryReport:
    """Settle every in-flight execution whose lease expired before `now`. `database`: a SQLAlchemy
    Engine, or the worker parent's `app.sql.connections.Database`. Each batch is one transaction,
    on a connection of either kind: conn is a SQLAlchemy or a bare DB-API connection
    (docs/adr/0012-worker-parent-on-dbapi.md)."""
    job_ids: set[int] = set()
    report = RecoveryReport(job_ids=job_ids)
    while True:
        with writing(database) as conn:
            rows = [ExpiredLease(**row) for row in sql_recovery.lock_expired_leases(conn, now=now, limit=batch_size)]
            for row in rows:
                reason = f"lease held by {row.claimed_by or 'unknown worker'} expired; the worker is presumed dead"
                new_status = settle_abandoned(conn, row, now=now, reason=reason)
                if new_status == S.PENDING.value:
                    report.released += 1
                elif new_status == S.RETRY_SCHEDULED.value:
                    report.retried += 1
                elif new_status == S.DEAD_LETTERED.value:
                    report.dead_lettered += 1
                elif new_status == S.CANCELLED.value:
                    report.cancelled += 1
                if new_status and row.job_id is not None:  # a one-off run has no job figures
                    job_ids.add(row.job_id)
            if rows:  # retries and released rows to claim, callbacks on_failure: idle workers look now
                wakeups.notify(conn, wakeups.WORK_CHANNEL)
        if len(rows) < batch_size:
            return report
