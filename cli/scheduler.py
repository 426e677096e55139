"""`flask scheduler run`: the process that decides what is due."""
from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup

from cli.signals import StopFlag

scheduler_cli = AppGroup("scheduler", help="Run the scheduler process.")


@scheduler_cli.command("run")
@click.option("--once", is_flag=True, help="Run a single tick and exit.")
@click.option("--tick-seconds", type=click.FloatRange(min=0.1), default=None,
              help="Longest sleep between ticks (default SCHEDULER_TICK_SECONDS). The scheduler also wakes "
                   "at the earliest next run and when a job changes.")
@click.option("--scheduler-id", default=None, help="Identity in heartbeats (default scheduler-HOST-PID).")
def run_scheduler(once: bool, tick_seconds: float | None, scheduler_id: str | None) -> None:
    """Create due executions, apply misfire and overlap policies, recover expired leases.

    \b
    Example:
      flask scheduler run                 # run until SIGTERM / Ctrl-C
      flask scheduler run --once          # one tick, print its summary
    Several schedulers may run at once (on PostgreSQL): they share the work safely.
    """
    from app.services.scheduler import Scheduler

    scheduler = Scheduler(current_app._get_current_object(), scheduler_id=scheduler_id)
    if once:
        click.echo(scheduler.tick().line())
        return
    stop = StopFlag().install()
    tick = tick_seconds or current_app.config["SCHEDULER_TICK_SECONDS"]
    click.echo(f"scheduler {scheduler.id} started (tick <= {tick:g}s, database {current_app.extensions['sqlalchemy'].engine.dialect.name})")
    scheduler.run_forever(tick_seconds=tick, should_stop=stop, echo=click.echo)
    click.echo(f"scheduler {scheduler.id} stopped")
