"""`flask execution ...`: list, inspect, retry and cancel executions."""

from __future__ import annotations

import json

import click
from flask.cli import AppGroup

from app.clock import utcnow
from app.domain.states import ExecutionStatus, values
from app.models.execution import ONE_OFF_LABEL
from app.services.serialize import decoded_result, execution_to_dict
from app.services.use_cases import executions as execution_service
from app.services.use_cases import runs as run_service
from cli.common import (
    ACTOR,
    EXECUTION_ID,
    JOB_ID,
    emit_json,
    fmt_both,
    fmt_duration,
    fmt_instant,
    fmt_utc,
    handle_errors,
    json_option,
    mutating,
    print_fields,
    print_table,
    tz_option,
)
from cli.org import cli_caller, project_option
from cli.workflow import echo_step_fates

execution_cli = AppGroup("execution", help="List, inspect, retry and cancel executions.")


@execution_cli.command("list")
@click.option("--status", type=click.Choice(values(ExecutionStatus)), help="Only executions in this status.")
@click.option("--job", "job_id", type=JOB_ID, metavar="JOB_ID", help="Only executions of this job.")
@click.option("--task", metavar="TASK", help="Only executions running this task (one-off runs included).")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@project_option
@tz_option
@json_option
@handle_errors
def list_executions(status, job_id, task, limit, project_name, tz, as_json):
    """List executions, newest first (output and error are left out; see `inspect`).

    \b
    Examples:
      flask execution list --status failed --limit 25
      flask execution list --job 3 --json
      flask execution list --task generate_report
      flask execution list --tz Asia/Tokyo
    """
    rows = execution_service.list_executions(
        status=status,
        job_id=job_id,
        task=task,
        limit=limit,
        caller=cli_caller(project_name) if project_name else None,
    )
    if as_json:
        emit_json([execution_to_dict(e, include_output=False) for e in rows])
        return
    print_table(
        [
            "ID",
            "JOB",
            "STATUS",
            "TRIGGER",
            f"SCHEDULED FOR ({tz or 'UTC'})",
            "ATTEMPTS",
            "DURATION",
            f"FINISHED ({tz or 'UTC'})",
        ],
        [
            [
                e.id,
                f"{e.job_id} {e.job.name}" if e.job is not None else f"{ONE_OFF_LABEL} ({e.task})",
                e.status,
                e.trigger,
                fmt_instant(e.scheduled_for, tz),
                f"{e.attempts}/{e.max_attempts}",
                fmt_duration(e.duration_seconds),
                fmt_instant(e.finished_at, tz),
            ]
            for e in rows
        ],
        empty="No executions match.",
    )


@execution_cli.command("inspect")
@click.argument("execution_id", type=EXECUTION_ID)
@json_option
@handle_errors
def inspect(execution_id, as_json):
    """Show one execution with its attempts, output and error.

    \b
    Example:
      flask execution inspect 17
      flask execution inspect 17 --json | jq -r .output
    """
    execution = execution_service.get_execution(execution_id, with_attempts=True)
    callbacks = run_service.callbacks_of(execution.id)
    if as_json:
        emit_json(
            {
                **execution_to_dict(execution, attempts=execution.attempt_rows),
                "callbacks": [{"id": c.id, "status": c.status, "task": c.callback_task} for c in callbacks],
            }
        )
        return
    job = execution.job
    zone = job.timezone if job is not None else "UTC"
    print_fields(
        [
            ("execution", execution.id),
            ("job", f"{execution.job_id} {job.name!r} ({job.task})" if job is not None else ONE_OFF_LABEL),
            ("status", execution.status + (f" ({execution.reason})" if execution.reason else "")),
            (
                "trigger",
                execution.trigger + (f" of execution {execution.retry_of_id}" if execution.retry_of_id else ""),
            ),
            ("scheduled for", fmt_both(execution.scheduled_for, zone)),
            ("available at", fmt_both(execution.available_at, zone)),
            ("attempts", f"{execution.attempts} of {execution.max_attempts}"),
            ("claimed by", execution.claimed_by),
            ("lease expires", fmt_utc(execution.lease_expires_at)),
            ("started", fmt_both(execution.started_at, zone)),
            ("finished", fmt_both(execution.finished_at, zone)),
            ("duration", fmt_duration(execution.duration_seconds)),
            ("exit code", execution.exit_code),
            ("key", execution.idempotency_key),
            ("task", _task_line(execution)),
            (
                "config" if job is None else "override",
                json.dumps(execution.config_override) if execution.config_override else None,
            ),
            ("project", execution.project_row.full_name if execution.project_row is not None else None),
            ("queue", execution.queue),
            ("timeout", f"{execution.timeout_seconds}s" if job is None and execution.timeout_seconds else None),
            ("batch", execution.batch_id),
            ("callback of", f"execution {execution.parent_id}" if execution.parent_id else None),
            ("callbacks", ", ".join(f"execution {c.id} ({c.status})" for c in callbacks) or None),
            ("task version", execution.task_version),
        ]
    )
    click.echo()
    click.echo("Attempts:")
    print_table(
        ["#", "STATUS", "WORKER", "PID", "STARTED (UTC)", "DURATION", "EXIT"],
        [
            [
                a.number,
                a.status,
                a.worker_id,
                a.pid,
                fmt_utc(a.started_at),
                fmt_duration((a.finished_at - a.started_at).total_seconds()) if a.finished_at else "running",
                a.exit_code,
            ]
            for a in execution.attempt_rows
        ],
        empty="  (none yet)",
    )
    click.echo()
    click.echo("Result:")
    result = decoded_result(execution.result)
    click.echo(json.dumps(result, indent=2, ensure_ascii=False) if execution.result is not None else "  (none)")
    for title, text in (("Output", execution.output), ("Error", execution.error)):
        click.echo()
        click.echo(f"{title}:")
        click.echo(text.rstrip("\n") if text else "  (empty)")


