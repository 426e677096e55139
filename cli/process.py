"""What the long-running commands (`scheduler run`, `worker run`) share at start-up: the
production-secret check, the optional metrics server, and where their status goes (`Status`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol

import click
from flask import current_app

from config import InsecureSettings, refuse_insecure_start


def metrics_options(port_envvar: str) -> Callable:
    """Add --metrics-port (env `port_envvar`) and --metrics-host (env METRICS_HOST) to a command."""

    def decorate(func: Callable) -> Callable:
        func = click.option(
            "--metrics-host",
            default="127.0.0.1",
            show_default=True,
            envvar="METRICS_HOST",
            help="Address the metrics server listens on (0.0.0.0 inside a container). Env: METRICS_HOST.",
        )(func)
        return click.option(
            "--metrics-port",
            type=click.IntRange(1, 65535),
            default=None,
            envvar=port_envvar,
            help=f"Serve Prometheus metrics on this port at /metrics (default: off). Env: {port_envvar}.",
        )(func)

    return decorate


def refuse_insecure(kind: str) -> None:
    """Exit 1 before starting when DEBUG=0 runs with the development SECRET_KEY."""
    try:
        refuse_insecure_start(current_app.config)
    except InsecureSettings as exc:
        logging.getLogger(f"cronwell.{kind}").critical(str(exc), extra={"event": "refused_to_start"})
        raise click.exceptions.Exit(1) from None


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
        return cls(kind, process_id, as_log=current_app.config["LOG_FORMAT"] == "json")

    def __call__(self, report: StatusReport) -> None:
        self.emit(report.EVENT, report.line(), **report.fields())

    def emit(self, name: str, message: str, **fields: Any) -> None:
        if not self.as_log:
            click.echo(message)
            return
        extra = {"event": f"{self.kind}_{name}", f"{self.kind}_id": self.process_id}
        for key, value in fields.items():
            # `created`, `name`... are LogRecord attributes and cannot be passed as extra.
            extra[f"{key}_count" if key in _RECORD_ATTRIBUTES else key] = value
        self.logger.info(message, extra=extra)


_RECORD_ATTRIBUTES = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


def serve_metrics(kind: str, port: int | None, host: str, status: Status) -> None:
    """Start the Prometheus HTTP server on a background thread when a port is given."""
    if port is None:
        return
    from app import metrics

    try:
        metrics.serve(port, host, role=kind)
    except OSError as exc:
        raise click.ClickException(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
    status.emit("metrics", f"{kind} metrics on http://{host}:{port}/metrics port={port}", port=port, host=host)
