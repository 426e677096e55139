"""The answers gunicorn gives itself, before the app sees a request, as problem documents.

gunicorn refuses what it cannot parse with a small HTML page: a request line over its hard cap
(`limit_request_line`, at most 8190 bytes: 414), header fields over their limits (431), a
malformed request line, method, version or header (400), a chunked body it cannot read (400) or an
unsupported transfer coding (501). Those answers come from gunicorn's one error writer; once a
worker has started, `answer_problem_documents` replaces that writer with one that sends the same
status as `application/problem+json`, so that nothing the server answers falls outside the API
document (every operation declares a problem document as its `default` response).

Called from gunicorn.conf.py's `post_worker_init`; the request was never parsed, so the document
has no `instance`.
"""

from __future__ import annotations

import json

from gunicorn import util

from app.api.errors import PROBLEM_TYPE, TITLES


def write_problem(sock, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's `util.write_error`, answering a problem document instead of an HTML page."""
    body = json.dumps(
        {"type": "about:blank", "title": TITLES.get(status_int, reason), "status": status_int, "detail": mesg or reason}
    ).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\n"
        "Connection: close\r\n"
        f"Content-Type: {PROBLEM_TYPE}\r\n"
        f"Content-Length: {len(body)}\r\n"
        "\r\n"
    ).encode("latin-1")
    util.write_nonblock(sock, head + body)


def answer_problem_documents() -> None:
    """Make this gunicorn worker answer its own refusals as problem documents."""
    util.write_error = write_problem
