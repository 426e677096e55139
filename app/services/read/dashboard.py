"""Read models for the dashboard and the job pages, cached through `app.cache`.

Everything returned here is plain JSON data (instants as ISO 8601 UTC text), the same whether it
came from the cache or from the database. Cached (Redis when configured, else
in-process; never a source of truth, ADR 0006), each under a short TTL and deleted after commit
by the services that change the underlying rows:

    dashboard:summary       summary_counts()       job counts; execution counts (estimates > 50k)
    dashboard:queue_depth   queue_depth(now)       due work, waiting retries, in flight
    dashboard:upcoming      upcoming_runs(now)     the next runs across all enabled jobs
    tasks:catalog           task_catalog()         the registered tasks (expires only)
    job:<id>:stats          job_stats(id)          per-job counts, durations and chart data
    job:<id>:upcoming       job_upcoming(job, now) the job's next fire times with DST notes

Recent activity, open alerts and heartbeats are read fresh: they are small indexed reads and
their whole point is to be current.

Every figure shown to a person is of the caller's organization (and project, when one is chosen):
the functions take the `caller` (None: the system, everything), and the dashboard keys hold one
copy per scope (`cache.scoped_key`, `scoping.cache_scope`).
"""

from __future__ import annotations

import json
from datetime import datetime

from sqlalchemy import func, select

from app import cache
from app.cache import get_cache
from app.domain.states import TERMINAL, ExecutionStatus, values
from app.extensions import db
from app.models import Alert, DeadLetter, Execution, Heartbeat, Job
from app.scheduling import ScheduleError
from app.services import scoping
from app.services.caller import Caller
from app.services.read import row_counts
from app.services.read.queue_summary import queue_summary
from app.services.serialize import heartbeat_to_dict, iso
from app.tasks import all_tasks

UPCOMING_LIMIT = 10
CHART_POINTS = 40
PREVIEW_COUNT = 5
# Preview more fire times than shown, so a cached preview still has enough left in the future
# while it ages within its TTL.
_PREVIEW_FETCH = 12
_TERMINAL = sorted(s.value for s in TERMINAL)


def _ttl(name: str) -> int:
    return cache.TTL_SECONDS[name]


def _scoped(key: str, caller: Caller | None) -> str:
    return get_cache().scoped_key(key, scoping.cache_scope(caller))


def summary_counts(caller: Caller | None = None) -> dict:
    """Jobs (total, enabled) and executions by status, over all history.

    `count_kinds` says how each execution count was obtained (see `app.services.read.row_counts`):
    "exact", "estimate" (the planner's figure for a status with more than 50,000 rows) or
    "more_than" (past 50,000, with statistics too old to say how far); `executions_total_kind`
    likewise for the total. Pages must show the kind next to any count that is not exact.
    """

    def compute() -> dict:
        by_status = execution_counts_by_status(caller=caller)
        total = row_counts.settle_total(by_status.values())
        jobs_total, enabled = db.session.execute(
            scoping.jobs(select(func.count(), func.count().filter(Job.enabled)).select_from(Job), caller)
        ).one()
        return {
            "jobs_total": jobs_total,
            "jobs_enabled": enabled or 0,
            "executions_by_status": {status: c.value for status, c in by_status.items()},
            "count_kinds": {status: c.kind for status, c in by_status.items()},
            "executions_total": total.value,
            "executions_total_kind": total.kind,
            # What needs an operator: every dead letter, whatever final status its execution kept
            # (failed, timed out, or dead_lettered after a lost lease), as the alerts page lists them.
            "dead_letters": _dead_letter_count(caller),
        }

    return get_cache().get_or_compute(_scoped(cache.SUMMARY, caller), _ttl(cache.SUMMARY), compute)


def _dead_letter_count(caller: Caller | None) -> int:
    query = scoping.dead_letters(select(func.count()).select_from(DeadLetter), caller)
    return db.session.scalar(query) or 0


