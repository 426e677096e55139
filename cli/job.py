"""`flask job ...`: create, change, inspect, run and remove jobs."""

from __future__ import annotations

import textwrap

import click
from flask.cli import AppGroup

from app.clock import iso_z, utcnow
from app.definitions.backfill import MAX_BACKFILL, BackfillSchema
from app.domain.jitter import jitter_offset
from app.domain.states import OverlapPolicy, values
from app.scheduling import SCHEDULE_INPUTS
from app.scheduling.timezones import parse_instant, resolve_timezone
from app.services.read import explain as explain_read
from app.services.serialize import execution_to_dict, job_to_dict
from app.services.use_cases import backfill as backfill_service
from app.services.use_cases import jobs as job_service
from app.services.use_cases import runs as run_service
from app.tasks import all_tasks
from cli.common import (
    ACTOR,
    JOB_ID,
    emit_json,
    fmt_both,
    fmt_instant,
    fmt_local,
    fmt_utc,
    handle_errors,
    json_option,
    mutating,
    parse_after,
    print_table,
    tz_option,
    warn,
)
from cli.job_fields import job_arguments, job_data, job_options, schedule_given
from cli.job_files import COMMANDS as job_files_commands
from cli.notify import job_set_notify
from cli.org import cli_caller, project_option
from cli.workflow import echo_step_fates

job_cli = AppGroup("job", help="Create, change, inspect, run and remove jobs.")


def _echo_lint(job, now) -> None:
    """Schedule lint on stderr: warnings never change the exit code or the JSON on stdout."""
    for warning in job_service.lint_job(job, now=now):
        warn(warning.message)


def _echo_next_run(job) -> None:
    state = "" if job.enabled else " (disabled)"
    click.echo(f"Next run: {fmt_both(job.next_run_at, job.timezone) or 'none'}{state}")


_SUMMARY_PREFIX = {"interval": "every", "cron": "cron", "one_time": "once at"}


def schedule_summary(job) -> str:
    """A short schedule description for tables: `every 30s`, `cron 0 9 * * 1-5`, `once at ...`."""
    schedule_input = SCHEDULE_INPUTS[job.schedule_type]
    return f"{_SUMMARY_PREFIX[job.schedule_type]} {job.schedule.get(schedule_input.key)}"


@job_cli.command("add")
@job_arguments()
@job_options(edit=False)
@click.option("--disabled", is_flag=True, help="Create the job disabled (enable it later).")
@project_option
@json_option
@mutating
@handle_errors
def add_job(disabled, project_name, as_json, **options):
    """Create a job running TASK on a schedule.

    \b
    Examples:
      flask job add "Nightly report" generate_report cron --cron "0 2 * * *" --timezone Europe/Paris
      flask job add heartbeat always_succeed interval --every 30s --json
      flask job add once always_succeed one_time --run-at 2026-01-01T12:00:00Z
      flask job add nap sleep_for_seconds interval --schedule-value '{"every": "5m"}' --config '{"seconds": 2}'
      flask job add sync always_succeed interval --every 5m --project acme/web --queue default
    """
    data = {**job_data(options, schedule_type=options["schedule_type"]), "enabled": not disabled}
    now = utcnow()
    job = job_service.create_job(data, now=now, actor=ACTOR, caller=cli_caller(project_name))
    _echo_lint(job, now)
    if as_json:
        emit_json(job_to_dict(job))
        return
    click.echo(f"Created job {job.id} {job.name!r}: {job_service.schedule_of(job).describe()}")
    _echo_next_run(job)


