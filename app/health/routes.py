"""Liveness and readiness endpoints for load balancers, and the health page for operators."""

from __future__ import annotations

from flask import Blueprint, jsonify, render_template

from app.cache import get_cache
from app.clock import utcnow
from app.domain.permissions import Action
from app.services.read import health
from app.web.access import current_caller, public, requires

bp = Blueprint("health", __name__)


@bp.get("/healthz")
@public
def healthz():
    """Liveness: 200 while the process can answer at all."""
    return jsonify(status="ok")


@bp.get("/readyz")
@public
def readyz():
    """Readiness: 503 with the failing checks when this process should not take traffic."""
    report = health.readiness()
    return jsonify(report), (200 if report["ready"] else 503)


@bp.get("/health/")
@requires(Action.READ)
def page():
    """Readiness checks, scheduler and worker heartbeats, queue depth and the cache, for people."""
    from app.services.read.dashboard import summary_counts
    from app.services.read.status import status_report

    now = utcnow()
    cache = get_cache()
    # Execution counts come from the dashboard's cached summary: a full count per page view
    # costs about 100 ms at a million rows, and the summary's counts past 50,000 are estimates,
    # which the page labels as such (count_kinds).
    caller = current_caller()
    summary = summary_counts(caller)
    report = status_report(now, executions_by_status=summary["executions_by_status"], caller=caller)
    return render_template(
        "health/page.html",
        report=report,
        now=now,
        count_kinds=summary.get("count_kinds") or {},
        cache_backend=cache.backend_name,
        cache_ok=cache.ping(),
    )
