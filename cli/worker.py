"""`flask worker run`: the process that claims due executions and runs their tasks."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup

from app.services.errors import ServiceError
from cli.process import Status, metrics_options, refuse_insecure, serve_metrics
from cli.signals import StopFlag

worker_cli = AppGroup("worker", help="Run the worker process.")


def _queues(value: str | None) -> list[str] | None:
    if not value:
        return None
    queues = [q.strip() for q in value.split(",") if q.strip()]
    if not queues:
        raise click.BadParameter("give at least one queue name, e.g. --queues default,reports")
    return queues


@worker_cli.command("run")
@click.option(
    "--workers",
    "slots",
    type=click.IntRange(1, 256),
    default=4,
    show_default=True,
    help="How many tasks run at once (each in its own process).",
)
@click.option("--once", is_flag=True, help="Drain what is due now, wait for it to finish, and exit.")
@click.option("--worker-id", default=None, help="Identity in claims and heartbeats (default worker-HOST-PID).")
@click.option("--queues", default=None, help="Comma-separated queues to serve (default: all).")
@metrics_options("WORKER_METRICS_PORT")
def run_worker(
    slots: int, once: bool, worker_id: str | None, queues: str | None, metrics_port: int | None, metrics_host: str
) -> None:
    """Claim due executions under a lease and run each task in its own process.

    \b
    Example:
      flask worker run --workers 8
      flask worker run --queues reports --worker-id reports-1
      flask worker run --once             # drain and exit (handy in scripts)
    On SIGTERM/Ctrl-C it stops claiming, lets running tasks finish within
    WORKER_SHUTDOWN_GRACE_SECONDS, settles the rest, and exits 0.
    """
    from app.services.engine.worker import Worker

    refuse_insecure("worker")
    try:
        # Unknown queue names stop the command here, before the fork server or anything else starts.
        worker = Worker(current_app._get_current_object(), worker_id=worker_id, slots=slots, queues=_queues(queues))
    except ServiceError as exc:
        raise click.ClickException(str(exc)) from None
    status = Status("worker", worker.id, as_log=False) if once else Status.for_app("worker", worker.id)
    serve_metrics("worker", metrics_port, metrics_host, status)
    stop = StopFlag().install()
    if not once:
        status.emit(
            "started",
            f"worker {worker.id} started ({slots} slots, queues {queues or 'all'})",
            slots=slots,
            queues=queues or "all",
        )
    worker.run(burst=once, should_stop=stop, echo=status)
    if not once:
        status.emit("stopped", f"worker {worker.id} stopped")
