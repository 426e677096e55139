"""Error pages: a readable page for browsers, a small fragment for HTMX requests.

Service errors that reach this far (a route did not handle them itself) still become a 4xx
page, never a 500: NotFound -> 404, Forbidden -> 403, Conflict -> 409, ValidationFailed -> 400.
"""

from __future__ import annotations

import logging

from flask import Flask, render_template
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException

from app.services.errors import Conflict, Forbidden, NotFound, ServiceError, ValidationFailed
from app.web.access import is_htmx

log = logging.getLogger("cronwell.web")

TITLES = {
    400: "Bad request",
    401: "Sign-in required",
    403: "Not allowed",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Request too large",
    429: "Too many requests",
    500: "Something went wrong",
}


def render_error(status: int, message: str, headers: dict | None = None):
    template = "errors/_error.html" if is_htmx() else "errors/error.html"
    body = render_template(template, status=status, title=TITLES.get(status, "Error"), message=message)
    return body, status, headers or {}


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(CSRFError)
    def csrf_error(error: CSRFError):
        log.info("CSRF check failed", extra={"event": "csrf_failed", "reason": error.description})
        return render_error(
            400,
            f"The form's security token was missing or invalid ({error.description}) Reload the page and try again.",
        )

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException):
        headers = dict(error.get_headers()) if error.code == 405 else {}
        headers.pop("Content-Type", None)
        return render_error(error.code or 500, error.description or TITLES.get(error.code, ""), headers)

    @app.errorhandler(NotFound)
    def service_not_found(error: NotFound):
        return render_error(404, str(error))

    @app.errorhandler(Forbidden)
    def service_forbidden(error: Forbidden):
        return render_error(403, str(error))

    @app.errorhandler(Conflict)
    def service_conflict(error: Conflict):
        return render_error(409, str(error))

    @app.errorhandler(ValidationFailed)
    def service_invalid(error: ValidationFailed):
        return render_error(400, str(error))

    @app.errorhandler(ServiceError)
    def service_error(error: ServiceError):
        return render_error(400, str(error))

    @app.errorhandler(500)
    def internal_error(error):
        log.error("unhandled error", extra={"event": "web_error"}, exc_info=getattr(error, "original_exception", None))
        return render_error(500, "The error was logged. Try again, or check the server logs.")