def execution_counts_by_status(cap: int | None = None, caller: Caller | None = None) -> dict[str, row_counts.RowCount]:
    """Executions per status: exact up to `cap` (COUNT_CAP) rows, a planner estimate above (PostgreSQL).

    One statement counts every status up to cap + 1 rows (an index-only scan of ix_executions_status_id
    each); only statuses that reach the cap cost an EXPLAIN more. SQLite, which has no planner
    estimates, counts everything exactly with one GROUP BY.
    """
    cap = row_counts.COUNT_CAP if cap is None else cap
    statuses = values(ExecutionStatus)
    if db.session.get_bind().dialect.name != "postgresql":
        exact = dict.fromkeys(statuses, 0)
        exact.update(
            db.session.execute(
                scoping.executions(select(Execution.status, func.count()), caller).group_by(Execution.status)
            ).all()
        )
        return {status: row_counts.RowCount(exact[status]) for status in statuses}
    queries = {
        status: scoping.executions(select(Execution.id).where(Execution.status == status), caller)
        for status in statuses
    }
    counted = row_counts.capped_counts(db.session, queries, cap)
    found = {}
    for status in statuses:
        estimate = row_counts.planner_rows(db.session, queries[status]) if counted[status] > cap else None
        found[status] = row_counts.settle(counted[status], estimate, cap)
    return found


def queue_depth(now: datetime, caller: Caller | None = None) -> dict:
    """Due claimable rows, retries waiting for their backoff, rows in flight, the oldest wait."""
    return get_cache().get_or_compute(
        _scoped(cache.QUEUE_DEPTH, caller), _ttl(cache.QUEUE_DEPTH), lambda: queue_summary(now, caller)
    )


def upcoming_runs(now: datetime, limit: int = UPCOMING_LIMIT, caller: Caller | None = None) -> list[dict]:
    """The enabled jobs that fire next, soonest first."""

    def compute() -> list[dict]:
        rows = db.session.execute(
            scoping.jobs(select(Job.id, Job.name, Job.next_run_at, Job.timezone, Job.schedule_type, Job.task), caller)
            .where(Job.enabled, Job.next_run_at.is_not(None))
            .order_by(Job.next_run_at, Job.id)
            .limit(limit)
        )
        return [
            {
                "job_id": r.id,
                "job_name": r.name,
                "next_run_at": iso(r.next_run_at),
                "timezone": r.timezone,
                "schedule_type": r.schedule_type,
                "task": r.task,
            }
            for r in rows
        ]

    return get_cache().get_or_compute(_scoped(cache.UPCOMING, caller), _ttl(cache.UPCOMING), compute)


def task_catalog() -> list[dict]:
    """The registered tasks: name, description and config schema."""

    def compute() -> list[dict]:
        from app.tasks.describe import example_config

        return [
            {
                "name": spec.name,
                "description": spec.description,
                "schema": spec.schema,
                "example": example_config(spec.schema),
            }
            for spec in all_tasks()
        ]

    return get_cache().get_or_compute(cache.CATALOG, _ttl(cache.CATALOG), compute)


def recent_activity(limit: int = 15, caller: Caller | None = None) -> list[Execution]:
    """The newest executions (any status), for the activity panel."""
    return list(
        db.session.scalars(scoping.executions(select(Execution), caller).order_by(Execution.id.desc()).limit(limit))
    )


def open_alerts(limit: int = 5, caller: Caller | None = None) -> tuple[list[Alert], int]:
    """The newest open alerts and how many are open in all."""
    alerts = list(
        db.session.scalars(
            scoping.alerts(select(Alert), caller)
            .where(Alert.resolved_at.is_(None))
            .order_by(Alert.id.desc())
            .limit(limit)
        )
    )
    total = (
        db.session.scalar(
            scoping.alerts(select(func.count()).select_from(Alert), caller).where(Alert.resolved_at.is_(None))
        )
        or 0
    )
    return alerts, total


def heartbeats(now: datetime, stale_after_seconds: int) -> dict[str, list[dict]]:
    """Scheduler and worker heartbeats with their age and whether they are stale."""
    found: dict[str, list[dict]] = {"scheduler": [], "worker": []}
    for beat in db.session.scalars(select(Heartbeat).order_by(Heartbeat.kind, Heartbeat.last_seen.desc())):
        found.setdefault(beat.kind, []).append(heartbeat_to_dict(beat, now, stale_after_seconds=stale_after_seconds))
    return found


