"""Web wiring: blueprints, security headers and template helpers."""
from __future__ import annotations

from flask import Flask


def register_web(app: Flask) -> None:
    from app.health.routes import bp as health_bp
    from app.metrics_routes import bp as metrics_bp

    app.register_blueprint(health_bp)
    app.register_blueprint(metrics_bp)
