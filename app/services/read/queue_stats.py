"""Live statistics per queue: what is waiting, running and finishing, and how late work starts.

One store read (`Store.queue_stats`) per call, index-backed so it stays cheap at millions of
executions. Figures per queue:
- pending: due now and waiting for a worker; scheduled_later: pending with a future available_at;
  retrying: waiting out a retry backoff; running;
- succeeded_last_hour / failed_last_hour (failed counts failed, timed_out and dead_lettered);
- oldest_pending_seconds: how long the oldest due row has waited;
- throughput_per_minute: executions finished in the last 15 minutes, per minute;
- lateness_p50_seconds / lateness_p95_seconds: start time minus the occurrence's scheduled time of
  scheduled runs started in the last 15 minutes (at most the 1,000 newest; None when none).
"""

from __future__ import annotations

from datetime import datetime

from app.domain.rate_limits import allowance, parse_rate_limit
from app.extensions import db
from app.models import Queue
from app.services import scoping
from app.services.caller import Caller
from app.store import QueueStats, store_for


def queue_stats(
    now: datetime, queues: list[Queue] | None = None, caller: Caller | None = None
) -> dict[int, QueueStats]:
    """{queue id: its statistics at `now`} for `queues` (default: every queue the caller may see)."""
    conn = db.session.connection()
    ids = [q.id for q in queues] if queues is not None else None
    if ids is None and scoping.queue_ids(caller) is not None:
        ids = list(db.session.scalars(scoping.queue_ids(caller)))
    return store_for(conn).queue_stats(conn, now, queue_ids=ids)


def rate_window(rate_limit: str | None, rate_starts: list | None, now: datetime) -> dict | None:
    """A rate limit as the statistics show it: the limit, the starts inside its window now and
    how many more may start now; None without a limit."""
    if not rate_limit:
        return None
    limit = parse_rate_limit(rate_limit)
    starts = [float(at) for at in rate_starts or []]
    room = allowance(limit, starts, now.timestamp())
    return {"limit": str(limit), "starts_in_window": limit.count - room, "room": room}


def queue_to_dict(queue: Queue, stats: QueueStats | None, *, now: datetime | None = None) -> dict:
    """A queue as `--json` and the API show it, with its statistics."""
    from app.clock import iso_z, utcnow

    document = {
        "id": queue.id,
        "name": queue.name,
        "project": queue.project.full_name,  # ORG/PROJECT
        "description": queue.description,
        "concurrency_limit": queue.concurrency_limit,
        "rate_limit": queue.rate_limit,
        "rate_window": rate_window(queue.rate_limit, queue.rate_starts, now or utcnow()),
        "priority": queue.priority,
        "paused": queue.paused,
        "paused_by": queue.paused_by,
        "paused_at": iso_z(queue.paused_at),
        "paused_reason": queue.paused_reason,
        "created_at": iso_z(queue.created_at),
        "updated_at": iso_z(queue.updated_at),
    }
    document["stats"] = stats.as_dict() if stats is not None else None
    return document
