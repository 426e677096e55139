"""The notice pass: failures, recoveries and successes of finished runs, routed and grouped.

`notice_pass(conn, now=..., settings=...)` runs at the start of the alert pass (so every
ALERT_EVALUATE_SECONDS, in the scheduler; tests call it with their own `now`). It reads the runs
that finished since its cursor (`notice_cursors`, re-reading the last LOOKBACK so a run whose
worker committed late is still seen) and, in finish order:

- a failed run (failed, timed_out, dead_lettered) raises a `failure` notice and marks its job
  failing (`job_notify_state`);
- the first success of a failing job, or of a job with an open overdue alert, raises a
  `recovery` notice and closes the job's open overdue and consecutive-failures alerts (and its
  dead-letter alert, with ALERT_RESOLVE_ON_SUCCESS);
- any other success raises a `success` notice only where routing asks for successes.

A muted job's notices (`alert_mutes`) are recorded but sent nowhere.

A notice's dedup key ("failure:execution:41") makes each run noticed once, however many passes
or schedulers read it. Each new notice goes to the channels its job's route names
(app/domain/notify_routing.py), grouped: a channel's open delivery of the same job and event
(not yet taken by the delivery loop) absorbs it and counts it; otherwise a new delivery is
queued for when the channel's grouping window since the group's last message has passed, and
past its quiet window. The delivery loop (deliveries.py) sends them like alert deliveries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from app.clock import iso_z
from app.domain import notify_routing
from app.domain.notify_routing import ChannelRules
from app.models import Alert, AlertDelivery, AlertMute, Execution, Job, JobNotifyState, Notice, NoticeCursor
from app.services.engine import alert_grouping, routing

alerts_t, deliveries_t, executions_t, jobs_t = (
    Alert.__table__,
    AlertDelivery.__table__,
    Execution.__table__,
    Job.__table__,
)
notices_t, state_t, cursors_t = Notice.__table__, JobNotifyState.__table__, NoticeCursor.__table__
mutes_t = AlertMute.__table__
FAILED = ("failed", "timed_out", "dead_lettered")
CURSOR = "executions"
# How far back each pass re-reads: a worker's commit can land a little after the finish time it
# records (and after a pass read past it); the dedup key makes the re-read harmless.
LOOKBACK = timedelta(seconds=60)
MAX_RUNS = 5000  # per pass; the cursor stops at the last one read and the next pass goes on
EXCERPT = 500


@dataclass
class NoticeReport:
    raised: list[str] = field(default_factory=list)  # dedup keys of the notices raised
    closed: list[str] = field(default_factory=list)  # dedup keys of the alerts recoveries closed
    queued: int = 0  # deliveries created
    grouped: int = 0  # notices counted on a delivery already queued


def _insert(conn: Connection):  # type: ignore[no-untyped-def]
    return postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert


def notice_pass(conn: Connection, *, now: datetime, settings: dict[str, Any]) -> NoticeReport:
    """One pass over the runs finished since the last (module docstring)."""
    report = NoticeReport()
    tables = routing.load(conn)
    # A muted job's notices are recorded (so its recoveries are still found) but not sent.
    tables.muted = set(conn.execute(select(mutes_t.c.job_id).where(mutes_t.c.until > now)).scalars())
    cursor = conn.execute(select(cursors_t.c.scanned_until).where(cursors_t.c.name == CURSOR)).scalar()
    since = (cursor or now) - LOOKBACK
    failing = dict(
        conn.execute(select(state_t.c.job_id, state_t.c.failing_since).where(state_t.c.failing_since.is_not(None)))
        .tuples()
        .all()
    )
    overdue = dict(
        conn.execute(
            select(alerts_t.c.job_id, alerts_t.c.created_at).where(
                alerts_t.c.kind == "overdue", alerts_t.c.resolved_at.is_(None), alerts_t.c.job_id.is_not(None)
            )
        )
        .tuples()
        .all()
    )
    watched_jobs = set(failing) | set(overdue) | tables.success_jobs()
    wanted: list[ColumnElement[bool]] = [executions_t.c.status.in_(FAILED)]
    successes = executions_t.c.status == "succeeded"
    if watched_jobs:
        wanted.append(and_(successes, executions_t.c.job_id.in_(watched_jobs)))
    # A job that fails and succeeds between two passes recovers too.
    failed_now = select(executions_t.c.job_id).where(
        executions_t.c.finished_at > since, executions_t.c.finished_at <= now, executions_t.c.status.in_(FAILED)
    )
    wanted.append(and_(successes, executions_t.c.job_id.in_(failed_now)))
    if tables.success_projects():
        wanted.append(and_(successes, jobs_t.c.project_id.in_(tables.success_projects())))
    runs = conn.execute(
        select(
            executions_t.c.id,
            executions_t.c.job_id,
            executions_t.c.status,
            executions_t.c.finished_at,
            executions_t.c.error,
            jobs_t.c.name.label("job_name"),
            jobs_t.c.project_id,
        )
        .join(jobs_t, jobs_t.c.id == executions_t.c.job_id)
        .where(
            executions_t.c.finished_at > since,
            executions_t.c.finished_at <= now,
            executions_t.c.callback_task.is_(None),  # a job's callbacks are not its runs
            or_(*wanted),
        )
        .order_by(executions_t.c.finished_at, executions_t.c.id)
        .limit(MAX_RUNS)
    ).fetchall()
    for run in runs:
        if run.status in FAILED:
            _failed(conn, run, tables, failing, now, report)
        elif (run.job_id in failing and failing[run.job_id] <= run.finished_at) or (
            run.job_id in overdue and overdue[run.job_id] <= run.finished_at
        ):
            _recovered(conn, run, tables, now, settings, report)
            failing.pop(run.job_id, None)
            overdue.pop(run.job_id, None)
        elif "success" in tables.route_for(run.job_id, run.project_id).events:
            _raise(conn, run, "success", f"job {run.job_name!r}: run #{run.id} succeeded", {}, tables, now, report)
    reached = runs[-1].finished_at if len(runs) == MAX_RUNS else now
    _move_cursor(conn, max(reached, cursor) if cursor else reached)
    return report


def _failed(
    conn: Connection,
    run: Row[Any],
    tables: routing.RoutingTables,
    failing: dict[int, datetime],
    now: datetime,
    report: NoticeReport,
) -> None:
    error = " ".join((run.error or "").split())[:EXCERPT]
    message = f"job {run.job_name!r}: run #{run.id} {run.status}" + (f": {error}" if error else "")
    if not _raise(conn, run, "failure", message, {}, tables, now, report):
        return
    failing.setdefault(run.job_id, run.finished_at)
    conn.execute(
        _insert(conn)(state_t)
        .values(job_id=run.job_id, failing_since=run.finished_at, updated_at=now)
        .on_conflict_do_update(
            index_elements=["job_id"],
            # A job already failing stays failing since its first failure.
            set_={"failing_since": run.finished_at, "updated_at": now},
            where=state_t.c.failing_since.is_(None),
        )
    )


def _recovered(
    conn: Connection,
    run: Row[Any],
    tables: routing.RoutingTables,
    now: datetime,
    settings: dict[str, Any],
    report: NoticeReport,
) -> None:
    kinds = ["overdue", "consecutive_failures"]
    if settings.get("ALERT_RESOLVE_ON_SUCCESS", True):
        kinds.append("dead_letter")
    open_alerts = dict(
        conn.execute(
            select(alerts_t.c.id, alerts_t.c.dedup_key).where(
                alerts_t.c.job_id == run.job_id, alerts_t.c.kind.in_(kinds), alerts_t.c.resolved_at.is_(None)
            )
        )
        .tuples()
        .all()
    )
    open_ids = sorted(open_alerts)
    message = f"job {run.job_name!r} is working again: run #{run.id} succeeded"
    if not _raise(conn, run, "recovery", message, {"closed_alert_ids": open_ids}, tables, now, report):
        return
    conn.execute(update(state_t).where(state_t.c.job_id == run.job_id).values(failing_since=None, updated_at=now))
    if open_ids:
        closed = alert_grouping.resolve_as_system(conn, alerts_t.c.id.in_(open_ids), now=now)
        report.closed += [open_alerts[i] or f"alert:{i}" for i in closed]


def _raise(
    conn: Connection,
    run: Row[Any],
    event: str,
    message: str,
    details: dict[str, Any],
    tables: routing.RoutingTables,
    now: datetime,
    report: NoticeReport,
) -> bool:
    """Insert the run's notice of `event` unless it exists, and queue its deliveries; returns
    whether it was new."""
    key = f"{event}:execution:{run.id}"
    inserted = conn.execute(
        _insert(conn)(notices_t)
        .values(
            project_id=run.project_id,
            job_id=run.job_id,
            execution_id=run.id,
            event=event,
            message=message,
            dedup_key=key,
            details=details,
            created_at=run.finished_at,
        )
        .on_conflict_do_nothing(index_elements=["dedup_key"])
        .returning(notices_t.c.id)
    ).scalar()
    if inserted is None:
        return False
    report.raised.append(key)
    route = tables.route_for(run.job_id, run.project_id)
    notice = {
        "id": inserted,
        "event": event,
        "job_id": run.job_id,
        "job_name": run.job_name,
        "project_id": run.project_id,
        "execution_id": run.id,
        "message": message,
        "at": iso_z(run.finished_at),
        **details,
    }
    channels = [] if run.job_id in tables.muted else tables.channels.get(run.project_id, [])
    for channel in notify_routing.routed_channels(route, event, channels):
        if queue_delivery(conn, channel, notice, now=now):
            report.queued += 1
        else:
            report.grouped += 1
    return True


def notice_payload(notice: dict[str, Any], *, count: int, first_at: str) -> dict[str, Any]:
    """The JSON document a channel receives for a notice (a webhook as it is; Slack, Teams and
    email as app/domain/channel_messages.py shapes it): the newest notice of the group, how many
    the message tells of and since when."""
    body = {k: v for k, v in notice.items() if k not in ("id", "at")}
    return {"type": "notice", "notice": {**body, "created_at": notice["at"], "first_at": first_at, "count": count}}


def queue_delivery(conn: Connection, channel: ChannelRules, notice: dict[str, Any], *, now: datetime) -> bool:
    """Count `notice` on the channel's open delivery of its group, or queue a new one; returns
    whether a delivery was created."""
    key = f"job:{notice['job_id']}:{notice['event']}"
    last = conn.execute(
        select(
            deliveries_t.c.id,
            deliveries_t.c.group_open,
            deliveries_t.c.grouped,
            deliveries_t.c.payload,
            deliveries_t.c.status,
            deliveries_t.c.next_attempt_at,
            deliveries_t.c.delivered_at,
            deliveries_t.c.updated_at,
        )
        .where(deliveries_t.c.channel_id == channel.id, deliveries_t.c.group_key == key)
        .order_by(deliveries_t.c.id.desc())
        .limit(1)
    ).first()
    if last is not None and last.group_open:
        count = last.grouped + 1
        first_at = ((last.payload or {}).get("notice") or {}).get("first_at") or notice["at"]
        # group_open in the WHERE: if the delivery loop took the row meanwhile, this counts nothing
        # and a new delivery is queued below.
        joined = conn.execute(
            update(deliveries_t)
            .where(deliveries_t.c.id == last.id, deliveries_t.c.group_open)
            .values(
                grouped=count,
                notice_id=notice["id"],
                payload=notice_payload(notice, count=count, first_at=first_at),
                updated_at=now,
            )
        ).rowcount
        if joined:
            return False
    last_message_at = None
    if last is not None:
        last_message_at = {"delivered": last.delivered_at, "failed": last.updated_at}.get(
            last.status, last.next_attempt_at
        )
    conn.execute(
        deliveries_t.insert().values(
            channel_id=channel.id,
            alert_id=None,
            notice_id=notice["id"],
            group_key=key,
            grouped=1,
            group_open=channel.group_seconds > 0,
            kind=notice["event"],
            payload=notice_payload(notice, count=1, first_at=notice["at"]),
            status="pending",
            attempts=0,
            next_attempt_at=notify_routing.send_at(now, channel, last_message_at=last_message_at),
            created_at=now,
            updated_at=now,
        )
    )
    return True


def _move_cursor(conn: Connection, until: datetime) -> None:
    conn.execute(
        _insert(conn)(cursors_t)
        .values(name=CURSOR, scanned_until=until)
        .on_conflict_do_update(index_elements=["name"], set_={"scanned_until": until})
    )
