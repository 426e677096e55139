"""The REST API under /api/v1: flask-smorest blueprints, one module per resource.

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
import threading
from typing import Any

from flask import Blueprint, Flask, render_template
from flask_smorest import Api
from flask_smorest.utils import prepare_response

from app.api.errors import PROBLEM_TYPE, TITLES, register_problem_handlers
from app.api.openapi import MAX_URL_BYTES, CronwellDocPlugin, refuse_long_url, tag_name
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
    "job_files",
    "schedules",
    "executions",
    "batches",
    "workflows",
    "runs",
    "alerts",
    "notifications",
    "workers",
    "tasks",
    "audit",
    "events",
    "users",
    "tokens",
)

DESCRIPTION = """Cronwell's REST API. Sign in with `POST /api/v1/auth/login` and send the access
token as `Authorization: Bearer <token>`; machines use an API token (`cw_...`) the same way.
Errors are `application/problem+json` (RFC 9457) with per-field messages in `errors`. Lists are
paginated by cursor: follow the `next` link. Roles: viewer reads, operator also runs work, admin
also manages users, projects, queues and tokens. Another organization's object answers 404.
A URL (path and query) longer than MAX_URL_BYTES bytes answers 414.""".replace("MAX_URL_BYTES", str(MAX_URL_BYTES))

# What each shared error response says, and its example's `detail` (the example of a problem
# document is built from these, so it always has the shape the handlers answer).
ERROR_DETAILS = {
    400: "the request could not be read",
    401: "sign in: send 'Authorization: Bearer <access token or API token>'",
    403: "your role may view but not change anything; an operator or admin may",
    404: "job 99 does not exist",
    405: "The method is not allowed for the requested URL.",
    409: "the job is disabled: enable it first",
    412: "the object changed since you read it: read it again and reapply your change",
    414: f"the URL is 5000 bytes long; the API reads URLs of up to {MAX_URL_BYTES} bytes",
    422: "The request has invalid fields: name",
    429: "10 per 1 minute",
    500: "The error was logged. Try again, or check the server logs.",
}
ERROR_DESCRIPTIONS = {
    414: f"The URL (path and query string) is longer than {MAX_URL_BYTES} bytes.",
    429: "Too many requests for this credential (or, on sign-in and token endpoints, this address); see Retry-After.",
}


def problem_example(status: int) -> dict:
    """A problem document as `app.api.errors.problem` answers it for `status`."""
    example = {
        "type": "about:blank",
        "title": TITLES.get(status, "Error"),
        "status": status,
        "detail": ERROR_DETAILS.get(status, TITLES.get(status, "Error")),
        "instance": "/api/v1/jobs/99" if status in (404, 409, 412) else "/api/v1/jobs",
    }
    if status == 422:
        example["errors"] = {"name": "is required"}
    return example


class CronwellApi(Api):
    """flask-smorest's Api whose error responses are problem documents, whose error handler is
    ours, and whose document is written when it is first read.

    Writing each operation into the document (its schemas resolved, its examples copied) was about
    three quarters of making an app: every gunicorn worker, and every test, paid it at start-up,
    and kept the document in memory, though few ever serve `openapi.json` or `flask openapi`. A
    blueprint's routes are registered at once, as ever; its operations wait in `_unwritten` until
    something reads `spec`, and then go in in the order they were registered, so the document is
    the same as one written eagerly."""

    ERROR_SCHEMA = ProblemSchema
    _spec: Any = None
    _writing = threading.Lock()

    @property
    def spec(self) -> Any:
        unwritten = self.__dict__.setdefault("_unwritten", [])
        if unwritten or self.__dict__.get("_responses_unwritten"):
            with self._writing:
                if self.__dict__.pop("_responses_unwritten", False):
                    self._write_responses()
                while unwritten:
                    blp, name, parameters = unwritten.pop(0)
                    blp.register_views_in_doc(self, self._app, self._spec, name=name, parameters=parameters)
                    self._spec.tag({"name": tag_name(name), "description": blp.description})
        return self._spec

    @spec.setter
    def spec(self, value: Any) -> None:
        self._spec = value

    def register_blueprint(self, blp, *, parameters=None, **options):
        """flask-smorest's registration, with the blueprint's operations left for the document's first read."""
        name = options.get("name", blp.name)
        self._app.extensions["flask-smorest"]["blp_name_to_api"][name] = self
        self._app.register_blueprint(blp, **options)
        self.__dict__.setdefault("_unwritten", []).append((blp, name, parameters))

    def _register_error_handlers(self):
        """The app-wide problem handler is registered by `register_api` instead."""

    def _register_responses(self):
        self._responses_unwritten = True

    def _write_responses(self) -> None:
        for status in http.HTTPStatus:
            response: dict[str, Any] = {"description": ERROR_DESCRIPTIONS.get(status, status.phrase)}
            if not (100 <= status < 200) and status not in (204, 304):
                response["schema"] = self.ERROR_SCHEMA
                if status >= 400:
                    response["example"] = problem_example(status)
            prepare_response(response, self.spec, PROBLEM_TYPE)
            self.spec.components.response(status.name, response, lazy=True)
        response = {
            "description": "Default error response",
            "schema": self.ERROR_SCHEMA,
            "example": problem_example(500),
        }
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
    # One per app: the document is built from this app's registrations.
    api = CronwellApi(app, spec_kwargs={"extra_plugins": [CronwellDocPlugin()]})
    for name in RESOURCES:
        module = importlib.import_module(f"app.api.{name}")
        # Bearer credentials in a header, never cookies: no cross-site request can carry them.
        csrf.exempt(module.blp)
        limit_per_credential(module.blp)
        api.register_blueprint(module.blp)
        # Per app and per blueprint (not app-wide): the web UI's URLs are not the API's to refuse.
        app.before_request_funcs.setdefault(module.blp.name, []).insert(0, refuse_long_url)
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
