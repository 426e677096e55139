"""The API's problem documents (RFC 9457) as exceptions: `errors` holds the per-field messages."""

from __future__ import annotations

from typing import Any


class CronwellError(Exception):
    """A request the server refused (or could not answer): its status, title, detail and the
    per-field messages of a 422 (`errors`, e.g. {"config": "...", "[3].queue": "..."})."""

    def __init__(self, status: int, title: str, detail: str, errors: dict[str, str] | None = None, body: Any = None):
        self.status, self.title, self.detail = status, title, detail
        self.errors: dict[str, str] = dict(errors or {})
        self.body = body
        fields = "; ".join(f"{name}: {message}" for name, message in self.errors.items())
        super().__init__(f"{status} {title}: {detail}" + (f" ({fields})" if fields else ""))


class Unauthorized(CronwellError):
    """401: no token, or an expired or revoked one."""


class Forbidden(CronwellError):
    """403: the token's role may not do this."""


class NotFound(CronwellError):
    """404: missing, or another organization's."""


class Conflict(CronwellError):
    """409: the current state forbids it (a disabled job, a request with this key still running)."""


class PreconditionFailed(CronwellError):
    """412: the object changed since it was read (its ETag, sent as If-Match, is stale): read it
    again and reapply the change."""


class ValidationFailed(CronwellError):
    """422: the fields in `errors` were refused."""


class RateLimited(CronwellError):
    """429: too many requests; `retry_after` seconds to wait, when the server said. The client
    sends a call that is safe to repeat again by itself; this is raised when the call is not (an
    update, a delete, an action without an Idempotency-Key), when the wait asked for is longer than
    the client waits, or when its retries are spent."""

    retry_after: float | None = None

    def __str__(self) -> str:
        wait = f"; retry after {self.retry_after:g} s" if self.retry_after is not None else ""
        return super().__str__() + wait


class RunTimeout(TimeoutError):
    """`runs.wait` gave up before the run ended; `execution` is the run as last read."""

    def __init__(self, execution: Any, timeout: float) -> None:
        self.execution = execution
        super().__init__(f"execution {execution.id} is still {execution.status} after {timeout:g} s")


_BY_STATUS: dict[int, type[CronwellError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    412: PreconditionFailed,
    422: ValidationFailed,
    429: RateLimited,
}


def error_for(status: int, body: Any, headers: Any = None) -> CronwellError:
    """The exception for an answer of `status` with `body` (a problem document, or anything)."""
    document = body if isinstance(body, dict) else {}
    kind = _BY_STATUS.get(status, CronwellError)
    error = kind(
        status,
        str(document.get("title") or "error"),
        str(document.get("detail") or body or ""),
        document.get("errors") if isinstance(document.get("errors"), dict) else None,
        body,
    )
    if isinstance(error, RateLimited) and headers is not None and headers.get("Retry-After"):
        try:
            error.retry_after = float(headers["Retry-After"])
        except ValueError:
            pass
    return error
