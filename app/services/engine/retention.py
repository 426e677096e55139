"""History retention: each job keeps at most retention_count executions and retention_days of age.

Only finished history is pruned: non-terminal executions (still in flight or queued) and
dead-lettered ones (and any execution with a DeadLetter row) are never removed, so pruning can
never hide work or an unresolved failure. Either axis set to 0 is disabled. Deletes run in
batches, each its own short transaction, so a large backlog never holds one huge transaction
(its row locks, and the snapshot that keeps VACUUM from reclaiming what the workers update).

Each batch also deletes old events: a job's events older than its retention_days, and events of
no job (or of a deleted one) older than EVENT_RETENTION_DAYS (`history_pruned` events stay: the
ledger reads them). The first batch also deletes audit events older than AUDIT_RETENTION_DAYS
and web sessions older than SESSION_MAX_AGE_HOURS (they open nothing any more); a dry run
counts all of them. Every entry point
(the scheduler, `flask prune-history`, the `cleanup_old_runs` task) passes both settings
(`retention_settings`), so none of them forgets a table.

A pass is paced (`app.domain.pacing`, RETENTION_ROWS_PER_SECOND and RETENTION_DUTY_PERCENT): at full
speed one pass takes most of a core, which on a small machine is the claims' share
(docs/performance.md, "10M executions"). Between batches it waits so it deletes no faster than the
rate and works no more than the duty cycle's share of its time. On PostgreSQL a batch's delete
fires one set-based trigger for the references to the deleted rows instead of five queries per
row (migration 0016, ADR 0011).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import create_engine, delete, func, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

from app.database import configure_engine, write_transaction
from app.domain.one_off import LABEL as ONE_OFF_LABEL
from app.domain.pacing import DUTY_CYCLE, ROWS_PER_SECOND, Pace, retention_settings
from app.models import Event, Job, WebSession
from app.services.audit_trail import prune_audit
from app.services.events import insert_event
from app.store import store_for

events_t = Event.__table__
jobs_t = Job.__table__

# Rows per transaction: measured at 10M executions (`python -m bench retention`,
# docs/performance.md): big enough that finding the batch costs little per row, small enough that
# each transaction is short.
BATCH = 5000
# What a dry run counts at most (one pass, nothing deleted).
DRY_RUN_LIMIT = BATCH * 20
# How long one pruning run may keep deleting before it returns (the scheduler's hourly pass runs
# on its tick); whatever is left goes in the next run.
MAX_SECONDS = 30.0


def _job_order(item: tuple[str, int]) -> tuple[int, str]:
    """Job ids in numeric order, one-off runs after them."""
    key = item[0]
    return (int(key), "") if key.isdigit() else (1 << 62, key)


def prune(
    conn: Connection,
    *,
    now: datetime,
    dry_run: bool = False,
    actor: str = "system",
    audit_retention_days: int = 0,
    session_max_age_hours: int = 0,
    event_retention_days: int = 0,
    limit: int | None = None,
    housekeeping: bool = True,
) -> dict[str, Any]:
    """Prune one batch of history on `conn` (at most `limit` rows per retention axis, default
    BATCH; DRY_RUN_LIMIT for a dry run); returns counts per job and in total and `found` (how many
    candidates the axes returned). With `housekeeping`, expired credentials, audit events older
    than `audit_retention_days` and web sessions older than `session_max_age_hours` go too (0:
    kept); `audit_deleted` and `sessions_deleted` say how many (a dry run counts them)."""
    store = store_for(conn)
    size = limit or (DRY_RUN_LIMIT if dry_run else BATCH)
    doomed = store.prunable_history(conn, now=now, limit=size)
    by_job: dict[str, int] = {}  # per job id; one-off runs (no job) under "one-off"
    for job_id in doomed.values():
        key = str(job_id) if job_id is not None else ONE_OFF_LABEL
        by_job[key] = by_job.get(key, 0) + 1
    old_events = prunable_events(conn, now=now, retention_days=event_retention_days, limit=size)
    events_by_job: dict[int, int] = {}
    for owner in old_events.values():
        if owner is not None:
            events_by_job[owner] = events_by_job.get(owner, 0) + 1
    if not dry_run and housekeeping:
        from app.models.api import prune_expired_credentials  # lazily: forked tasks call prune too

        prune_expired_credentials(conn, now=now)  # revoked JWTs and idempotency keys past their expiry
    if not dry_run and old_events:
        ids = list(old_events)
        for start in range(0, len(ids), BATCH):
            conn.execute(delete(events_t).where(events_t.c.id.in_(ids[start : start + BATCH])))
    if not dry_run and (doomed or old_events):
        if doomed:
            store.delete_executions(conn, list(doomed), chunk=BATCH)
        # The ledger (`flask verify`) reads this to know which jobs' history is incomplete: their
        # executions, or the events that accounted for their occurrences, are gone.
        insert_event(
            conn,
            "history_pruned",
            now=now,
            actor=actor,
            deleted=len(doomed),
            by_job=dict(sorted(by_job.items(), key=_job_order)),
            events_deleted=len(old_events),
            events_by_job={str(k): v for k, v in sorted(events_by_job.items())},
        )
    audit_deleted = sessions_deleted = 0
    if housekeeping:
        # Writes its own `audit_pruned` event when it deletes.
        audit_deleted = prune_audit(conn, now=now, retention_days=audit_retention_days, dry_run=dry_run)
        if session_max_age_hours > 0:
            max_age = timedelta(hours=session_max_age_hours)
            sessions_deleted = prune_sessions(conn, now=now, max_age=max_age, dry_run=dry_run)
    # A dry run's "deleted" is what it would delete.
    return {
        "deleted": len(doomed),
        "found": max(len(doomed), len(old_events)),
        "events_deleted": len(old_events),
        "dry_run": dry_run,
        "by_job": dict(sorted(by_job.items(), key=_job_order)),
        "audit_deleted": audit_deleted,
        "sessions_deleted": sessions_deleted,
    }


def prunable_events(conn: Connection, *, now: datetime, retention_days: int, limit: int) -> dict[int, int | None]:
    """The events the retention removes, at most `limit`, as {event id: job id}: a job's events
    older than its `retention_days` (0 keeps them, as it keeps its executions), and events of no
    job or of a deleted one older than `retention_days` (EVENT_RETENTION_DAYS; 0 keeps them).
    `history_pruned` events stay: the ledger reads them to know whose history is incomplete."""
    found: dict[int, int | None] = {}
    kept_kind = events_t.c.type != "history_pruned"
    ages = conn.execute(select(jobs_t.c.retention_days).where(jobs_t.c.retention_days > 0).distinct()).scalars()
    for days in sorted(ages):
        if len(found) >= limit:
            break
        of_jobs = select(jobs_t.c.id).where(jobs_t.c.retention_days == days)
        for event_id, job_id in conn.execute(
            select(events_t.c.id, events_t.c.job_id)
            .where(events_t.c.job_id.in_(of_jobs), events_t.c.created_at < now - timedelta(days=days), kept_kind)
            .limit(limit - len(found))
        ):
            found[event_id] = job_id
    if retention_days > 0 and len(found) < limit:
        orphaned = events_t.c.job_id.is_(None) | events_t.c.job_id.not_in(select(jobs_t.c.id))
        for event_id, job_id in conn.execute(
            select(events_t.c.id, events_t.c.job_id)
            .where(orphaned, events_t.c.created_at < now - timedelta(days=retention_days), kept_kind)
            .limit(limit - len(found))
        ):
            found[event_id] = job_id
    return found


def prune_sessions(conn: Connection, *, now: datetime, max_age: timedelta, dry_run: bool = False) -> int:
    """Delete the web sessions started `max_age` or more before `now` (the user loader accepts
    none of them any more); returns how many (with `dry_run`, how many would go)."""
    expired = WebSession.created_at <= now - max_age
    if dry_run:
        return conn.execute(select(func.count()).select_from(WebSession).where(expired)).scalar_one()
    return conn.execute(delete(WebSession).where(expired)).rowcount or 0


def prune_engine(
    engine: Engine,
    *,
    now: datetime,
    dry_run: bool = False,
    actor: str = "system",
    audit_retention_days: int = 0,
    session_max_age_hours: int = 0,
    event_retention_days: int = 0,
    max_seconds: float | None = MAX_SECONDS,
    batch: int = BATCH,
    rows_per_second: float = 0,
    duty_cycle: float = 1.0,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Prune batch after batch, each in its own transaction, until a batch finds fewer than
    `batch` rows per axis (the backlog is gone) or `max_seconds` have passed (None: no limit);
    returns the totals, `batches`, `paused` (seconds spent waiting for the pace) and `more` when
    it stopped with history left to prune.

    Between batches it waits as `rows_per_second` and `duty_cycle` ask (`Pace`; the defaults, 0
    and 1, never wait: the entry points pass the settings, `retention_settings`); the waits count
    in `max_seconds`, so a run never blocks its caller longer for being paced.
    A dry run is one pass that counts (up to DRY_RUN_LIMIT rows per axis) and deletes nothing."""
    started = monotonic()
    pace = Pace(started=started, rows_per_second=rows_per_second, duty_cycle=duty_cycle)
    total: dict[str, Any] = {"deleted": 0, "dry_run": dry_run, "by_job": {}, "batches": 0, "more": False, "paused": 0.0}
    total |= {"audit_deleted": 0, "sessions_deleted": 0, "events_deleted": 0}
    began = started
    while True:
        with write_transaction(engine) as conn:
            result = prune(
                conn,
                now=now,
                dry_run=dry_run,
                actor=actor,
                audit_retention_days=audit_retention_days,
                session_max_age_hours=session_max_age_hours,
                event_retention_days=event_retention_days,
                limit=None if dry_run else batch,
                housekeeping=total["batches"] == 0,
            )
        ended = monotonic()
        pace.record(result["deleted"], began=began, ended=ended)
        if total["batches"] == 0:
            total["audit_deleted"], total["sessions_deleted"] = result["audit_deleted"], result["sessions_deleted"]
        total["batches"] += 1
        total["deleted"] += result["deleted"]
        total["events_deleted"] += result["events_deleted"]
        for job_id, count in result["by_job"].items():
            total["by_job"][job_id] = total["by_job"].get(job_id, 0) + count
        if dry_run or result["found"] < batch:
            break
        if max_seconds is not None and ended - started >= max_seconds:
            total["more"] = True
            break
        wait = pace.wait_after(ended)
        if max_seconds is not None and ended + wait - started >= max_seconds:
            total["more"] = True  # the budget ends inside the pause: the next run goes on
            break
        began = ended
        if wait > 0:
            sleep(wait)
            total["paused"] += wait
            began = monotonic()
    total["by_job"] = dict(sorted(total["by_job"].items(), key=_job_order))
    return total


