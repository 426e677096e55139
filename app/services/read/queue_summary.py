"""The queue line of the dashboard and of `flask health`: due work, waiting retries, rows in
flight and the oldest wait, for everything or for the queues a caller may see."""

from __future__ import annotations

from datetime import datetime, timedelta

from app.extensions import db
from app.services import scoping
from app.services.caller import Caller
from app.services.serialize import iso
from app.store import store_for


def queue_summary(now: datetime, caller: Caller | None = None) -> dict:
    """Queue depth (due claimable rows), waiting retries, in-flight rows and the oldest wait; for a
    caller narrowed to an organization, summed over its queues' statistics."""
    conn = db.session.connection()
    visible = scoping.queue_ids(caller)
    if visible is not None:
        stats = store_for(conn).queue_stats(conn, now, queue_ids=list(db.session.scalars(visible))).values()
        waited = max((s.oldest_pending_seconds for s in stats if s.oldest_pending_seconds is not None), default=None)
        return {
            "depth": sum(s.pending for s in stats),
            "retries_waiting": sum(s.retrying for s in stats),
            "in_flight": sum(s.running for s in stats),
            "oldest_pending_at": iso(now - timedelta(seconds=waited)) if waited is not None else None,
            "oldest_pending_age_seconds": round(waited, 3) if waited is not None else None,
        }
    queue = store_for(conn).queue_counts(conn, now)
    oldest = queue.oldest_due_at
    return {
        "depth": queue.depth,
        "retries_waiting": queue.retries_waiting,
        "in_flight": queue.in_flight,
        "oldest_pending_at": iso(oldest),
        "oldest_pending_age_seconds": round(max(0.0, (now - oldest).total_seconds()), 3) if oldest else None,
    }
