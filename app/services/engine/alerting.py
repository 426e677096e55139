"""The alert pass: dead-man's switch, consecutive failures, auto-pause, queue backlog, lost workers.

`evaluate_alerts(conn, now=..., settings=...)` is one pass (the scheduler runs it every
ALERT_EVALUATE_SECONDS; tests call it with their own `now`). Each alert kind has a dedup key
("overdue:job:3"); the partial unique index `uq_alerts_open_dedup_key` allows one open alert
per key, so a condition that persists raises one alert, and the pass resolves it (resolved_by
`system`) once the condition clears. Delivery to channels is not done here: the delivery loop
(app/services/engine/deliveries.py) picks up new alerts from the table.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, func, select, update
from sqlalchemy.engine import Connection, Row
from sqlalchemy.exc import IntegrityError

from app.domain.states import CLAIMABLE, ExecutionStatus
from app.models import Alert, Event, Execution, Heartbeat, Job, Queue
from app.services import audit_trail
from app.services.engine import alert_grouping, wakeups
from app.services.engine.heartbeats import not_stopped
from app.services.engine.notices import notice_pass
from app.services.events import insert_event
from app.store import store_for

if TYPE_CHECKING:
    from sqlalchemy import Row, ScalarSelect

log = logging.getLogger("cronwell.alerts")

alerts_t, jobs_t, executions_t = Alert.__table__, Job.__table__, Execution.__table__
FAILED = ("failed", "timed_out", "dead_lettered")
FINISHED = ("succeeded", *FAILED)
SYSTEM = "system"


@dataclass
class AlertReport:
    raised: list[str] = field(default_factory=list)  # dedup keys of alerts opened this pass
    resolved: list[str] = field(default_factory=list)
    paused: list[int] = field(default_factory=list)  # jobs auto-paused this pass
    notices: list[str] = field(default_factory=list)  # dedup keys of notices raised (notices.py)


def open_alert(
    conn: Connection,
    *,
    key: str,
    kind: str,
    message: str,
    now: datetime,
    job_id: int | None = None,
    queue_id: int | None = None,
    alert_mode: str = "web",
) -> bool:
    """Open an alert unless one is open under `key`; always logs the ALERT line when it opens.
    Returns whether a new alert was opened (log_only jobs: whether it would have been)."""
    if alert_mode == "web":
        exists = conn.execute(
            select(alerts_t.c.id).where(alerts_t.c.dedup_key == key, alerts_t.c.resolved_at.is_(None))
        ).first()
        if exists:
            return False
        try:
            with conn.begin_nested():  # another scheduler may open the same key at the same time
                conn.execute(
                    alerts_t.insert().values(
                        job_id=job_id,
                        queue_id=queue_id,
                        project_id=_project_of(job_id, queue_id),
                        kind=kind,
                        message=message[:2000],
                        created_at=now,
                        dedup_key=key,
                    )
                )
        except IntegrityError:
            return False
    log.error("ALERT " + message[:500], extra={"event": "ALERT", "alert_kind": kind, "job_id": job_id, "key": key})
    return True


def _project_of(job_id: int | None, queue_id: int | None) -> ScalarSelect[Any] | None:
    """The alert's project: its job's (through the job's queue), or its queue's; None for neither."""
    queues_t = Queue.__table__
    if job_id is not None:
        return (
            select(queues_t.c.project_id)
            .join(jobs_t, jobs_t.c.queue_id == queues_t.c.id)
            .where(jobs_t.c.id == job_id)
            .scalar_subquery()
        )
    if queue_id is not None:
        return select(queues_t.c.project_id).where(queues_t.c.id == queue_id).scalar_subquery()
    return None


def resolve_alert(conn: Connection, *, key: str, now: datetime) -> bool:
    """Resolve the open alert under `key` (if any) as the system (audited)."""
    return bool(alert_grouping.resolve_as_system(conn, alerts_t.c.dedup_key == key, now=now))


def evaluate_alerts(conn: Connection, *, now: datetime, settings: dict[str, Any]) -> AlertReport:
    """One pass over every alert kind the engine watches."""
    report = AlertReport()
    # First, so a recovery closes the alerts it ends and says so, before the passes below would.
    notices = notice_pass(conn, now=now, settings=settings)
    report.notices = notices.raised
    report.resolved += notices.closed
    if settings.get("ALERT_RESOLVE_ON_SUCCESS", True):  # a dead letter's alert closes on the next success
        for alert_id in alert_grouping.resolve_after_success(conn, now=now):
            report.resolved.append(f"alert:{alert_id}")
    _job_alerts(conn, now, report)
    _queue_backlog(conn, now, settings.get("ALERT_QUEUE_BACKLOG_SECONDS", 900), report)
    _workers_lost(conn, now, settings.get("HEARTBEAT_STALE_SECONDS", 60), report)
    if report.raised or report.notices:
        wakeups.notify(conn, wakeups.ALERTS_CHANNEL)  # the delivery loop fans them out now
    return report


def _toggle(conn: Connection, report: AlertReport, *, condition: bool, key: str, now: datetime, **alert: Any) -> None:
    if condition:
        if open_alert(conn, key=key, now=now, **alert):
            report.raised.append(key)
    elif resolve_alert(conn, key=key, now=now):
        report.resolved.append(key)


def _last_enabled_at(conn: Connection, job_id: int) -> datetime | None:
    events = Event.__table__
    return conn.execute(
        select(func.max(events.c.created_at)).where(events.c.job_id == job_id, events.c.type == "job_enabled")
    ).scalar()


def consecutive_failures(conn: Connection, job_id: int, *, limit: int, since: datetime | None) -> int:
    """How many of the job's latest finished runs failed in a row (at most `limit`), counting
    only runs that finished after `since` (the last time the job was enabled)."""
    query = (
        select(executions_t.c.status)
        .where(
            executions_t.c.job_id == job_id,
            executions_t.c.status.in_(FINISHED),
            # A job's callbacks are not its runs: a failing callback never counts against its job.
            executions_t.c.callback_task.is_(None),
        )
        .order_by(executions_t.c.finished_at.desc(), executions_t.c.id.desc())
        .limit(limit)
    )
    if since is not None:
        query = query.where(executions_t.c.finished_at > since)
    count = 0
    for status in conn.execute(query).scalars():
        if status == ExecutionStatus.SUCCEEDED.value:
            break
        count += 1
    return count


def _job_alerts(conn: Connection, now: datetime, report: AlertReport) -> None:
    watched = conn.execute(
        select(jobs_t).where(
            jobs_t.c.enabled,
            (jobs_t.c.expect_success_within_seconds > 0)
            | (jobs_t.c.alert_after_failures > 0)
            | (jobs_t.c.pause_after_failures > 0),
        )
    ).fetchall()
    for job in watched:
        since = _last_enabled_at(conn, job.id)
        common = {"job_id": job.id, "alert_mode": job.alert_mode, "now": now}
        if job.expect_success_within_seconds:
            last_success = conn.execute(
                select(func.max(executions_t.c.finished_at)).where(
                    executions_t.c.job_id == job.id,
                    executions_t.c.status == ExecutionStatus.SUCCEEDED.value,
                    executions_t.c.callback_task.is_(None),
                )
            ).scalar()
            window = timedelta(seconds=job.expect_success_within_seconds)
            reference = max(t for t in (last_success, job.created_at, since) if t is not None)
            late = now - reference > window
            what = f"last success {last_success:%Y-%m-%d %H:%M:%S} UTC" if last_success else "no success yet"
            _toggle(
                conn,
                report,
                condition=late,
                key=f"overdue:job:{job.id}",
                kind="overdue",
                message=f"job {job.name!r} is overdue: no run succeeded in the last "
                f"{job.expect_success_within_seconds}s ({what})",
                **common,
            )
        threshold = max(job.alert_after_failures, job.pause_after_failures)
        if not threshold:
            continue
        failures = consecutive_failures(conn, job.id, limit=threshold, since=since)
        if job.alert_after_failures:
            _toggle(
                conn,
                report,
                condition=failures >= job.alert_after_failures,
                key=f"consecutive_failures:job:{job.id}",
                kind="consecutive_failures",
                message=f"job {job.name!r}: "
                + ("its last run failed" if failures == 1 else f"its last {failures} runs failed"),
                **common,
            )
        if job.pause_after_failures and failures >= job.pause_after_failures:
            _auto_pause(conn, job, failures, now, report)


def _auto_pause(conn: Connection, job: Row[Any], failures: int, now: datetime, report: AlertReport) -> None:
    """Disable the job like an operator would (queued runs cancelled), saying why."""
    reason = f"auto-paused after {failures} consecutive failed runs (pause_after_failures={job.pause_after_failures})"
    done = conn.execute(
        update(jobs_t).where(jobs_t.c.id == job.id, jobs_t.c.enabled).values(enabled=False, disabled_reason=reason)
    ).rowcount
    if not done:
        return
    store_for(conn).withdraw_ahead(conn, job.id, now=now)  # runs written ahead (SCHEDULER_LEAD_MS) never existed
    cancelled = store_for(conn).cancel_queued_for_job(conn, job.id, now=now, reason="job auto-paused")
    insert_event(
        conn,
        "job_disabled",
        now=now,
        actor=SYSTEM,
        job_id=job.id,
        cancelled=len(cancelled),
        reason=reason,
        next_run_at=job.next_run_at.isoformat() if job.next_run_at else None,
    )
    audit_trail.record_change(
        SYSTEM,
        "disabled",
        "job",
        job.id,
        {"enabled": True},
        {"enabled": False},
        now=now,
        label=job.name,
        job_id=job.id,
        extra={"reason": reason},
        conn=conn,
    )
    report.paused.append(job.id)
    key = f"auto_paused:job:{job.id}"
    resolve_alert(conn, key=key, now=now)  # an older pause the operator never resolved
    if open_alert(
        conn,
        key=key,
        kind="auto_paused",
        message=f"job {job.name!r} was disabled: {reason}",
        now=now,
        job_id=job.id,
        alert_mode=job.alert_mode,
    ):
        report.raised.append(key)


def _queue_backlog(conn: Connection, now: datetime, threshold_seconds: int, report: AlertReport) -> None:
    if not threshold_seconds:
        return
    queues_t = Queue.__table__
    oldest = dict(
        conn.execute(
            select(executions_t.c.queue_id, func.min(executions_t.c.available_at))
            .where(
                executions_t.c.status.in_([s.value for s in CLAIMABLE]),
                executions_t.c.available_at <= now,
                executions_t.c.queue_id.is_not(None),
            )
            .group_by(executions_t.c.queue_id)
        )
        .tuples()
        .all()
    )
    open_keys = set(
        conn.execute(
            select(alerts_t.c.dedup_key).where(alerts_t.c.kind == "queue_backlog", alerts_t.c.resolved_at.is_(None))
        ).scalars()
    )
    for queue in conn.execute(select(queues_t.c.id, queues_t.c.name, queues_t.c.paused)).fetchall():
        key = f"queue_backlog:queue:{queue.id}"
        since = oldest.get(queue.id)
        if since is not None and since.tzinfo is None:
            since = since.replace(tzinfo=now.tzinfo)
        waited = (now - since).total_seconds() if since is not None else 0
        backlog = since is not None and not queue.paused and waited > threshold_seconds
        if backlog or key in open_keys:
            _toggle(
                conn,
                report,
                condition=backlog,
                key=key,
                kind="queue_backlog",
                message=f"queue {queue.name!r}: the oldest due run has waited {int(waited)}s "
                f"(threshold {threshold_seconds}s)",
                now=now,
                queue_id=queue.id,
            )


def _record_worker_lost(conn: Connection, heartbeat: Row[Any], *, now: datetime, in_flight: int) -> None:
    """The `worker_lost` event, once per loss: the heartbeat row is stamped `lost_recorded_at`.
    A worker that comes back rewrites its row (and the stamp with it), so a second loss is
    recorded again; the stamp is written only while the row is still the stale one read here."""
    info = dict(heartbeat.info or {})
    if info.get("lost_recorded_at"):
        return
    heartbeats_t = Heartbeat.__table__
    info["lost_recorded_at"] = now.isoformat()
    stamped = conn.execute(
        update(heartbeats_t)
        .where(heartbeats_t.c.id == heartbeat.id, heartbeats_t.c.last_seen == heartbeat.last_seen)
        .values(info=info)
    ).rowcount
    if not stamped:
        return
    insert_event(
        conn,
        "worker_lost",
        now=now,
        actor=SYSTEM,
        worker_id=heartbeat.id,
        last_seen=heartbeat.last_seen.isoformat() if heartbeat.last_seen else None,
        runs_in_flight=in_flight,
    )


def _workers_lost(conn: Connection, now: datetime, stale_seconds: int, report: AlertReport) -> None:
    heartbeats_t = Heartbeat.__table__
    stale_before = now - timedelta(seconds=stale_seconds)
    running = ExecutionStatus.RUNNING.value
    in_flight = dict(
        conn.execute(
            select(executions_t.c.claimed_by, func.count())
            .where(executions_t.c.status == running, executions_t.c.claimed_by.is_not(None))
            .group_by(executions_t.c.claimed_by)
        )
        .tuples()
        .all()
    )
    stale_rows = conn.execute(
        select(heartbeats_t.c.id, heartbeats_t.c.last_seen, heartbeats_t.c.info).where(
            and_(heartbeats_t.c.kind == "worker", heartbeats_t.c.last_seen < stale_before, not_stopped())
        )
    ).fetchall()
    stale = {row.id: row.last_seen for row in stale_rows}
    for row in stale_rows:
        _record_worker_lost(conn, row, now=now, in_flight=in_flight.get(row.id, 0))
    open_keys = set(
        conn.execute(
            select(alerts_t.c.dedup_key).where(alerts_t.c.kind == "worker_lost", alerts_t.c.resolved_at.is_(None))
        ).scalars()
    )
    for worker_id in set(stale) | {key.split(":", 1)[1] for key in open_keys if key}:
        key = f"worker_lost:{worker_id}"
        lost = worker_id in stale and in_flight.get(worker_id, 0) > 0
        _toggle(
            conn,
            report,
            condition=lost,
            key=key[:200],
            kind="worker_lost",
            message=f"worker {worker_id} stopped heartbeating (last seen {stale.get(worker_id)}) with "
            f"{in_flight.get(worker_id, 0)} run(s) in flight; lease recovery will retry them",
            now=now,
        )
