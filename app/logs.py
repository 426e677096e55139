"""Logging for all three processes: JSON objects one per line in production, text in development.

Log records carry structured fields through `extra=` (event, job_id, execution_id, worker_id...);
the JSON formatter emits them as keys. Secrets never go into `extra`.
"""
from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter

_CONFIGURED_HANDLER = "_cronwell_handler"


class _TextFormatter(logging.Formatter):
    _STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        base = super().format(record)
        extras = {k: v for k, v in record.__dict__.items() if k not in self._STANDARD and not k.startswith("_")}
        if extras:
            base += " " + " ".join(f"{k}={v}" for k, v in extras.items())
        return base


def configure_logging(fmt: str = "text", level: str = "INFO") -> None:
    """Install one stderr handler on the root logger (idempotent across create_app calls)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, _CONFIGURED_HANDLER, False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    setattr(handler, _CONFIGURED_HANDLER, True)
    if fmt == "json":
        handler.setFormatter(
            JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s",
                          rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
                          timestamp=False)
        )
    else:
        handler.setFormatter(_TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