def prune_history(*, now: datetime, dry_run: bool = False, actor: str = "system") -> dict[str, Any]:
    """Apply every job's retention settings (`flask prune-history`, the scheduler's periodic run):
    deleted, dry_run, by_job, more (True when the time budget ran out with history left),
    audit_deleted, sessions_deleted and events_deleted."""
    from flask import current_app

    from app import cache
    from app.extensions import db

    result = prune_engine(db.engine, now=now, dry_run=dry_run, actor=actor, **retention_settings(current_app.config))
    if result["deleted"] and not dry_run:
        keys = [cache.SUMMARY, cache.QUEUE_DEPTH]
        for job_id in result["by_job"]:
            if job_id.isdigit():  # not "one-off": a one-off run has no job figures
                keys += [cache.job_stats_key(int(job_id))]
        try:
            cache.get_cache().delete(keys)
        except RuntimeError:
            pass
    keys = ["deleted", "dry_run", "by_job", "more", "audit_deleted", "sessions_deleted", "events_deleted"]
    return {key: result[key] for key in keys}


def prune_with_url(
    database_url: str,
    *,
    now: datetime,
    dry_run: bool = False,
    audit_retention_days: int,
    session_max_age_hours: int,
    event_retention_days: int = 0,
    rows_per_second: float = ROWS_PER_SECOND,
    duty_cycle: float = DUTY_CYCLE,
) -> dict[str, Any]:
    """For the cleanup_old_runs task, which runs in a forked process with no app context: the
    worker hands it the two settings (`TaskContext.retention`)."""
    engine = create_engine(database_url, poolclass=NullPool)
    configure_engine(engine)
    try:
        return prune_engine(
            engine,
            now=now,
            dry_run=dry_run,
            audit_retention_days=audit_retention_days,
            session_max_age_hours=session_max_age_hours,
            event_retention_days=event_retention_days,
            rows_per_second=rows_per_second,
            duty_cycle=duty_cycle,
        )
    finally:
        engine.dispose()