@execution_cli.command("explain")
@click.argument("execution_id", type=EXECUTION_ID)
@json_option
@handle_errors
def explain(execution_id, as_json):
    """Say what became of one execution and why (a one-off run's too: it has no job to explain).

    A workflow run's execution, or one of its steps', also lists the run's steps: why each runs,
    waits (for which upstream steps, or in its queue, and why) or will not run.

    \b
    Example:
      flask execution explain 17
    """
    from app.services.read.explain import explain_execution

    document = explain_execution(execution_id, now=utcnow())
    if as_json:
        emit_json(document)
        return
    click.echo(f"Execution {execution_id} ({document['execution']['job_name']}, {document['execution']['task']}):")
    click.echo(f"  {document['fate']}: {document['summary']}")
    steps = document["details"].get("steps")
    if steps:
        click.echo(f"  Steps of workflow run #{document['details']['workflow_run_id']}:")
        echo_step_fates(steps)


def _task_line(execution) -> str | None:
    if execution.callback_task:
        return f"{execution.callback_task} (callback)"
    return execution.task  # a one-off run's (a job's is on the job line)


@execution_cli.command("retry")
@click.argument("execution_id", type=EXECUTION_ID)
@json_option
@mutating
@handle_errors
def retry(execution_id, as_json):
    """Run a failed, timed-out, dead-lettered or cancelled execution again, as a new execution.

    \b
    Example:
      flask execution retry 17
    """
    execution = execution_service.retry_execution(execution_id, now=utcnow(), actor=ACTOR)
    if as_json:
        emit_json(execution_to_dict(execution))
        return
    click.echo(f"Execution {execution.id} created to retry execution {execution_id}; it is {execution.status}")


@execution_cli.command("cancel")
@click.argument("execution_id", type=EXECUTION_ID)
@click.option("--reason", metavar="TEXT", help="Why; kept on the execution and in the event log.")
@json_option
@mutating
@handle_errors
def cancel(execution_id, reason, as_json):
    """Cancel an execution: a queued one at once, a running one by killing its task.

    \b
    A running execution's worker sees the request within about a second, sends SIGTERM to the
    task's process group (SIGKILL after the grace period) and records it `cancelled`, with no
    retry. The command returns once the request is stored; `flask execution inspect` shows
    the outcome.
    \b
    Examples:
      flask execution cancel 17
      flask execution cancel 17 --reason "wrong input file"
    """
    execution = execution_service.cancel_execution(execution_id, now=utcnow(), actor=ACTOR, reason=reason)
    if as_json:
        emit_json(execution_to_dict(execution))
        return
    if execution.status == "running":
        click.echo(f"Execution {execution.id} is running on {execution.claimed_by}; asked it to cancel the task")
    else:
        click.echo(f"Execution {execution.id} cancelled")
