"""Lease recovery's statements: lock the in-flight rows whose lease ran out (their worker is
gone) and move each on, closing its Attempt (app/services/engine/recovery.py decides retries,
dead letters and what to tell). Every move is guarded by the row's status and by its lease still
being expired, so a worker that renewed meanwhile, or another recoverer, keeps it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.domain.one_off import job_column_sql
from app.domain.states import IN_FLIGHT, AttemptStatus, can_transition
from app.domain.states import ExecutionStatus as S
from app.sql.queues import release_slots
from app.sql.rows import ExpiredLease
from app.sql.statuses import sql_statuses
from app.sql.transport import DBConnection, Statement, execute

EXPIRED_LEASE_COLUMNS = (
    "id",
    "job_id",
    "status",
    "attempts",
    "max_attempts",
    "claimed_by",
    "cancel_requested_by",
    "job_name",
    "retry_backoff_seconds",
    "alert_mode",
    "retry_kind",
    "retry_max_delay_seconds",
    "retry_jitter",
)
# The job LEFT JOINed: a one-off run (no job) has its job's columns from app.domain.one_off.
_JOB_COLUMNS = ", ".join(
    f"{job_column_sql(column, execution_alias='e', job_alias='j')} AS {label}"
    for column, label in (
        ("name", "job_name"),
        ("retry_backoff_seconds", "retry_backoff_seconds"),
        ("alert_mode", "alert_mode"),
        ("retry_kind", "retry_kind"),
        ("retry_max_delay_seconds", "retry_max_delay_seconds"),
        ("retry_jitter", "retry_jitter"),
    )
)
_LOCK_EXPIRED = f"""
SELECT e.id, e.job_id, e.status, e.attempts, e.max_attempts, e.claimed_by, e.cancel_requested_by,
       {_JOB_COLUMNS}
FROM executions AS e LEFT JOIN jobs AS j ON e.job_id = j.id
WHERE e.status IN ({sql_statuses(IN_FLIGHT)}) AND e.lease_expires_at < :now
ORDER BY e.lease_expires_at
LIMIT :limit
"""
# Skipping rows another recoverer holds; SQLite's write lock already serialises recoverers.
LOCK_EXPIRED_LEASES = Statement(
    _LOCK_EXPIRED + "FOR UPDATE OF e SKIP LOCKED", sqlite_text=_LOCK_EXPIRED, datetimes=("now",)
)

# One text for every target: the columns a target does not set are passed as NULL and kept.
MOVE_EXPIRED = Statement(
    """
    UPDATE executions SET status = :target, claimed_by = NULL, lease_expires_at = NULL, updated_at = :now,
        finished_at = COALESCE(:finished_at, finished_at), available_at = COALESCE(:available_at, available_at),
        reason = COALESCE(:reason, reason), error = COALESCE(:error, error)
    WHERE id = :id AND status = :status AND lease_expires_at < :now
    """,
    datetimes=("now", "finished_at", "available_at"),
)
CLOSE_ATTEMPT = Statement(
    f"""
    UPDATE attempts SET status = :status, finished_at = :now, error = :error
    WHERE execution_id = :id AND number = :number AND status = '{AttemptStatus.RUNNING.value}'
    """,
    datetimes=("now",),
)


def lock_expired_leases(conn: DBConnection, *, now: datetime, limit: int = 100) -> list[dict[str, Any]]:
    """In-flight rows whose lease ran out, with what recovery needs of their job, locked."""
    rows = execute(conn, LOCK_EXPIRED_LEASES, {"now": now, "limit": limit}).rows
    return [dict(zip(EXPIRED_LEASE_COLUMNS, row, strict=True)) for row in rows]


def recover_execution(
    conn: DBConnection, lease: ExpiredLease, *, now: datetime, retry_at: datetime | None, reason: str
) -> str | None:
    """Move an expired in-flight row on: legacy claimed -> pending (never started), running ->
    retry_scheduled (`retry_at` given) or dead_lettered, closing its Attempt as abandoned; a
    running row an operator asked to cancel ends cancelled instead (never retried), keeping the
    reason the request wrote. Returns the new status, None if lost."""
    moved: dict[str, Any] = {"finished_at": None, "available_at": None, "reason": None, "error": None}
    attempt_status, attempt_error = AttemptStatus.ABANDONED, reason
    if lease.status == S.CLAIMED.value:
        target = S.PENDING
    elif lease.cancel_requested_by is not None:
        target, moved["finished_at"] = S.CANCELLED, now
        attempt_status = AttemptStatus.CANCELLED
        attempt_error = f"cancelled by {lease.cancel_requested_by or 'an operator'}; {reason}"
    elif retry_at is not None:
        target = S.RETRY_SCHEDULED
        moved.update(available_at=retry_at, reason=reason)
    else:
        target = S.DEAD_LETTERED
        moved.update(finished_at=now, reason=reason, error=reason)
    if not can_transition(lease.status, target):
        raise ValueError(f"the state machine forbids {lease.status} -> {target.value}")
    params = {"id": lease.id, "status": lease.status, "target": target.value, "now": now, **moved}
    if execute(conn, MOVE_EXPIRED, params).rowcount != 1:
        return None
    if lease.status == S.RUNNING.value:
        release_slots(conn, [lease.id])
        closing = {"id": lease.id, "number": lease.attempts, "status": attempt_status.value, "error": attempt_error}
        execute(conn, CLOSE_ATTEMPT, {**closing, "now": now})
    return target.value