@job_cli.command("edit")
@click.argument("job_id", type=JOB_ID)
@job_options(edit=True)
@click.option("--enabled", "enable", is_flag=True, help="Enable the job.")
@click.option("--disabled", "disable", is_flag=True, help="Disable the job (cancels its queued runs).")
@json_option
@mutating
@handle_errors
def edit_job(job_id, enable, disable, as_json, **options):
    """Change a job. Only the options given change; a new schedule or timezone recomputes the next run.

    \b
    Examples:
      flask job edit 3 --every 10m
      flask job edit 3 --schedule-type cron --cron "*/15 * * * *" --timezone America/New_York
      flask job edit 3 --task always_fail --config '{}' --disabled
    """
    if enable and disable:
        raise click.ClickException("--enabled and --disabled cannot be used together")
    job = job_service.get_job(job_id)
    schedule_type = (options["schedule_type"] or job.schedule_type) if schedule_given(options) else None
    data = job_data(options, schedule_type=schedule_type)
    if enable or disable:
        data["enabled"] = enable
    if not data:
        raise click.ClickException("nothing to change; give at least one option (see --help)")
    before = job_to_dict(job)
    now = utcnow()
    job = job_service.update_job(job_id, data, now=now, actor=ACTOR)
    _echo_lint(job, now)
    after = job_to_dict(job)
    if as_json:
        emit_json(after)
        return
    changed = [key for key in after if after[key] != before[key] and key != "updated_at"]
    click.echo(f"Updated job {job.id} {job.name!r}: " + (", ".join(changed) if changed else "nothing changed"))
    _echo_next_run(job)


@job_cli.command("list")
@project_option
@tz_option
@json_option
@handle_errors
def list_jobs(project_name, tz, as_json):
    """List every job with its schedule and next run (UTC, or --tz, and the job's local time).

    \b
    Example:
      flask job list
      flask job list --json | jq '.[] | select(.enabled) | .name'
      flask job list --tz Asia/Tokyo
    """
    jobs = job_service.list_jobs(cli_caller(project_name) if project_name else None)
    if as_json:
        emit_json([job_to_dict(job) for job in jobs])
        return
    print_table(
        ["ID", "NAME", "TASK", "SCHEDULE", "TIMEZONE", "ENABLED", f"NEXT RUN ({tz or 'UTC'})", "NEXT RUN (LOCAL)"],
        [
            [
                job.id,
                job.name,
                job.task,
                schedule_summary(job),
                job.timezone,
                job.enabled,
                fmt_instant(job.next_run_at, tz),
                fmt_local(job.next_run_at, job.timezone),
            ]
            for job in jobs
        ],
        empty="No jobs yet. Add one with `flask job add` (see `flask job add --help`).",
    )
    for job in jobs:
        if job.disabled_reason:  # why the system stopped it (a run limit reached, auto-pause)
            state = "disabled" if not job.enabled else "finishing its last runs"
            click.echo(f"Job {job.id} {job.name!r} {state}: {job.disabled_reason}")


@job_cli.command("catalog")
@json_option
@handle_errors
def catalog(as_json):
    """List the registered tasks a job can run, with their config keys.

    \b
    Example:
      flask job catalog
      flask job catalog --json | jq '.[] | .name'
    """
    tasks = all_tasks()
    if as_json:
        emit_json([{"name": t.name, "description": t.description, "schema": t.schema} for t in tasks])
        return
    for index, spec in enumerate(tasks):
        if index:
            click.echo()
        click.echo(spec.name)
        click.echo(textwrap.fill(spec.description, width=96, initial_indent="    ", subsequent_indent="    "))
        click.echo("    config: " + _describe_schema(spec.schema))


def _describe_schema(schema: dict) -> str:
    properties = schema.get("properties") or {}
    if not properties:
        return "none (use {})"
    required = set(schema.get("required") or ())
    parts = []
    for key, prop in properties.items():
        kind = prop.get("type", "any")
        extra = "required" if key in required else "optional"
        if "default" in prop:
            extra += f", default {prop['default']!r}"
        parts.append(f"{key} ({kind}, {extra})")
    return "; ".join(parts)


