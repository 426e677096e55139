"""`flask worker run`: check the options and the settings, then become `python -m app.worker_process`.

Its own module, beside cli/worker.py's `list` and `stop`: the worker app kind registers only this
(as the `worker` group with one command), and nothing here imports SQLAlchemy or the models
(cli/common.py does), so the `flask` process that hands over never loads them either: the worker
parent's peak is the exec'd program's (docs/adr/0012-worker-parent-on-dbapi.md).
"""

from __future__ import annotations

from typing import Any

import click
from flask import current_app
from flask.cli import AppGroup

from cli.process import metrics_options, refuse_insecure


def _queues(value: str | None) -> list[str] | None:
    from app.worker_process import queue_names

    try:
        return queue_names(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("run")
@click.option(
    "--workers",
    "slots",
    type=click.IntRange(1, 256),
    default=4,
    show_default=True,
    help="How many tasks run at once (each in its own process).",
)
@click.option(
    "--once",
    is_flag=True,
    help="Drain what is due now, wait for it to finish, and exit (1 if the database kept failing for about a minute).",
)
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
    from app import worker_process
    from app.services.engine.runtime import WorkerRuntime

    refuse_insecure("worker")
    names = _queues(queues)
    options: dict[str, Any] = dict(once=once, worker_id=worker_id, metrics_port=metrics_port, metrics_host=metrics_host)
    if _settings_from_environment(current_app.config):
        # The same worker without SQLAlchemy and Flask in its memory, in this same process (pid,
        # signals and supervisor unchanged): docs/adr/0012-worker-parent-on-dbapi.md.
        _exec(worker_process.command_line(slots=slots, queues=",".join(names) if names else None, **options))
    code = worker_process.serve(
        WorkerRuntime.from_app(current_app._get_current_object()),  # type: ignore[attr-defined]  # a proxy, typed as the app it stands for
        slots=slots,
        queues=names,
        **options,
    )
    if code:
        raise click.exceptions.Exit(code)


def _settings_from_environment(config) -> bool:
    """Whether the worker process, reading the environment alone, gets this app's settings: not
    when the app was built with settings of its own (tests, an embedding program). DEBUG is
    left out: the `flask` command sets it from FLASK_DEBUG after loading (CRONWELL_DEBUG keeps
    the configured one)."""
    from config import load_settings

    return all(config.get(key) == value for key, value in load_settings().items() if key != "DEBUG")


def _exec(arguments: list[str]) -> None:
    import os
    import sys

    from config import BASE_DIR

    # The project on the module path, wherever `flask` was started from (FLASK_APP=/srv/...).
    path = os.pathsep.join(p for p in (str(BASE_DIR), os.environ.get("PYTHONPATH", "")) if p)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *arguments], {**os.environ, "PYTHONPATH": path})


# The `worker` group of the worker app kind: `run` alone.
worker_run_cli = AppGroup("worker", help="Run a worker process.")
worker_run_cli.add_command(run_worker)
