"""`/metrics` for Prometheus, and the per-request HTTP metrics of the web process.

Gating, chosen by the operator: `METRICS_ENABLED=0` (the default) answers 404 as if the route did
not exist; with `METRICS_TOKEN` set a scraper must send `Authorization: Bearer <token>` (compared
in constant time), otherwise 401. Without a token the endpoint is open: keep it on a private
network (`flask check-deploy` warns).
"""

from __future__ import annotations

import hmac
import time

from flask import Blueprint, Response, abort, current_app, g, request

bp = Blueprint("metrics", __name__)
_GAUGES = "cronwell_metrics_gauges"


def start_request_timer() -> None:
    """Before every request of the app (registered by app.web.register_request_metrics)."""
    g._metrics_started = time.perf_counter()


def record_request_metrics(response):
    """After every request of the app: its method, route, status and duration."""
    started = g.pop("_metrics_started", None)
    if started is not None:
        from app import metrics

        endpoint = request.url_rule.rule if request.url_rule is not None else "unmatched"
        metrics.observe_request(request.method, endpoint, response.status_code, time.perf_counter() - started)
    return response


def _authorized() -> bool:
    token = current_app.config.get("METRICS_TOKEN")
    if not token:
        return True
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    # Constant time, so response timing says nothing about how much of a guess was right.
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


@bp.get("/metrics")
def metrics_endpoint():
    """Prometheus text exposition: HTTP series of every web process and the database gauges."""
    if not current_app.config.get("METRICS_ENABLED"):
        abort(404)
    if not _authorized():
        return Response(
            "metrics need a bearer token\n",
            status=401,
            mimetype="text/plain",
            headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
        )
    from app import metrics, metrics_exposition
    from app.extensions import db

    metrics.enable_database_readings()
    gauges = current_app.extensions.get(_GAUGES)
    if gauges is None:
        gauges = current_app.extensions.setdefault(_GAUGES, metrics_exposition.DatabaseGauges(db.engine))
    body, content_type = metrics_exposition.render_web_metrics(gauges)
    return Response(body, mimetype=None, content_type=content_type)
