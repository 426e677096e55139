"""gunicorn's error and access logs through Cronwell's formatters (app/logs.py).

Set in gunicorn.conf.py (`logger_class`). A module of its own so that only the web server imports
gunicorn: app/logs.py is loaded by every process, and gunicorn's logger module was 0.5 MB of the
worker's and the scheduler's memory.
"""

from __future__ import annotations

import logging

from gunicorn.glogging import Logger as _GunicornBaseLogger

from app.logs import make_formatter


def _name_gunicorn_plainly(record: logging.LogRecord) -> bool:
    """gunicorn writes everything it says about itself, its INFO lines included, to a logger named
    `gunicorn.error`: shown as `gunicorn`, so "Booting worker" does not read as an error."""
    if record.name == "gunicorn.error":
        record.name = "gunicorn"
    return True


class GunicornLogger(_GunicornBaseLogger):
    """gunicorn's error and access logs through Cronwell's formatters.

    The access log is one structured record per request (method, path without the query string,
    status, duration, bytes, remote address), never headers or cookies. LOG_FORMAT comes from the
    environment, with the same default as the app (json unless DEBUG).
    """

    def setup(self, cfg) -> None:
        super().setup(cfg)
        from config import load_settings

        formatter = make_formatter(load_settings()["LOG_FORMAT"])
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                handler.setFormatter(formatter)
                handler.addFilter(_name_gunicorn_plainly)
        # gunicorn keeps its access log at INFO whatever the level; at DEBUG the polls show too.
        self.access_log.setLevel(min(logging.INFO, self.error_log.level))

    def access(self, resp, req, environ, request_time) -> None:
        if not self.access_log_enabled:
            return
        status = resp.status.split(None, 1)[0] if isinstance(resp.status, str) else resp.status
        duration_ms = round(request_time.total_seconds() * 1000, 3)
        method, path = environ.get("REQUEST_METHOD"), environ.get("PATH_INFO")
        # The console's live panels and lists poll every few seconds: at INFO they would bury
        # everything else in development. A poll is an HTMX GET; it is logged at DEBUG.
        polling = method == "GET" and environ.get("HTTP_HX_REQUEST") == "true"
        try:
            self.access_log.log(
                logging.DEBUG if polling else logging.INFO,
                "%s %s %s %sms",
                method,
                path,
                status,
                duration_ms,
                extra={
                    "event": "http_request",
                    "method": method,
                    "path": path,
                    "status": int(status),
                    "duration_ms": duration_ms,
                    "bytes": getattr(resp, "sent", None),
                    "remote": environ.get("REMOTE_ADDR"),
                },
            )
        except Exception:
            self.error("could not write the access log line", exc_info=True)
