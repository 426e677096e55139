"""The operational status report behind `flask health` (and the health page).

Everything an operator asks first: are the scheduler and workers alive, how much work is waiting
and for how long, how executions are distributed by status, are there open alerts, and is this
deployment ready (`readiness()`, the same checks as /readyz).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import current_app
from sqlalchemy import func, select

from app.extensions import db
from app.models import Alert, DeadLetter, Heartbeat, Job
from app.services import scoping
from app.services.caller import Caller
from app.services.read.dashboard import execution_counts_by_status
from app.services.read.health import readiness
from app.services.read.queue_summary import queue_summary
from app.services.serialize import heartbeat_to_dict, iso
from app.store import store_for


def status_report(now: datetime, executions_by_status: dict | None = None, caller: Caller | None = None) -> dict:
    """The whole report as plain data (JSON-ready).

    `executions_by_status` may be passed in from the dashboard cache by callers that refresh
    often (the health page): counting every execution costs a scan of the whole table. With a
    `caller`, counts of jobs, runs and alerts are of its organization (processes are the site's).
    """
    stale_after = current_app.config["HEARTBEAT_STALE_SECONDS"]
    beats = list(db.session.scalars(select(Heartbeat).order_by(Heartbeat.kind, Heartbeat.id)))
    processes: dict[str, list[dict[str, Any]]] = {"scheduler": [], "worker": []}
    for beat in beats:
        processes[beat.kind].append(heartbeat_to_dict(beat, now, stale_after_seconds=stale_after))
    counts = executions_by_status
    if counts is None and scoping.job_ids(caller) is not None:
        counts = {status: c.value for status, c in execution_counts_by_status(caller=caller).items()}
    if counts is None:
        conn = db.session.connection()
        counts = store_for(conn).counts_by_status(conn)
    jobs_total, jobs_enabled = db.session.execute(
        scoping.jobs(select(func.count(), func.count().filter(Job.enabled)).select_from(Job), caller)
    ).one()
    dead_letters = scoping.dead_letters(select(func.count()).select_from(DeadLetter), caller)
    return {
        "now": iso(now),
        "readiness": readiness(now),
        "heartbeat_stale_seconds": stale_after,
        "schedulers": processes["scheduler"],
        "workers": processes["worker"],
        "serving_workers": sum(1 for worker in processes["worker"] if worker["serving"]),
        "queue": queue_summary(now, caller),
        "executions_by_status": counts,
        "jobs": {"total": jobs_total, "enabled": jobs_enabled or 0},
        "open_alerts": db.session.scalar(
            scoping.alerts(select(func.count()).select_from(Alert), caller).where(Alert.resolved_at.is_(None))
        ),
        "dead_letters": db.session.scalar(dead_letters),
    }
