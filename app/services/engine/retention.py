"""History retention: each job keeps at most retention_count executions and retention_days of age.

Only finished history is pruned: non-terminal executions (still in flight or queued) and
dead-lettered ones (and any execution with a DeadLetter row) are never removed, so pruning can
never hide work or an unresolved failure. Either axis set to 0 is disabled. Deletes run in
batches so a large backlog never holds one huge transaction.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import bindparam, create_engine, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

from app.database import configure_engine, write_transaction
from app.domain.states import TERMINAL, ExecutionStatus
from app.models.types import UTCDateTime
from app.services.audit import insert_event

BATCH = 2000
_PRUNABLE = ", ".join(repr(s.value) for s in sorted(TERMINAL - {ExecutionStatus.DEAD_LETTERED}, key=lambda s: s.value))

_PRUNABLE_WHERE = f"""
    e.status IN ({_PRUNABLE})
    AND NOT EXISTS (SELECT 1 FROM dead_letters AS d WHERE d.execution_id = e.id)
"""

# Rows beyond the newest retention_count finished executions of their job.
_OVER_COUNT = f"""
SELECT id, job_id FROM (
    SELECT e.id, e.job_id, j.retention_count,
           ROW_NUMBER() OVER (PARTITION BY e.job_id ORDER BY e.id DESC) AS newest_first
    FROM executions AS e JOIN jobs AS j ON j.id = e.job_id
    WHERE {_PRUNABLE_WHERE}
) AS ranked
WHERE retention_count > 0 AND newest_first > retention_count
LIMIT :batch
"""

# Candidates for the age axis: finished before the most lenient cutoff any job could have
# (now - the smallest retention_days). Each row is then checked against its own job's days in
# Python, which avoids dialect-specific interval arithmetic.
_TOO_OLD = f"""
SELECT e.id, e.job_id, j.retention_days, e.finished_at FROM executions AS e JOIN jobs AS j ON j.id = e.job_id
WHERE {_PRUNABLE_WHERE} AND j.retention_days > 0 AND e.finished_at < :oldest_cutoff
ORDER BY e.id
LIMIT :batch
"""


def prune(conn: Connection, *, now: datetime, dry_run: bool = False, actor: str = "system") -> dict:
    """Prune one batch-set of history on `conn`; returns counts per job and in total."""
    by_job: dict[int, int] = {}
    doomed: set[int] = set()
    for row in conn.execute(text(_OVER_COUNT), {"batch": BATCH * 50}):
        doomed.add(row.id)
        by_job[row.job_id] = by_job.get(row.job_id, 0) + 1
    min_days = conn.execute(text("SELECT MIN(retention_days) FROM jobs WHERE retention_days > 0")).scalar()
    if min_days:
        cutoff = now - timedelta(days=min_days)
        stmt = text(_TOO_OLD).bindparams(bindparam("oldest_cutoff", type_=UTCDateTime))
        for row in conn.execute(stmt, {"oldest_cutoff": cutoff, "batch": BATCH * 50}):
            finished = UTCDateTime().process_result_value(
                row.finished_at if not isinstance(row.finished_at, str) else datetime.fromisoformat(row.finished_at),
                conn.dialect,
            )
            if finished < now - timedelta(days=row.retention_days) and row.id not in doomed:
                doomed.add(row.id)
                by_job[row.job_id] = by_job.get(row.job_id, 0) + 1
    if not dry_run:
        ids = sorted(doomed)
        for start in range(0, len(ids), BATCH):
            chunk = ids[start : start + BATCH]
            conn.execute(
                text("DELETE FROM executions WHERE id IN :ids").bindparams(bindparam("ids", expanding=True)),
                {"ids": chunk},
            )
        if ids:
            # The ledger (`flask verify`) reads this to know which jobs' history is incomplete.
            insert_event(
                conn,
                "history_pruned",
                now=now,
                actor=actor,
                deleted=len(ids),
                by_job={str(k): v for k, v in sorted(by_job.items())},
            )
    return {"deleted": len(doomed), "dry_run": dry_run, "by_job": {str(k): v for k, v in sorted(by_job.items())}}


def prune_engine(engine: Engine, *, now: datetime, dry_run: bool = False, actor: str = "system") -> dict:
    with write_transaction(engine) as conn:
        return prune(conn, now=now, dry_run=dry_run, actor=actor)


def prune_history(*, now: datetime, dry_run: bool = False, actor: str = "system") -> dict:
    """Apply every job's retention settings (`flask prune-history`, the scheduler's periodic run)."""
    from app import cache
    from app.extensions import db

    result = prune_engine(db.engine, now=now, dry_run=dry_run, actor=actor)
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
