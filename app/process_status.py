"""What a long-running process says about itself: started, a running summary, stopped.

Shared by `flask scheduler run`, `flask worker run` and the lean worker process
(app/worker_process.py), which has no Flask app and no Click, so this module needs neither.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol


class StatusReport(Protocol):
    """A loop's report (the scheduler's TickReport, the worker's WorkerStats)."""

    EVENT: ClassVar[str]

    def fields(self) -> Mapping[str, Any]: ...

    def line(self) -> str: ...


class Status:
    """Where a long-running command's status goes: a line on stdout for people (LOG_FORMAT=text),
    one log record per event otherwise (LOG_FORMAT=json).

    Each event is `<kind>_<name>` (`scheduler_started`, `scheduler_tick`, `worker_summary`...)
    with its fields in `extra` and the process id as `<kind>_id`; the printed line is derived
    from the same fields. Call it with a report (the loops' `echo`), or use `emit` directly.
    """

    def __init__(self, kind: str, process_id: str, *, as_log: bool) -> None:
        self.kind, self.process_id, self.as_log = kind, process_id, as_log
        self.logger = logging.getLogger(f"cronwell.{kind}")

    @classmethod
    def for_app(cls, kind: str, process_id: str) -> Status:
        from flask import current_app  # here: the worker process has settings, not an app

        return cls(kind, process_id, as_log=current_app.config["LOG_FORMAT"] == "json")

    def __call__(self, report: StatusReport) -> None:
        self.emit(report.EVENT, report.line(), **report.fields())

    def emit(self, name: str, message: str, **fields: Any) -> None:
        if not self.as_log:
            print(message, flush=True)
            return
        extra = {"event": f"{self.kind}_{name}", f"{self.kind}_id": self.process_id}
        for key, value in fields.items():
            # `created`, `name`... are LogRecord attributes and cannot be passed as extra.
            extra[f"{key}_count" if key in _RECORD_ATTRIBUTES else key] = value
        self.logger.info(message, extra=extra)


_RECORD_ATTRIBUTES = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}
