"""`flask scheduler run`: the process that decides what is due."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup

from app.stop_flag import StopFlag
from cli.common import FiniteFloatRange
from cli.process import Status, metrics_options, refuse_insecure, serve_metrics

scheduler_cli = AppGroup("scheduler", help="Run the scheduler process.")


@scheduler_cli.command("run")
@click.option("--once", is_flag=True, help="Run a single tick and exit.")
@click.option(
    "--tick-seconds",
    type=FiniteFloatRange(0.1, 3600),
    default=None,
    help="Longest sleep between ticks (default SCHEDULER_TICK_SECONDS). The scheduler also wakes "
    "at the earliest next run and when a job changes.",
)
@click.option("--scheduler-id", default=None, help="Identity in heartbeats (default scheduler-HOST-PID).")
@metrics_options("SCHEDULER_METRICS_PORT")
def run_scheduler(
    once: bool, tick_seconds: float | None, scheduler_id: str | None, metrics_port: int | None, metrics_host: str
) -> None:
    """Create due executions, apply misfire and overlap policies, recover expired leases.

    \b
    Example:
      flask scheduler run                 # run until SIGTERM / Ctrl-C
      flask scheduler run --once          # one tick, print its summary
    Several schedulers may run at once (on PostgreSQL): they share the work safely.
    """
    from app.services.engine.heartbeats import sync_clock_at_start
    from app.services.engine.scheduler import Scheduler

    refuse_insecure("scheduler")
    sync_clock_at_start(current_app.extensions["sqlalchemy"].engine)
    scheduler = Scheduler(current_app._get_current_object(), scheduler_id=scheduler_id)  # type: ignore[attr-defined]  # a proxy, typed as the app it stands for
    status = Status("scheduler", scheduler.id, as_log=False) if once else Status.for_app("scheduler", scheduler.id)
    serve_metrics("scheduler", metrics_port, metrics_host, status)
    if once:
        status(scheduler.tick())
        scheduler.forget_heartbeat()  # a one-off tick is not a running scheduler
        return
    stop = StopFlag().install()
    tick = tick_seconds or current_app.config["SCHEDULER_TICK_SECONDS"]
    database = current_app.extensions["sqlalchemy"].engine.dialect.name
    status.emit(
        "started",
        f"scheduler {scheduler.id} started (tick <= {tick:g}s, database {database})",
        tick_seconds=tick,
        database=database,
    )
    scheduler.run_forever(tick_seconds=tick, should_stop=stop, echo=status)
    status.emit("stopped", f"scheduler {scheduler.id} stopped")
