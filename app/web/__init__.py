"""Web wiring: blueprints, sign-in, security headers, error pages and template helpers.

The blueprints are thin adapters over `app.services`; access rules live in `app.web.access`.
"""

from __future__ import annotations

from flask import Flask

from app.clock import utcnow


def register_web(app: Flask) -> None:
    """Attach everything the web UI needs to `app`."""
    from app.web.converters import register_converters
    from app.web.errors import register_error_handlers
    from app.web.filters import register_filters
    from app.web.security import add_security_headers, configure_cookies

    configure_cookies(app)
    register_login(app)
    register_converters(app)
    register_blueprints(app)
    register_filters(app)
    register_error_handlers(app)
    app.after_request(add_security_headers)
    app.context_processor(template_globals)


def register_blueprints(app: Flask) -> None:
    from app.alerts import channels as _channel_pages  # noqa: F401 - registers on the alerts blueprint
    from app.alerts import notify_pages as _notify_pages  # noqa: F401 - registers on the alerts blueprint
    from app.alerts.routes import bp as alerts_bp
    from app.audit.routes import bp as audit_bp
    from app.auth.routes import bp as auth_bp
    from app.batches.routes import bp as batches_bp
    from app.bulk.routes import bp as bulk_bp
    from app.dashboard.routes import bp as dashboard_bp
    from app.events.routes import bp as events_bp
    from app.executions.routes import bp as executions_bp
    from app.health.routes import bp as health_bp
    from app.jobs.routes import bp as jobs_bp
    from app.metrics_routes import bp as metrics_bp
    from app.queues.routes import bp as queues_bp
    from app.task_catalog.routes import bp as tasks_bp
    from app.tokens.routes import bp as tokens_bp
    from app.users import project_changes as _project_changes  # noqa: F401 - registers on the projects blueprint
    from app.users.projects import bp as projects_bp
    from app.users.routes import bp as users_bp
    from app.users.routes import context_bp, switcher
    from app.users.settings import bp as settings_bp
    from app.workers.routes import bp as workers_bp
    from app.workflows.routes import bp as workflows_bp

    for blueprint in (
        health_bp,
        auth_bp,
        dashboard_bp,
        jobs_bp,
        executions_bp,
        queues_bp,
        workers_bp,
        alerts_bp,
        bulk_bp,
    ):
        app.register_blueprint(blueprint)
    app.register_blueprint(tasks_bp)
    app.register_blueprint(audit_bp)
    app.register_blueprint(events_bp)
    app.register_blueprint(settings_bp)
    app.register_blueprint(batches_bp)
    app.register_blueprint(workflows_bp)
    app.register_blueprint(tokens_bp)
    app.register_blueprint(users_bp)
    app.register_blueprint(context_bp)
    app.context_processor(switcher)
    app.register_blueprint(projects_bp)
    app.register_blueprint(metrics_bp)
    register_request_metrics(app)
    register_audit_address(app)


def register_audit_address(app: Flask) -> None:
    """Every request (pages and API) tells the audit log the client's address."""
    from app.audit.routes import forget_client_address, remember_client_address

    app.before_request(remember_client_address)
    app.teardown_request(forget_client_address)


def register_request_metrics(app: Flask) -> None:
    """Time every request of the app for /metrics (the hooks are app-wide, so the factory adds them)."""
    from app import metrics
    from app.metrics_routes import record_request_metrics, start_request_timer

    metrics.enable_recording()  # the web reads what it records, so do its engine calls
    app.before_request(start_request_timer)
    app.after_request(record_request_metrics)


def register_login(app: Flask) -> None:
    from datetime import timedelta

    from flask import current_app, session

    from app.extensions import login_manager
    from app.services.use_cases import sessions, users

    login_manager.login_view = "auth.login"
    login_manager.session_protection = "strong"

    @login_manager.user_loader
    def load_user(user_id: str):
        # The signed cookie is not enough: its server-side session must still exist (sign-out,
        # a password change, a disabled account or a role change ends it) and be younger than
        # SESSION_MAX_AGE_HOURS.
        try:
            user_key = int(user_id)
        except (TypeError, ValueError):
            return None
        max_age = timedelta(hours=current_app.config["SESSION_MAX_AGE_HOURS"])
        if not sessions.is_live(user_key, session.get(sessions.COOKIE_KEY), now=utcnow(), max_age=max_age):
            return None
        return users.get_active_user(user_key)


def template_globals() -> dict:
    from app.web import access

    return {
        "auth_enabled": access.auth_enabled(),
        "signed_in": access.is_signed_in(),
        "can_operate": access.can_operate(),
        "can_administer": access.can_administer(),
        "can_view_private": access.can_view_private(),
        "can_read_public": access.can_read_public(),
        "many_projects_in_view": access.many_projects_in_view,
        "creates_in": access.creates_in,
        "queue_url": access.queue_url,
        "now": utcnow(),
    }
