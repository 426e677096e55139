"""History retention: each job keeps at most retention_count executions and retention_days of age.

Only finished history is pruned: non-terminal executions (still in flight or queued) and
dead-lettered ones (and any execution with a DeadLetter row) are never removed, so pruning can
never hide work or an unresolved failure. Either axis set to 0 is disabled. Deletes run in
batches so a large backlog never holds one huge transaction.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

from app.database import configure_engine, write_transaction
from app.services.audit import insert_event
from app.services.audit_log import prune_audit
from app.store import store_for

BATCH = 2000


def prune(
    conn: Connection, *, now: datetime, dry_run: bool = False, actor: str = "system", audit_retention_days: int = 0
) -> dict:
    """Prune one batch-set of history on `conn`; returns counts per job and in total. Audit events
    older than `audit_retention_days` go too (0: kept)."""
    store = store_for(conn)
    doomed = store.prunable_history(conn, now=now, limit=BATCH * 50)
    by_job: dict[int, int] = {}
    for job_id in doomed.values():
        by_job[job_id] = by_job.get(job_id, 0) + 1
    if not dry_run:
        from app.models.api import prune_expired_credentials  # lazily: forked tasks call prune too

        prune_expired_credentials(conn, now=now)  # revoked JWTs and idempotency keys past their expiry
    if not dry_run and doomed:
        store.delete_executions(conn, list(doomed), chunk=BATCH)
        # The ledger (`flask verify`) reads this to know which jobs' history is incomplete.
        insert_event(
            conn,
            "history_pruned",
            now=now,
            actor=actor,
            deleted=len(doomed),
            by_job={str(k): v for k, v in sorted(by_job.items())},
        )
    if not dry_run:
        prune_audit(conn, now=now, retention_days=audit_retention_days)  # writes its own `audit_pruned` event
    return {"deleted": len(doomed), "dry_run": dry_run, "by_job": {str(k): v for k, v in sorted(by_job.items())}}


def prune_engine(
    engine: Engine, *, now: datetime, dry_run: bool = False, actor: str = "system", audit_retention_days: int = 0
) -> dict:
    with write_transaction(engine) as conn:
        return prune(conn, now=now, dry_run=dry_run, actor=actor, audit_retention_days=audit_retention_days)


def prune_history(*, now: datetime, dry_run: bool = False, actor: str = "system") -> dict:
    """Apply every job's retention settings (`flask prune-history`, the scheduler's periodic run)."""
    from flask import current_app

    from app import cache
    from app.extensions import db

    audit_days = current_app.config.get("AUDIT_RETENTION_DAYS", 365)
    result = prune_engine(db.engine, now=now, dry_run=dry_run, actor=actor, audit_retention_days=audit_days)
    if result["deleted"] and not dry_run:
        keys = [cache.SUMMARY, cache.QUEUE_DEPTH]
        for job_id in result["by_job"]:
            keys += [cache.job_stats_key(int(job_id))]
        try:
            cache.get_cache().delete(keys)
        except RuntimeError:
            pass
    return result


def prune_with_url(database_url: str, *, now: datetime, dry_run: bool = False) -> dict:
    """For the cleanup_old_runs task, which runs in a forked process with no app context."""
    engine = create_engine(database_url, poolclass=NullPool)
    configure_engine(engine)
    try:
        return prune_engine(engine, now=now, dry_run=dry_run)
    finally:
        engine.dispose()
