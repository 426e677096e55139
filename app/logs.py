"""Logging for all three processes: one JSON object per line in production, text in development.

Log records carry structured fields through `extra=` (event, job_id, execution_id, worker_id...);
the JSON formatter emits them as keys, and every line has an `event` (`log` when the caller gave
none). gunicorn's own error and access logs go through the same formatters (`GunicornLogger`, in
app/gunicorn_logs.py: only the web server imports gunicorn).

Secrets never reach the output: fields whose names look secret (password, token, secret,
authorization, cookie) are replaced, the values of the secret settings (SECRET_KEY,
SCHEDULER_CLI_SECRET, METRICS_TOKEN, DEV_ADMIN_PASSWORD, passwords inside DATABASE_URL and
REDIS_URL) are masked wherever they appear, and credentials in URLs are masked by pattern.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.json import JsonFormatter

from app.clock import iso_z
from app.sensitive import SECRET_NAME as _SECRET_FIELD
from app.sensitive import URL_CREDENTIALS as _URL_CREDENTIALS
from app.sensitive import secret_values

_CONFIGURED_HANDLER = "_cronwell_handler"
MASK = "[redacted]"
_STANDARD_ATTRS = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class Redactor:
    """Masks secret values, secret-looking fields and URL credentials."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, MASK)
        return _URL_CREDENTIALS.sub(lambda m: m.group("prefix") + "***@", value)

    def value(self, value: Any, key: str | None = None) -> Any:
        if key is not None and _SECRET_FIELD.search(key) and value not in (None, ""):
            return MASK
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self.value(v, str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple, set)):
            return [self.value(v) for v in value]
        return value


def _iso_time(record: logging.LogRecord) -> str:
    return iso_z(datetime.fromtimestamp(record.created, tz=UTC), "milliseconds")


class CronwellJsonFormatter(JsonFormatter):
    """`{"time", "level", "logger", "message", "event", "pid", ...extra}` on one line, secrets masked."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__(
            "%(asctime)s %(levelname)s %(name)s %(message)s %(process)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger", "process": "pid"},
            json_ensure_ascii=False,
        )
        self.redactor = redactor

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 (logging API)
        return _iso_time(record)

    def process_log_record(self, log_data: dict) -> dict:
        log_data.setdefault("event", "log")
        return {key: self.redactor.value(value, key) for key, value in log_data.items()}


class CronwellTextFormatter(logging.Formatter):
    """`time LEVEL logger: message key=value ...` for people at a terminal, secrets masked."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.redactor = redactor

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 (logging API)
        return _iso_time(record)

    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        extras = {
            k: self.redactor.value(v, k)
            for k, v in record.__dict__.items()
            if k not in _STANDARD_ATTRS and not k.startswith("_")
        }
        if extras:
            base += " " + " ".join(f"{k}={v}" for k, v in extras.items())
        return self.redactor.text(base)


def make_formatter(fmt: str, secrets: Iterable[str] | None = None) -> logging.Formatter:
    """The JSON or text formatter, masking `secrets` (default: those in os.environ)."""
    redactor = Redactor(secret_values() if secrets is None else secrets)
    if fmt == "json":
        return CronwellJsonFormatter(redactor)
    if fmt == "text":
        return CronwellTextFormatter(redactor)
    raise ValueError(f"LOG_FORMAT must be json or text, got {fmt!r}")


def configure_logging(fmt: str = "text", level: str = "INFO", secrets: Iterable[str] | None = None) -> None:
    """Install one stderr handler on the root logger (idempotent across create_app calls)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _CONFIGURED_HANDLER, False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    setattr(handler, _CONFIGURED_HANDLER, True)
    handler.setFormatter(make_formatter(fmt, secrets))
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    if fmt == "json":
        # Python warnings and uncaught exceptions would otherwise print free text among the JSON lines.
        logging.captureWarnings(True)
        _route_uncaught_exceptions()


def _route_uncaught_exceptions() -> None:
    crash_log = logging.getLogger("cronwell.crash")

    def log_uncaught(exc_type, exc, tb) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc, tb)
            return
        crash_log.critical("uncaught exception", exc_info=(exc_type, exc, tb), extra={"event": "uncaught_exception"})

    def log_thread_exception(args: threading.ExceptHookArgs) -> None:
        crash_log.critical(
            "uncaught exception in thread %s",
            getattr(args.thread, "name", "?"),
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
            extra={"event": "uncaught_exception"},
        )

    sys.excepthook = log_uncaught
    threading.excepthook = log_thread_exception
