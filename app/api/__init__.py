"""The REST API under /api/v1 (SPEC section 15): flask-smorest blueprints, one module per resource.

The OpenAPI document (`/api/v1/openapi.json`) is generated from the marshmallow schemas that
validate the requests and shape the responses; the job schemas come from `app.definitions`.
Swagger UI (`/api/docs`) and ReDoc (`/api/redoc`) load their assets from `static/vendor/`, so the
documentation works offline. Errors are problem documents (app/api/errors.py); the caller is a
JWT or an API token (app/api/security.py). No CORS headers are sent: browsers on other origins
cannot call the API (a same-origin page, or a server-side client, can).
"""

from __future__ import annotations

import http
import importlib

from flask import Blueprint, Flask, render_template
from flask_smorest import Api
from flask_smorest.utils import prepare_response

from app.api.errors import PROBLEM_TYPE, register_problem_handlers
from app.api.schemas import ProblemSchema

API_PREFIX = "/api/v1"
# One module per resource, each with a `blp` blueprint, registered in this order (the document's order).
RESOURCES = (
    "sessions",
    "me",
    "organizations",
    "projects",
    "queues",
    "jobs",
    "schedules",
    "executions",
    "batches",
    "alerts",
    "workers",
    "audit",
    "users",
    "tokens",
)

DESCRIPTION = """Cronwell's REST API. Sign in with `POST /api/v1/auth/login` and send the access
token as `Authorization: Bearer <token>`; machines use an API token (`cw_...`) the same way.
Errors are `application/problem+json` (RFC 9457) with per-field messages in `errors`. Lists are
paginated by cursor: follow the `next` link. Roles: viewer reads, operator also runs work, admin
also manages users, projects, queues and tokens. Another organization's object answers 404."""


class CronwellApi(Api):
    """flask-smorest's Api whose error responses are problem documents and whose error handler is ours."""

    ERROR_SCHEMA = ProblemSchema

    def _register_error_handlers(self):
        """The app-wide problem handler is registered by `register_api` instead."""

    def _register_responses(self):
        for status in http.HTTPStatus:
            response = {"description": status.phrase}
            if not (100 <= status < 200) and status not in (204, 304):
                response["schema"] = self.ERROR_SCHEMA
            prepare_response(response, self.spec, PROBLEM_TYPE)
            self.spec.components.response(status.name, response, lazy=True)
        response = {"description": "Default error response", "schema": self.ERROR_SCHEMA}
        prepare_response(response, self.spec, PROBLEM_TYPE)
        self.spec.components.response("DEFAULT_ERROR", response, lazy=True)


docs = Blueprint("api_docs", __name__)


def register_api(app: Flask) -> None:
    """Attach the API, its documentation pages, the JWT manager and the rate limiter to `app`."""
    from app.api.security import init_security, limit_per_credential
    from app.extensions import csrf

    app.config.update(
        API_TITLE="Cronwell",
        API_VERSION="v1",
        OPENAPI_VERSION="3.0.3",
        OPENAPI_URL_PREFIX=API_PREFIX,
        OPENAPI_JSON_PATH="openapi.json",
        API_SPEC_OPTIONS={
            "info": {"description": DESCRIPTION},
            "servers": [{"url": "/"}],
            "security": [{"bearerAuth": []}],
            "components": {
                "securitySchemes": {
                    "bearerAuth": {
                        "type": "http",
                        "scheme": "bearer",
                        "description": "A JWT access token from /api/v1/auth/login, or an API token (cw_...).",
                    }
                }
            },
        },
    )
    init_security(app)
    api = CronwellApi(app)  # one per app: the document is built from this app's registrations
    for name in RESOURCES:
        module = importlib.import_module(f"app.api.{name}")
        # Bearer credentials in a header, never cookies: no cross-site request can carry them.
        csrf.exempt(module.blp)
        limit_per_credential(module.blp)
        api.register_blueprint(module.blp)
    csrf.exempt(docs)
    app.register_blueprint(docs)
    register_problem_handlers(app)


# The documentation pages load scripts and styles from this origin only; Swagger UI and ReDoc set
# inline styles, and ReDoc runs its search in a blob worker, hence the wider policy on these two pages.
DOCS_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "worker-src 'self' blob:",
        "frame-ancestors 'none'",
        "base-uri 'none'",
    ]
)


@docs.get("/api/docs")
def swagger_ui():
    """Swagger UI for the API, from static/vendor/swagger-ui (works offline)."""
    return render_template("api/swagger.html"), 200, {"Content-Security-Policy": DOCS_POLICY}


@docs.get("/api/redoc")
def redoc():
    """ReDoc for the API, from static/vendor/redoc (works offline)."""
    return render_template("api/redoc.html"), 200, {"Content-Security-Policy": DOCS_POLICY}
