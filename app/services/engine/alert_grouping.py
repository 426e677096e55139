"""Alerts that don't flood: one open alert per job and kind, repeats counted on it.

A job that dead-letters every minute used to add an alert row each time, and the dashboard became
a pile. Now the first dead letter opens an alert under the key `dead_letter:job:<id>` (the
partial unique index `uq_alerts_open_dedup_key` allows one open alert per key) and each later one
adds to its `occurrences` and moves `last_seen_at`, the message and the execution to the newest
("failed 12 times since 20:42"). The alert closes when an operator resolves it or, with
`ALERT_RESOLVE_ON_SUCCESS` (default on), when the job next succeeds (`resolve_after_success`, run
by the scheduler's alert pass). While a job is muted (`alert_mutes`), nothing is opened or counted
for it; the dead letter itself and the ALERT log line are still written.

Opening and counting are app/sql/alerts.py (the worker parent runs them, ADR 0012); resolving,
which the scheduler and operators do, is here.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import and_, exists, select, update
from sqlalchemy.engine import Connection

from app.models import Alert, Execution
from app.services import audit_trail

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement

alerts_t, executions_t = Alert.__table__, Execution.__table__
SYSTEM = "system"


def resolve_after_success(conn: Connection, *, now: datetime, kinds: tuple[str, ...] = ("dead_letter",)) -> list[int]:
    """Resolve (as `system`) each open job alert of `kinds` whose job succeeded after the alert's
    last occurrence; returns the resolved alert ids."""
    succeeded_since = exists().where(
        executions_t.c.job_id == alerts_t.c.job_id,
        executions_t.c.status == "succeeded",
        executions_t.c.finished_at > alerts_t.c.last_seen_at,
    )
    candidates = and_(
        alerts_t.c.resolved_at.is_(None),
        alerts_t.c.kind.in_(kinds),
        alerts_t.c.job_id.is_not(None),
        alerts_t.c.last_seen_at.is_not(None),
        succeeded_since,
    )
    ids = list(conn.execute(select(alerts_t.c.id).where(candidates)).scalars())
    if not ids:
        return []
    return resolve_as_system(conn, alerts_t.c.id.in_(ids), now=now)


def resolve_as_system(conn: Connection, which: ColumnElement[bool], *, now: datetime) -> list[int]:
    """Resolve the open alerts matching `which` as `system`, with an audit row for each (source
    `system`, like an operator's resolution has one of its own); returns their ids."""
    resolved = conn.execute(
        update(alerts_t)
        .where(which, alerts_t.c.resolved_at.is_(None))
        .values(resolved_at=now, resolved_by=SYSTEM)
        .returning(alerts_t.c.id, alerts_t.c.kind, alerts_t.c.job_id, alerts_t.c.project_id)
    ).all()
    for alert_id, kind, job_id, project_id in sorted(resolved):
        audit_trail.record_change(
            SYSTEM,
            "resolved",
            "alert",
            alert_id,
            {"resolved_at": None, "resolved_by": None},
            {"resolved_at": now, "resolved_by": SYSTEM},
            now=now,
            label=kind,
            job_id=job_id,
            project_id=project_id,
            conn=conn,
        )
    return [alert_id for alert_id, *_ in sorted(resolved)]
