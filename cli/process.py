"""What the long-running commands (`scheduler run`, `worker run`) share at start-up: the
production-secret check, the optional metrics server, and where their status goes (`Status`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import click
from flask import current_app

from app.process_status import Status, StatusReport  # noqa: F401 - the commands' import of them
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
    """Exit 1 before starting when DEBUG=0 runs with the development SECRET_KEY (or, for the
    scheduler, which delivers alerts, without a usable CHANNEL_SECRET_KEY)."""
    try:
        refuse_insecure_start(current_app.config, seals_channels=kind != "worker")
    except InsecureSettings as exc:
        logging.getLogger(f"cronwell.{kind}").critical(str(exc), extra={"event": "refused_to_start"})
        raise click.exceptions.Exit(1) from None


def serve_metrics(kind: str, port: int | None, host: str, status: Status) -> None:
    """Start the Prometheus HTTP server on a background thread when a port is given."""
    if port is None:
        return
    from app import metrics_exposition

    try:
        metrics_exposition.serve(port, host, role=kind)
    except OSError as exc:
        raise click.ClickException(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
    status.emit("metrics", f"{kind} metrics on http://{host}:{port}/metrics port={port}", port=port, host=host)
