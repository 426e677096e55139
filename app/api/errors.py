"""Errors as `application/problem+json` (RFC 9457), from one handler for every API request.

The web UI registers its HTML error pages on the app; `register_problem_handlers` wraps each of
them so that a request under `/api/` gets a problem document instead, whatever raised it: an HTTP
error (abort, routing, 405, a rate limit), a service error (NotFound -> 404, Conflict -> 409,
ValidationFailed -> 422 with per-field messages), a request that failed its schema (422, one
message per field) or anything unexpected (500, logged, nothing about it disclosed).
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, current_app, json, request
from marshmallow import ValidationError
from werkzeug.exceptions import HTTPException, InternalServerError

from app.extensions import limiter
from app.services.errors import Conflict, Forbidden, NotFound, ServiceError, ValidationFailed

log = logging.getLogger("cronwell.api")

API_PREFIX = "/api/"
PROBLEM_TYPE = "application/problem+json"

TITLES = {
    400: "Bad request",
    401: "Authentication required",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    406: "Not acceptable",
    409: "Conflict",
    412: "Precondition failed",
    413: "Request too large",
    414: "URI too long",
    415: "Unsupported media type",
    422: "Unprocessable content",
    428: "Precondition required",
    429: "Too many requests",
    500: "Internal server error",
}


class ApiError(Exception):
    """An error an API view raises to answer `status` with a problem document."""

    def __init__(
        self, status: int, detail: str, *, errors: dict[str, str] | None = None, headers: dict | None = None
    ) -> None:
        super().__init__(detail)
        self.status, self.detail, self.errors, self.headers = status, detail, errors, dict(headers or {})


def is_api_request() -> bool:
    return request.path.startswith(API_PREFIX)


def problem(status: int, detail: str, *, errors: dict[str, str] | None = None, headers: dict | None = None):
    """The problem response: type, title, status, detail, instance and, for invalid input, errors."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "instance": request.path,
    }
    if errors:
        body["errors"] = errors
    response = current_app.response_class(json.dumps(body), status=status, mimetype=PROBLEM_TYPE)
    for name, value in (headers or {}).items():
        response.headers[name] = value
    if status == 401:
        response.headers.setdefault("WWW-Authenticate", 'Bearer realm="cronwell"')
    return response


def flatten_messages(messages: Any, prefix: str = "") -> dict[str, str]:
    """marshmallow/webargs messages ({"json": {"name": ["..."]}}) as {"name": "first message"}."""
    if isinstance(messages, dict):
        out: dict[str, str] = {}
        for key, value in messages.items():
            # webargs nests the messages under where they came from; the field name is enough.
            name = (
                prefix
                if key in {"json", "query", "headers", "form", "view_args", "files"}
                else (f"{prefix}.{key}" if prefix else str(key))
            )
            out.update(flatten_messages(value, name))
        return out
    if isinstance(messages, list | tuple):
        if messages and all(isinstance(item, str) for item in messages):
            return {prefix or "_schema": messages[0]}
        out = {}
        for item in messages:
            out.update(flatten_messages(item, prefix))
        return out
    return {prefix or "_schema": str(messages)}


def _from_http_exception(error: HTTPException):
    status = error.code or 500
    data = getattr(error, "data", None) or {}
    if status == 422 and "messages" in data:  # webargs: the request did not fit its schema
        errors = flatten_messages(data["messages"])
        return problem(422, "The request has invalid fields: " + ", ".join(sorted(errors)), errors=errors)
    headers = {}
    if status == 405:
        headers = {k: v for k, v in error.get_headers() if k == "Allow"}
    if status == 429:
        headers["Retry-After"] = str(_retry_after_seconds(error))
    detail = error.description if isinstance(error.description, str) else TITLES.get(status, "")
    if status == 404 and detail.startswith("The requested URL was not found"):
        detail = f"nothing at {request.path}"
    return problem(status, detail, headers=headers)


def _retry_after_seconds(error: HTTPException) -> int:
    """Seconds until the limit that refused the request lets another through."""
    return limiter.retry_after_seconds()


def _to_problem(error: BaseException):
    if isinstance(error, ApiError):
        return problem(error.status, error.detail, errors=error.errors, headers=error.headers)
    if isinstance(error, ValidationFailed):
        return problem(422, str(error), errors=error.errors)
    if isinstance(error, ValidationError):
        errors = flatten_messages(error.messages)
        return problem(422, "The request has invalid fields: " + ", ".join(sorted(errors)), errors=errors)
    if isinstance(error, NotFound):
        return problem(404, str(error))
    if isinstance(error, Forbidden):
        return problem(403, str(error))
    if isinstance(error, Conflict):
        return problem(409, str(error))
    if isinstance(error, ServiceError):
        return problem(400, str(error))
    if isinstance(error, HTTPException) and not isinstance(error, InternalServerError):
        return _from_http_exception(error)
    original = getattr(error, "original_exception", None) or error
    log.error("unhandled API error", extra={"event": "api_error"}, exc_info=original)
    return problem(500, "The error was logged. Try again, or check the server logs.")


def register_problem_handlers(app: Flask) -> None:
    """Answer every error of an API request with a problem document; leave the web's pages alone.

    Call after the web registered its handlers: each one is wrapped, and the API's own error
    classes are added."""
    for code_map in list(app.error_handler_spec[None].values()):
        for exc_class, handler in list(code_map.items()):
            code_map[exc_class] = _api_first(handler)
    # Raised only by API code. Anything unexpected becomes an InternalServerError, whose (wrapped)
    # 500 handler answers a problem document under /api/ and the web's page elsewhere.
    for exc_class in (ApiError, ValidationError):
        app.register_error_handler(exc_class, _api_first(None))


def _api_first(web_handler):
    def handle(error):
        if is_api_request() or web_handler is None:
            return _to_problem(error)
        return web_handler(error)

    return handle
