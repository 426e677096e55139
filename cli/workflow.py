"""`flask workflow ...`: a workflow job's runs, one run's steps, cancel and retry (from a step)."""

from __future__ import annotations

from datetime import datetime

import click
from flask.cli import AppGroup

from app.clock import utcnow
from app.models import WorkflowRun
from app.services.read import workflows as workflow_read
from app.services.use_cases import workflows as workflow_service
from cli.common import (
    ACTOR,
    JOB_ID,
    IdType,
    check_tz,
    emit_json,
    fmt_duration,
    fmt_instant,
    handle_errors,
    json_option,
    mutating,
    print_fields,
    print_table,
    tz_option,
)

RUN_ID = IdType("workflow run", WorkflowRun)

workflow_cli = AppGroup("workflow", help="A workflow job's runs: list, show each step, cancel, retry from a step.")


def echo_step_fates(steps: list[dict], *, indent: str = "    ") -> None:
    """Explain's per-step lines (`details.steps` of `flask job explain` and `flask execution
    explain`): each step, its fate and why, in aligned columns."""
    if not steps:
        return
    name_width = max(len(step["step"]) for step in steps)
    fate_width = max(len(step["fate"]) for step in steps)
    for step in steps:
        click.echo(f"{indent}{step['step'].ljust(name_width)}  {step['fate'].ljust(fate_width)}  {step['summary']}")


def _when(value: str | None, tz: str | None) -> str | None:
    return fmt_instant(datetime.fromisoformat(value.replace("Z", "+00:00")), tz) if value else None


@workflow_cli.command("runs")
@click.argument("job_id", type=JOB_ID)
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--before", type=RUN_ID, metavar="RUN_ID", help="Only runs older than this one (the next page).")
@tz_option
@json_option
@handle_errors
def list_runs(job_id, limit, before, tz, as_json):
    """List a workflow job's runs, newest first, with how many steps stand where.

    \b
    Examples:
      flask workflow runs 7
      flask workflow runs 7 --json | jq '.[] | {id, status}'
    """
    tz = check_tz(tz)
    runs = workflow_service.list_runs(job_id, limit=limit, before=before)
    summaries = [workflow_read.run_summary(run) for run in runs]
    if as_json:
        emit_json(summaries)
        return
    print_table(
        ["RUN", "STATUS", "TRIGGER", "SCHEDULED FOR", "STARTED", "FINISHED", "STEPS", "RETRY OF"],
        [
            [
                s["id"],
                s["status"],
                s["trigger"],
                _when(s["scheduled_for"], tz),
                _when(s["started_at"], tz),
                _when(s["finished_at"], tz),
                f"{s['started_steps']}/{s['steps']} started"
                + (f", {s['upstream_failed']} upstream_failed" if s["upstream_failed"] else ""),
                s["retry_of"] or "",
            ]
            for s in summaries
        ],
        empty=f"No runs of job {job_id} yet: trigger one with `flask job trigger {job_id}`.",
    )


@workflow_cli.command("show")
@click.argument("run_id", type=RUN_ID)
@tz_option
@json_option
@handle_errors
def show(run_id, tz, as_json):
    """Show one workflow run: its status and each step's status, timing and why it is there.

    \b
    Examples:
      flask workflow show 41
      flask workflow show 41 --json | jq '.steps[] | {name, status, explain}'
    """
    tz = check_tz(tz)
    run = workflow_service.get_run(run_id)
    view = workflow_read.run_view(run, workflow_service.step_executions(run))
    if as_json:
        emit_json(view)
        return
    print_fields(
        [
            ("workflow run", view["id"]),
            ("job", f"{view['job_id']} {view['job']!r}"),
            ("status", view["status"]),
            ("trigger", view["trigger"]),
            ("scheduled for", _when(view["scheduled_for"], tz)),
            ("started", _when(view["started_at"], tz)),
            ("finished", _when(view["finished_at"], tz)),
            (
                "retry of",
                f"run {view['retry_of']}" + (f" from {view['retry_from']}" if view["retry_from"] else "")
                if view["retry_of"]
                else None,
            ),
            ("cancelled by", view["cancel_requested_by"]),
            ("error", view["error"] or None),
        ]
    )
    click.echo()
    print_table(
        ["STEP", "TASK", "AFTER", "STATUS", "EXECUTION", "ATTEMPTS", "DURATION", "WHY"],
        [
            [
                step["name"],
                step["task"],
                ",".join(step["after"]) or "-",
                step["status"],
                step["execution_id"] or "",
                step["attempts"] or "",
                fmt_duration(step["duration_ms"] / 1000 if step["duration_ms"] is not None else None) or "",
                step["explain"],
            ]
            for step in view["steps"]
        ],
    )


@workflow_cli.command("retry")
@click.argument("run_id", type=RUN_ID)
@click.option("--from", "from_step", metavar="STEP", help="Also run this step (and everything after it) again.")
@json_option
@mutating
@handle_errors
def retry(run_id, from_step, as_json):
    """Resume a failed or cancelled workflow run as a new run.

    \b
    Every step that did not succeed runs again; with --from, that step and every step downstream
    of it too. The steps that succeeded are taken over with their results, not run again.
    \b
    Examples:
      flask workflow retry 41
      flask workflow retry 41 --from report
    """
    run = workflow_service.retry_run(run_id, now=utcnow(), actor=ACTOR, from_step=from_step)
    if as_json:
        emit_json(workflow_read.run_view(run, workflow_service.step_executions(run)))
        return
    kept = sorted(run.state)
    click.echo(
        f"Workflow run {run.id} resumes run {run_id}"
        + (f" from step {from_step}" if from_step else "")
        + (f"; taken over: {', '.join(kept)}" if kept else "")
    )
    click.echo(f"Follow it with: flask workflow show {run.id}")


@workflow_cli.command("cancel")
@click.argument("run_id", type=RUN_ID)
@click.option("--reason", metavar="TEXT", help="Why (kept in the audit log and the event).")
@json_option
@mutating
@handle_errors
def cancel(run_id, reason, as_json):
    """Cancel a running workflow run: steps not started never run, running ones are stopped.

    \b
    Example:
      flask workflow cancel 41 --reason "wrong input file"
    """
    run = workflow_service.cancel_run(run_id, now=utcnow(), actor=ACTOR, reason=reason)
    if as_json:
        emit_json(workflow_read.run_view(run, workflow_service.step_executions(run)))
        return
    click.echo(f"Workflow run {run.id} is {run.anchor.status}")
