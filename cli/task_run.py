"""`flask task run TASK`: a one-off run, a task run now or later without a job, optionally
followed to its end (`--wait`: exit 0 when it succeeded, 1 otherwise)."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from app.clock import utcnow
from app.models import Execution
from app.services.caller import Caller
from app.services.serialize import decoded_result, execution_to_dict
from app.services.use_cases import one_off_runs
from cli.common import ACTOR, emit_json, fmt_duration, fmt_utc, handle_errors, json_option, mutating

WAIT_POLL_SECONDS = 0.2  # how often --wait reads the run again


def result_of(execution: Execution) -> Any:
    """What `--wait` prints: the task's return value (the execution's stored `result`; a string
    stays a string), or, for a task that returned nothing, what it printed (its output)."""
    if execution.result is not None:
        return decoded_result(execution.result)
    return execution.output


def _follow(execution_id: int, caller: Caller) -> Execution:
    """Read the run again until it reaches a terminal status (the worker moves it; this only looks)."""
    from app.extensions import db

    while True:
        db.session.rollback()  # a fresh snapshot each time: see what the worker committed
        execution = one_off_runs.get_run(execution_id, caller)
        if execution.is_terminal:
            return execution
        time.sleep(WAIT_POLL_SECONDS)


def _print_outcome(execution: Execution) -> None:
    summary = (
        f"Execution {execution.id} ({execution.task_name}) {execution.status}"
        f" after {execution.attempts} of {execution.max_attempts} attempts"
        + (f" in {fmt_duration(execution.duration_seconds)}" if execution.duration_seconds is not None else "")
        + (f": {execution.reason}" if execution.reason else "")
    )
    click.echo(summary, err=True)
    result = result_of(execution)
    if isinstance(result, str):
        if result:
            click.echo(result.rstrip("\n"))
    elif result is not None:
        click.echo(json.dumps(result, ensure_ascii=False))
    if execution.status != "succeeded" and execution.error:
        click.echo(execution.error.rstrip("\n"), err=True)


@click.command("run")
@click.argument("task")
@click.option("--config", metavar="JSON", help="The task's config, a JSON object checked against its schema.")
@click.option("--in", "run_in", metavar="DURATION", help="Start after this delay (30s, 5m, 2h, 1d).")
@click.option("--at", "run_at", metavar="ISO", help="Start at this instant (ISO 8601; no offset means UTC).")
@click.option("--queue", metavar="NAME", help="The queue it waits in (default 'default').")
@click.option("--priority", type=int, help="Lower runs first (default: the queue's priority).")
@click.option("--max-attempts", type=int, help="Tries before it is dead-lettered (default 3).")
@click.option(
    "--idempotency-key", metavar="KEY", help="Run once per key in the project: a second run with it returns the first."
)
@click.option("--project", "project_name", metavar="ORG/PROJECT", help="The project it runs in (default: default).")
@click.option("--wait", is_flag=True, help="Follow it to the end, print its result; exit 0 on success, 1 otherwise.")
@json_option
@mutating
@handle_errors
def run_task(task, config, run_in, run_at, queue, priority, max_attempts, idempotency_key, project_name, wait, as_json):
    """Run TASK once, now or later, without a job (a one-off run, shown as "one-off").

    \b
    It waits in its queue like any run (pause, concurrency limit, priority), is retried up to
    --max-attempts, timed out at DEFAULT_JOB_TIMEOUT_SECONDS and listed by `flask execution list
    --task TASK`.
    \b
    Examples:
      flask task run generate_report --config '{"hours": 24}'
      flask task run always_succeed --in 30s --queue reports
      flask task run sleep_for_seconds --config '{"seconds": 1}' --wait
    """
    data = {
        "task": task,
        "config": config,
        "in": run_in,
        "at": run_at,
        "queue": queue,
        "priority": priority,
        "max_attempts": max_attempts,
        "idempotency_key": idempotency_key,
        "project": project_name,
    }
    caller = Caller.cli()
    run = one_off_runs.create_run(
        {key: value for key, value in data.items() if value is not None}, now=utcnow(), actor=ACTOR, caller=caller
    )
    execution = run.execution
    if not wait:
        if as_json:
            emit_json({**execution_to_dict(execution), "created": run.created})
            return
        if run.created:
            click.echo(
                f"One-off run of {execution.task_name} created: execution {execution.id}, "
                f"{execution.status}, available at {fmt_utc(execution.available_at)}"
            )
        else:
            click.echo(
                f"Execution {execution.id} already has idempotency key {idempotency_key!r}: not run again "
                f"(it is {execution.status})"
            )
        return
    if not as_json:
        click.echo(f"Waiting for execution {execution.id} ({execution.task_name})...", err=True)
    execution = _follow(execution.id, caller)
    if as_json:
        document = execution_to_dict(execution, attempts=execution.attempt_rows)
        document["result"] = result_of(execution)
        emit_json(document)
    else:
        _print_outcome(execution)
    if execution.status != "succeeded":
        click.get_current_context().exit(1)
