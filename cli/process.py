"""What the long-running commands (`scheduler run`, `worker run`) share at start-up: the
production-secret check, the optional metrics server, and where their status lines go.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

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


def serve_metrics(kind: str, port: int | None, host: str, echo: Callable[[str], None]) -> None:
    """Start the Prometheus HTTP server on a background thread when a port is given."""
    if port is None:
        return
    from app import metrics

    try:
        metrics.serve(port, host, role=kind)
    except OSError as exc:
        raise click.ClickException(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
    echo(f"{kind} metrics on http://{host}:{port}/metrics port={port}")


def status_echo(kind: str, process_id: str) -> Callable[[str], None]:
    """Where the loop's status lines go: stdout for people (LOG_FORMAT=text), JSON log events otherwise.

    In JSON each line becomes one event: `<kind>_started`, `<kind>_stopped`, `<kind>_metrics`, or
    `<kind>_<first word>` (`scheduler_tick`), `<kind>_summary` for the worker's closing counts, with
    the line's key=value pairs as fields and the process id as `<kind>_id`.
    """
    if current_app.config["LOG_FORMAT"] != "json":
        return click.echo
    from app.logs import line_logger

    logger = logging.getLogger(f"cronwell.{kind}")
    loggers: dict[str, Callable[[str], None]] = {}

    def emit(line: str) -> None:
        words = line.split()
        if words[:1] == [kind]:
            named = {"started", "stopped", "metrics"} & set(words[1:3])
            suffix = named.pop() if named else "summary"
        else:
            suffix = words[0] if words else "line"
        event = f"{kind}_{suffix}"
        if event not in loggers:
            loggers[event] = line_logger(logger, event, **{f"{kind}_id": process_id})
        loggers[event](line)

    return emit
