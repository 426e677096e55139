"""`flask worker run|list|stop|reload`: the process that claims due executions and runs their tasks
(`run`, in cli/worker_run.py), the registry of those processes, and the orders to drain or stop
one or to reload its task code."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.clock import utcnow
from cli.common import (
    ACTOR,
    emit_json,
    fmt_age,
    fmt_instant,
    handle_errors,
    json_option,
    mutating,
    print_table,
    tz_option,
)
from cli.worker_run import run_worker

worker_cli = AppGroup("worker", help="Run, list, stop and reload worker processes.")
worker_cli.add_command(run_worker)


def _running_text(view, tz: str | None) -> str:
    if not view.executions:
        return "-"
    shown = [f"{item.id}@{fmt_instant(item.started_at, tz) or '?'}" for item in view.executions[:3]]
    more = len(view.executions) - len(shown)
    return ", ".join(shown) + (f" (+{more})" if more > 0 else "")


def _tasks_text(view) -> str:
    """How many tasks it advertises and their most common code version (`all` for a worker that
    advertises none: it claims every task)."""
    if view.tasks is None:
        return "all"
    versions = view.versions
    top = f" {versions[0][0]}" if versions else ""
    return f"{len(view.tasks)}{top}" + (f" (+{len(versions) - 1} versions)" if len(versions) > 1 else "")


@worker_cli.command("list")
@tz_option
@json_option
@handle_errors
def list_worker_processes(tz, as_json):
    """List workers: id, host, pid, queues, slots, state, busy/idle, tasks and what they run.

    \b
    Status: alive (heartbeating) | stopped (exited cleanly) | lost (no heartbeat for
    HEARTBEAT_STALE_SECONDS): the words `flask health` and /readyz use. State: running |
    draining (told to drain, finishing its work; alive but not serving) | stopped | stale (the
    state of a lost worker). Stopped and lost workers stay listed until HEARTBEAT_PRUNE_SECONDS.
    TASKS: how many tasks it advertises (it claims only those) and their most common code
    version; `--json` lists each task with its version. RUNNING shows execution@start (UTC,
    or in --tz).
    \b
    Examples:
      flask worker list
      flask worker list --tz Europe/Paris
      flask worker list --json | jq '.[] | select(.state == "running") | .id'
    """
    # Imported here, not at the top: `worker run` loads this module and needs neither the read
    # side (scoping, callers, permissions) nor the use cases' audit log, which would add to its memory.
    from app.domain.states import process_status
    from app.services.read.workers import list_workers, worker_to_dict

    views = list_workers(utcnow())
    if as_json:
        emit_json([worker_to_dict(view) for view in views])
        return
    print_table(
        [
            "ID",
            "HOST",
            "PID",
            "STATUS",
            "STATE",
            "QUEUES",
            "BUSY",
            "LAST SEEN",
            "TASKS",
            f"RUNNING (EXECUTION@START, {tz or 'UTC'})",
        ],
        [
            [
                view.id,
                view.host,
                view.pid,
                process_status(view.state).value,
                view.state.value
                + (" (reloading)" if view.reloading else "")
                + (f" ({view.pending_command} asked)" if view.pending_command else ""),
                ",".join(view.queues),
                f"{view.busy}/{view.slots}" + (" idle" if view.idle else ""),
                fmt_age(view.age_seconds) + " ago",
                _tasks_text(view),
                _running_text(view, tz),
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


@worker_cli.command("reload")
@click.option(
    "--worker-id", default=None, help="The worker to reload (see `flask worker list`); default: every running one."
)
@json_option
@mutating
@handle_errors
def reload_worker(worker_id, as_json):
    """Tell a worker (or every running one) to reload its task code.

    \b
    It claims nothing more, lets its running attempts finish and records them, restarts its
    fork server on the task modules now on disk, advertises the new tasks and versions, and
    goes on claiming: no attempt is lost or run twice. SIGHUP to the worker process does the
    same. The order is stored and announced; the worker acts within about a second.
    \b
    Examples:
      flask worker reload
      flask worker reload --worker-id worker-host1-4242
    """
    from app.services.read.workers import worker_to_dict  # not for `worker run`: see `worker list`
    from app.services.use_cases import workers as worker_service

    views = worker_service.reload_worker(worker_id, now=utcnow(), actor=ACTOR)
    if as_json:
        emit_json([worker_to_dict(view) for view in views])
        return
    for view in views:
        click.echo(f"Worker {view.id} told to reload: it finishes {view.busy} running, then restarts its fork server")