def job_stats(job_id: int) -> dict:
    """Per-job counts by status, success rate, durations and the recent outcome history."""

    def compute() -> dict:
        by_status = dict.fromkeys(values(ExecutionStatus), 0)
        rows = db.session.execute(
            select(Execution.status, func.count()).where(Execution.job_id == job_id).group_by(Execution.status)
        )
        for status, count in rows:
            by_status[status] = count
        recent = list(
            db.session.execute(
                select(
                    Execution.id, Execution.status, Execution.started_at, Execution.finished_at, Execution.scheduled_for
                )
                .where(Execution.job_id == job_id, Execution.status.in_(_TERMINAL))
                .order_by(Execution.id.desc())
                .limit(CHART_POINTS)
            )
        )
        history = []
        for row in reversed(recent):
            duration = None
            if row.started_at and row.finished_at:
                duration = round((row.finished_at - row.started_at).total_seconds(), 3)
            history.append(
                {
                    "id": row.id,
                    "status": row.status,
                    "duration_seconds": duration,
                    "finished_at": iso(row.finished_at),
                    "scheduled_for": iso(row.scheduled_for),
                }
            )
        durations = sorted(p["duration_seconds"] for p in history if p["duration_seconds"] is not None)
        finished = by_status["succeeded"] + by_status["failed"] + by_status["timed_out"] + by_status["dead_lettered"]
        last = next((p for p in reversed(history)), None)
        last_success = next((p for p in reversed(history) if p["status"] == "succeeded"), None)
        last_failure = next(
            (p for p in reversed(history) if p["status"] in ("failed", "timed_out", "dead_lettered")), None
        )
        return {
            "by_status": by_status,
            "total": sum(by_status.values()),
            "success_rate": round(100.0 * by_status["succeeded"] / finished, 1) if finished else None,
            "duration_avg": round(sum(durations) / len(durations), 3) if durations else None,
            "duration_p95": durations[min(len(durations) - 1, int(0.95 * len(durations)))] if durations else None,
            "duration_max": durations[-1] if durations else None,
            "last_finished": last,
            "last_success": last_success,
            "last_failure": last_failure,
            "history": history,
        }

    return get_cache().get_or_compute(cache.job_stats_key(job_id), _ttl("job_stats"), compute)


def job_upcoming(job: Job, now: datetime, count: int = PREVIEW_COUNT) -> dict:
    """The job's next `count` fire times after now (UTC, local, DST note), or the error."""
    from app.scheduling import preview
    from app.services.use_cases.jobs import schedule_of

    def compute() -> dict:
        try:
            items = preview(schedule_of(job), now, _PREVIEW_FETCH)
        except (ScheduleError, ValueError) as exc:
            return {"error": str(exc), "items": []}
        return {"error": None, "items": [item.to_json() for item in items]}

    def still_ahead(value: dict) -> list[dict]:
        return [item for item in value["items"] if datetime.fromisoformat(item["utc"].replace("Z", "+00:00")) > now]

    key = cache.job_upcoming_key(job.id)
    value = get_cache().get_or_compute(key, _ttl("job_upcoming"), compute)
    items = still_ahead(value)
    if len(items) < count and len(value["items"]) == _PREVIEW_FETCH:
        value = json_round_trip(compute())  # the cached preview has aged past its usable part
        get_cache().set(key, value, _ttl("job_upcoming"))
        items = still_ahead(value)
    return {"error": value["error"], "items": items[:count]}


def dashboard_jobs(limit: int = 25, caller: Caller | None = None) -> tuple[list[Job], int]:
    """The first `limit` jobs (oldest first) and how many there are, for the dashboard panel."""
    from app.services.use_cases.jobs import list_query

    jobs = list(db.session.scalars(list_query(caller).limit(limit)))
    total = db.session.scalar(scoping.jobs(select(func.count()).select_from(Job), caller)) or 0
    return jobs, total


def json_round_trip(value):
    return json.loads(json.dumps(value, default=str))