@job_cli.command("preview")
@click.argument("job_id", type=JOB_ID)
@click.option("--count", type=click.IntRange(1, 1000), default=10, show_default=True, help="How many fire times.")
@click.option("--after", metavar="ISO", help="Start instant (default now); no offset means the job's local time.")
@json_option
@handle_errors
def preview(job_id, count, after, as_json):
    """Show the next fire times of a job in UTC and its local time, with DST adjustments marked.

    \b
    Example:
      flask job preview 3 --count 5
      flask job preview 3 --after 2026-11-01T00:00 --json
    """
    job = job_service.get_job(job_id)
    now = utcnow()
    items = job_service.preview_job(job_id, after=parse_after(after, job.timezone, now), count=count)
    _echo_lint(job, now)
    offset = jitter_offset(job.id, job.jitter_seconds)
    if as_json:
        # With jitter, each fire also says when its run becomes available (the nominal time + offset).
        extra = (lambda item: {"available_at": iso_z(item.utc + offset)}) if job.jitter_seconds else (lambda item: {})
        emit_json([{**item.to_json(), **extra(item)} for item in items])
        return
    click.echo(
        f"Job {job.id} {job.name!r}: {job_service.schedule_of(job).describe()}" + ("" if job.enabled else " (disabled)")
    )
    if job.jitter_seconds:
        click.echo(
            f"Jitter: each run starts {offset.total_seconds():.3f}s after its time "
            f"(this job's fixed offset within its {job.jitter_seconds}s window)"
        )
    print_table(
        ["#", "UTC", f"LOCAL ({job.timezone})", "NOTE"],
        [[n, fmt_utc(i.utc), f"{i.local:%Y-%m-%d %H:%M:%S %Z}", i.note] for n, i in enumerate(items, 1)],
        empty="(no further runs)",
    )


@job_cli.command("trigger")
@click.argument("job_id", type=JOB_ID)
@click.option("--in", "run_in", metavar="DURATION", help="Run after this delay (30s, 5m, 2h, 1d) instead of now.")
@click.option("--at", "run_at", metavar="ISO", help="Run at this instant (ISO 8601; no offset means UTC).")
@click.option(
    "--config-override",
    metavar="JSON",
    help="A JSON object merged over the job's config for this run only (checked against the task's schema).",
)
@json_option
@mutating
@handle_errors
def trigger(job_id, run_in, run_at, config_override, as_json):
    """Run an enabled job outside its schedule (a `manual` execution): now, after a delay, or at an instant.

    \b
    A delayed run waits as `pending` with its available time in the future: `flask execution list`
    shows it, and `flask execution cancel ID` cancels it before it starts.
    \b
    Examples:
      flask job trigger 3
      flask job trigger 3 --in 10m
      flask job trigger 3 --at 2026-01-01T12:00:00Z --config-override '{"message": "new year"}'
      flask job trigger 3 --json | jq .id
    """
    now = utcnow()
    data = {"in": run_in, "at": run_at, "config_override": config_override}
    execution = run_service.trigger_run(job_id, data, now=now, actor=ACTOR)
    if as_json:
        emit_json({**execution_to_dict(execution), "deduplicated": execution.deduplicated})
        return
    if execution.deduplicated:
        click.echo(
            f"Deduplicated: job {execution.job_id} {execution.job.name!r} is unique and execution "
            f"{execution.id} is already {execution.status}; nothing new was queued"
        )
        return
    when = "" if execution.available_at <= now else f", scheduled for {fmt_utc(execution.available_at)}"
    click.echo(
        f"Triggered job {execution.job_id} {execution.job.name!r}: execution {execution.id} is {execution.status}{when}"
    )
    click.echo(f"Watch it with: flask execution inspect {execution.id}")


