"""`flask worker run|list|stop`: the process that claims due executions and runs their tasks,
the registry of those processes, and the order to drain or stop one."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup

from app.clock import utcnow
from cli.common import ACTOR, emit_json, fmt_age, fmt_utc, handle_errors, json_option, mutating, print_table
from cli.process import metrics_options, refuse_insecure

worker_cli = AppGroup("worker", help="Run, list and stop worker processes.")


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
    from app import worker_process
    from app.services.engine.runtime import WorkerRuntime

    refuse_insecure("worker")
    names = _queues(queues)
    options = dict(once=once, worker_id=worker_id, metrics_port=metrics_port, metrics_host=metrics_host)
    if _settings_from_environment(current_app.config):
        # The same worker without SQLAlchemy and Flask in its memory, in this same process (pid,
        # signals and supervisor unchanged): docs/adr/0012-worker-parent-on-dbapi.md.
        _exec(worker_process.command_line(slots=slots, queues=",".join(names) if names else None, **options))
    code = worker_process.serve(
        WorkerRuntime.from_app(current_app._get_current_object()), slots=slots, queues=names, **options
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


def _running_text(view) -> str:
    if not view.executions:
        return "-"
    shown = [f"{item.id}@{fmt_utc(item.started_at) or '?'}" for item in view.executions[:3]]
    more = len(view.executions) - len(shown)
    return ", ".join(shown) + (f" (+{more})" if more > 0 else "")


@worker_cli.command("list")
@json_option
@handle_errors
def list_worker_processes(as_json):
    """List workers: id, host, pid, queues, slots, state, busy/idle and what they run.

    \b
    State: running | draining (told to drain, finishing its work) | stopped (exited cleanly)
    | stale (no heartbeat for HEARTBEAT_STALE_SECONDS). Stopped and stale workers stay listed
    until HEARTBEAT_PRUNE_SECONDS. RUNNING shows execution@start (UTC).
    \b
    Examples:
      flask worker list
      flask worker list --json | jq '.[] | select(.state == "running") | .id'
    """
    # Imported here, not at the top: `worker run` loads this module and needs neither the read
    # side (scoping, callers, permissions) nor the use cases' audit log (issue 19, item 4).
    from app.services.read.workers import list_workers, worker_to_dict

    views = list_workers(utcnow())
    if as_json:
        emit_json([worker_to_dict(view) for view in views])
        return
    print_table(
        ["ID", "HOST", "PID", "STATE", "QUEUES", "BUSY", "LAST SEEN", "RUNNING (EXECUTION@START)"],
        [
            [
                view.id,
                view.host,
                view.pid,
                view.state.value + (f" ({view.pending_command} asked)" if view.pending_command else ""),
                ",".join(view.queues),
                f"{view.busy}/{view.slots}" + (" idle" if view.idle else ""),
                fmt_age(view.age_seconds) + " ago",
                _running_text(view),
            ]
            for view in views
        ],
        empty="No workers have reported a heartbeat.",
    )


@worker_cli.command("stop")
@click.argument("worker_id")
@click.option(
    "--now",
    "at_once",
    is_flag=True,
    help="Stop at once: kill its running tasks and settle them as abandoned (retried per their job's policy).",
)
@json_option
@mutating
@handle_errors
def stop_worker(worker_id, at_once, as_json):
    """Tell worker WORKER_ID to drain and exit (see `flask worker list` for ids).

    \b
    Without --now it stops claiming, lets its running tasks finish and exits 0 (state
    `draining`, then `stopped`). The order is stored and announced; the worker acts within
    about a second.
    \b
    Examples:
      flask worker stop worker-host1-4242
      flask worker stop worker-host1-4242 --now
    """
    from app.services.read.workers import worker_to_dict  # not for `worker run`: see `worker list`
    from app.services.use_cases import workers as worker_service

    view = worker_service.stop_worker(worker_id, now=utcnow(), actor=ACTOR, at_once=at_once)
    if as_json:
        emit_json(worker_to_dict(view))
        return
    if at_once:
        click.echo(
            f"Worker {view.id} told to stop now; its {view.busy} running execution(s) will be retried per policy"
        )
    else:
        click.echo(f"Worker {view.id} told to drain: it claims nothing more, finishes {view.busy} running, then exits")
