"""Liveness and readiness endpoints for load balancers and orchestrators."""
from __future__ import annotations

from flask import Blueprint, jsonify

from app.services import health

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    """Liveness: 200 while the process can answer at all."""
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz():
    """Readiness: 503 with the failing checks when this process should not take traffic."""
    report = health.readiness()
    return jsonify(report), (200 if report["ready"] else 503)