@job_cli.command("enable")
@click.argument("job_id", type=JOB_ID)
@json_option
@mutating
@handle_errors
def enable(job_id, as_json):
    """Enable a job; its schedule resumes from now (runs missed while disabled are not replayed).

    \b
    Example:
      flask job enable 3
    """
    was_enabled = job_service.get_job(job_id).enabled
    job = job_service.enable_job(job_id, now=utcnow(), actor=ACTOR)
    if as_json:
        emit_json(job_to_dict(job))
        return
    state = "was already enabled" if was_enabled else "enabled"
    click.echo(f"Job {job.id} {job.name!r} {state}; next run {fmt_both(job.next_run_at, job.timezone) or 'none'}")


@job_cli.command("disable")
@click.argument("job_id", type=JOB_ID)
@json_option
@mutating
@handle_errors
def disable(job_id, as_json):
    """Disable a job and cancel its queued runs (pending, retry_scheduled, claimed); running ones finish.

    \b
    Example:
      flask job disable 3
    """
    was_enabled = job_service.get_job(job_id).enabled
    job, cancelled = job_service.disable_job(job_id, now=utcnow(), actor=ACTOR)
    if as_json:
        emit_json({**job_to_dict(job), "cancelled_executions": cancelled})
        return
    if not was_enabled:
        click.echo(f"Job {job.id} {job.name!r} was already disabled")
        return
    click.echo(f"Job {job.id} {job.name!r} disabled; cancelled {cancelled} queued execution(s)")


@job_cli.command("delete")
@click.argument("job_id", type=JOB_ID)
@click.option("--yes", is_flag=True, help="Confirm: the job and all its history are deleted.")
@mutating
@handle_errors
def delete(job_id, yes):
    """Delete a job and all its executions, attempts and dead letters. Needs --yes.

    \b
    Example:
      flask job delete 3 --yes
    """
    job = job_service.get_job(job_id)
    if not yes:
        raise click.ClickException(
            f"job {job.id} ({job.name!r}) and all its history would be deleted; add --yes to confirm"
        )
    name = job.name
    job_service.delete_job(job_id, now=utcnow(), actor=ACTOR)
    click.echo(f"Deleted job {job_id} {name!r}")


def _instant_option(text: str | None, zone: str, what: str):
    """An ISO instant option; no offset means the job's local time."""
    if text is None:
        return None
    return parse_instant(text, resolve_timezone(zone), what)


@job_cli.command("explain")
@click.argument("job_id", type=JOB_ID)
@click.option("--at", "at_text", metavar="ISO", help="Explain the occurrence at this instant (or the nearest ones).")
@click.option("--from", "from_text", metavar="ISO", help="Start of a window to explain (with --to).")
@click.option("--to", "to_text", metavar="ISO", help="End of the window (inclusive).")
@json_option
@handle_errors
def explain(job_id, at_text, from_text, to_text, as_json):
    """Say what happened to a job's occurrences and why: fired, coalesced, skipped, missed, expired,
    cancelled, not created (job disabled), waiting (queue paused, no live worker), shifted by DST.

    Instants without an offset are the job's local time. For a workflow job, each run's steps
    follow its line (unless all succeeded): why each runs, waits (for which upstream steps, or in
    its queue, and why) or will not run (which upstream step failed).

    \b
    Examples:
      flask job explain 3 --at 2026-06-01T09:00:00Z
      flask job explain 3 --from 2026-06-01T00:00Z --to 2026-06-02T00:00Z --json
    """
    if (at_text is None) == (from_text is None and to_text is None) or (
        at_text is None and None in (from_text, to_text)
    ):
        raise click.UsageError("give either --at ISO, or --from ISO and --to ISO")
    job = job_service.get_job(job_id)
    document = explain_read.explain_job(
        job_id,
        now=utcnow(),
        at=_instant_option(at_text, job.timezone, "--at"),
        start=_instant_option(from_text, job.timezone, "--from"),
        end=_instant_option(to_text, job.timezone, "--to"),
    )
    if as_json:
        emit_json(document)
        return
    click.echo(f"Job {job.id} {job.name!r} ({job.timezone})" + ("" if job.enabled else " (disabled now)"))
    if "at" in document:
        if document["occurrence"] is not None:
            _echo_fates([document["occurrence"]])
            return
        click.echo(document["summary"])
        nearest = document["nearest"]
        _echo_fates([f for f in (nearest["before"], nearest["after"]) if f], labels=["before", "after"])
        return
    click.echo(f"Window {document['from']} .. {document['to']}: {len(document['occurrences'])} expected occurrence(s)")
    _echo_fates(document["occurrences"])
    if document["truncated"]:
        click.echo("(truncated: narrow the window to see the rest)")
    for run in document["other_runs"]:
        click.echo(f"Also in the window: execution #{run['execution_id']} ({run['trigger']}) {run['status']}")


