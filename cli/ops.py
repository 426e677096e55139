"""Top-level operations commands: `flask health`, `flask prune-history`, `flask ensure-dev-user`."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext

from app.clock import utcnow
from app.services.engine.retention import prune_history
from app.services.read.status import status_report
from app.services.use_cases.users import ensure_dev_user
from cli.common import (
    ACTOR,
    check_cli_secret,
    emit_json,
    fmt_age,
    handle_errors,
    json_option,
    mutating,
    print_fields,
    print_table,
    warn,
)


@click.command("health")
@json_option
@with_appcontext
@handle_errors
def health_cli(as_json):
    """Readiness, scheduler and worker heartbeats, queue depth and execution counts.

    Each process has a status (alive | stopped | lost, the words of `flask worker list`) and a
    state (running | draining | stopped | stale); only alive, running workers count as serving.
    Exits 0 when ready, 1 when not (the same checks as /readyz, which answers 503); the report
    is still printed.

    \b
    Example:
      flask health
      flask health --json | jq .queue.depth
    """
    report = status_report(utcnow())
    if as_json:
        emit_json(report)
    else:
        _print_report(report)
    if not report["readiness"]["ready"]:
        failing = [
            f"{name} ({check.get('error', 'failed')})"
            for name, check in report["readiness"]["checks"].items()
            if not check["ok"]
        ]
        raise click.ClickException("not ready: " + ", ".join(failing))


def _print_report(report: dict) -> None:
    readiness = report["readiness"]
    click.echo(f"Ready: {'yes' if readiness['ready'] else 'NO'}")
    for name, check in readiness["checks"].items():
        click.echo(f"  {name}: {'ok' if check['ok'] else 'FAILED: ' + check.get('error', '')}")
    for title, rows in (("Schedulers", report["schedulers"]), ("Workers", report["workers"])):
        click.echo()
        click.echo(f"{title}:")
        print_table(
            ["ID", "HOST", "PID", "STARTED (UTC)", "LAST SEEN (UTC)", "AGE", "STATUS", "STATE"],
            [
                [
                    p["id"],
                    p["host"],
                    p["pid"],
                    p["started_at"],
                    p["last_seen"],
                    fmt_age(p["age_seconds"]),
                    p["status"],
                    p["state"] + (f" (no heartbeat for > {report['heartbeat_stale_seconds']}s)" if p["stale"] else ""),
                ]
                for p in rows
            ],
            empty="  (none seen)",
        )
    click.echo()
    click.echo(f"Serving workers: {report['serving_workers']} of {len(report['workers'])} (alive and not draining)")
    queue = report["queue"]
    click.echo()
    print_fields(
        [
            (
                "Queue depth",
                f"{queue['depth']} due now, {queue['retries_waiting']} retries waiting, {queue['in_flight']} in flight",
            ),
            (
                "Oldest pending",
                f"{queue['oldest_pending_at']} ({fmt_age(queue['oldest_pending_age_seconds'])} ago)"
                if queue["oldest_pending_at"]
                else "none",
            ),
            ("Jobs", f"{report['jobs']['total']} ({report['jobs']['enabled']} enabled)"),
            ("Open alerts", report["open_alerts"]),
            ("Dead letters", report["dead_letters"]),
            ("Executions", ", ".join(f"{status} {count}" for status, count in report["executions_by_status"].items())),
        ]
    )


@click.command("prune-history")
@click.option("--dry-run", is_flag=True, help="Only report what would be deleted (needs no secret).")
@click.option(
    "--cli-secret",
    "cli_secret",
    metavar="S",
    default=None,
    help="Shared secret; required (except with --dry-run) when SCHEDULER_CLI_SECRET is set.",
)
@json_option
@with_appcontext
@handle_errors
def prune_history_cli(dry_run, cli_secret, as_json):
    """Apply each job's retention (retention_count executions, retention_days of age).

    In-flight, queued and dead-lettered executions are never removed. Audit events older than
    AUDIT_RETENTION_DAYS and web sessions older than SESSION_MAX_AGE_HOURS go too; --dry-run
    counts all three.

    \b
    Example:
      flask prune-history --dry-run
      flask prune-history
    """
    if not dry_run:
        check_cli_secret(cli_secret)
    result = prune_history(now=utcnow(), dry_run=dry_run, actor=ACTOR)
    if as_json:
        emit_json(result)
        return
    verb = "would delete" if dry_run else "deleted"
    click.echo(
        f"Retention {verb} {result['deleted']} execution(s)" + (" (dry run, nothing deleted)" if dry_run else "")
    )
    if result["by_job"]:
        print_table(["JOB", "EXECUTIONS"], list(result["by_job"].items()))
    click.echo(
        f"Retention {verb} {result['events_deleted']} event(s) (a job's past its retention_days, others past EVENT_RETENTION_DAYS)"
    )
    click.echo(
        f"Retention {verb} {result['audit_deleted']} audit event(s) older than AUDIT_RETENTION_DAYS and "
        f"{result['sessions_deleted']} web session(s) older than SESSION_MAX_AGE_HOURS"
    )
    if result.get("more"):
        click.echo("Stopped at the time limit with more history to prune: run it again (the scheduler goes on hourly).")


@click.command("ensure-dev-user")
@with_appcontext
@mutating
@handle_errors
def ensure_dev_user_cli():
    """Create the admin account (DEV_ADMIN_USERNAME, default admin) unless it exists.

    The password is DEV_ADMIN_PASSWORD; without it the default `admin` is used, which is refused
    when DEBUG=0.

    \b
    Example:
      DEV_ADMIN_PASSWORD='long random words' flask ensure-dev-user
    """
    config = current_app.config
    result = ensure_dev_user(
        username=config["DEV_ADMIN_USERNAME"],
        password=config["DEV_ADMIN_PASSWORD"],
        debug=bool(config.get("CRONWELL_DEBUG", config["DEBUG"])),
        now=utcnow(),
        actor=ACTOR,
    )
    for message in result.warnings:
        warn(message)
    if result.created:
        click.echo(f"Created admin user {result.user.username!r}")
