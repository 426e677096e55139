"""Worker pages: the registry, read from the workers' heartbeats.

The page polls itself: an HTMX GET of the same URL answers with the registry fragment only.
"""

from __future__ import annotations

from flask import Blueprint, current_app, render_template

from app.clock import utcnow
from app.services.read import dashboard
from app.web.access import is_htmx, signin_required

bp = Blueprint("workers", __name__, url_prefix="/workers")

POLL_SECONDS = 5


def _registry(now) -> list[dict]:
    stale_after = current_app.config["HEARTBEAT_STALE_SECONDS"]
    workers = []
    for beat in dashboard.heartbeats(now, stale_after).get("worker", []):
        info = beat["info"]
        workers.append(
            {
                "id": beat["id"],
                "host": beat["host"],
                "pid": beat["pid"],
                "queues": info.get("queues") or ["*"],
                "slots": info.get("slots"),
                "busy": info.get("busy") or 0,
                "state": "stale" if beat["stale"] else "running",
                "last_seen_seconds": beat["age_seconds"],
                "running": [{"execution_id": i, "started_at": None} for i in info.get("running") or []],
            }
        )
    return workers


@bp.get("/")
@signin_required
def index():
    """Every worker process: id, host, pid, queues, slots, state, busy or idle, what it runs."""
    now = utcnow()
    context = {"workers": _registry(now), "poll_seconds": POLL_SECONDS, "now": now}
    if is_htmx():
        return render_template("workers/_table.html", **context)
    return render_template("workers/list.html", **context)