def _echo_fates(fates: list[dict], labels: list[str] | None = None) -> None:
    for index, fate in enumerate(fates):
        label = f"{labels[index]}: " if labels else ""
        click.echo(f"{label}{fate['scheduled_for']}  {fate['fate']}")
        click.echo(textwrap.fill(fate["summary"], width=100, initial_indent="    ", subsequent_indent="    "))
        steps = fate["details"].get("steps") or []
        # A workflow run's steps, one line each, unless they all succeeded (the summary counts them).
        if any(step["status"] != "succeeded" for step in steps):
            echo_step_fates(steps, indent="      ")


_BACKFILL = BackfillSchema(now=None)  # the backfill definition: help texts, limits, choices


def _backfill_help(name: str) -> str:
    return str(_BACKFILL.fields[name].metadata["description"])


@job_cli.command("backfill")
@click.argument("job_id", type=JOB_ID)
@click.option("--from", "from_text", required=True, metavar="ISO", help=_backfill_help("start"))
@click.option("--to", "to_text", required=True, metavar="ISO", help=_backfill_help("end"))
@click.option("--dry-run", is_flag=True, help=_backfill_help("dry_run"))
@click.option("--max", "max_runs", type=click.IntRange(1, MAX_BACKFILL), metavar="N", help=_backfill_help("max_runs"))
@click.option("--overlap", type=click.Choice(values(OverlapPolicy)), help=_backfill_help("overlap"))
@json_option
@mutating
@handle_errors
def backfill(job_id, from_text, to_text, dry_run, max_runs, overlap, as_json):
    """Run a job's occurrences of a past window (trigger `backfill`), never duplicating one that
    already has an execution. Instants without an offset are the job's local time.

    \b
    Examples:
      flask job backfill 3 --from 2026-06-01T00:00Z --to 2026-06-02T00:00Z --dry-run
      flask job backfill 3 --from 2026-06-01T00:00Z --to 2026-06-02T00:00Z --max 10 --overlap queue
    """
    job = job_service.get_job(job_id)
    plan = backfill_service.backfill_from_input(
        job_id,
        {"from": from_text, "to": to_text, "max": max_runs, "overlap": overlap, "dry_run": dry_run},
        now=utcnow(),
        actor=ACTOR,
    )
    document = plan.to_json()
    if as_json:
        emit_json(document)
        return
    verb = "would create" if dry_run else "created"
    click.echo(
        f"Backfill of job {job.id} {job.name!r} {document['from']} .. {document['to']} (overlap {plan.overlap}): "
        f"{verb} {document['created']}, {document['existing']} already had an execution"
        + (" (capped by --max: run again for the rest)" if plan.capped else "")
    )
    print_table(
        ["OCCURRENCE (UTC)", "ACTION", "EXECUTION"],
        [[item["scheduled_for"], item["action"], item.get("execution_id")] for item in document["occurrences"]],
        empty="(no occurrence in the window)",
    )


# Jobs as code (cli/job_files.py): apply, export and schema belong to the same `job` group.
for _command in job_files_commands:
    job_cli.add_command(_command)

# What the job notifies, and where (cli/notify.py).
job_cli.add_command(job_set_notify)
