"""`flask alerts ...`: open alerts and dead letters, and resolving alerts."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.clock import utcnow
from app.services.serialize import alert_to_dict, dead_letter_to_dict
from app.services.use_cases import alerts as alert_service
from cli.common import ACTOR, ALERT_ID, emit_json, fmt_utc, handle_errors, json_option, mutating, print_table

alerts_cli = AppGroup("alerts", help="List and resolve alerts; list dead letters.")


@alerts_cli.command("list")
@click.option("--all", "include_resolved", is_flag=True, help="Include resolved alerts.")
@json_option
@handle_errors
def list_alerts(include_resolved, as_json):
    """List open alerts (all with --all) and the dead letters.

    \b
    Example:
      flask alerts list
      flask alerts list --all --json | jq '.alerts | length'
    """
    alerts = alert_service.list_alerts(include_resolved=include_resolved)
    dead_letters = alert_service.list_dead_letters()
    if as_json:
        emit_json(
            {
                "alerts": [alert_to_dict(a) for a in alerts],
                "dead_letters": [dead_letter_to_dict(d) for d in dead_letters],
            }
        )
        return
    click.echo("Alerts:" if include_resolved else "Open alerts:")
    print_table(
        ["ID", "CREATED (UTC)", "KIND", "JOB", "EXECUTION", "MESSAGE", "RESOLVED"],
        [
            [
                a.id,
                fmt_utc(a.created_at),
                a.kind,
                f"{a.job_id} {a.job.name}" if a.job else a.job_id,
                a.execution_id,
                a.message,
                f"{fmt_utc(a.resolved_at)} by {a.resolved_by}" if a.resolved_at else None,
            ]
            for a in alerts
        ],
        empty="  (none)",
    )
    click.echo()
    click.echo("Dead letters:")
    print_table(
        ["ID", "CREATED (UTC)", "JOB", "EXECUTION", "REASON"],
        [
            [d.id, fmt_utc(d.created_at), f"{d.job_id} {d.job.name}" if d.job else d.job_id, d.execution_id, d.reason]
            for d in dead_letters
        ],
        empty="  (none)",
    )


@alerts_cli.command("resolve")
@click.argument("alert_ids", metavar="ALERT_ID...", nargs=-1, required=True, type=ALERT_ID)
@mutating
@handle_errors
def resolve(alert_ids):
    """Resolve one or more alerts. Unknown ids are refused and nothing is resolved.

    \b
    Example:
      flask alerts resolve 4
      flask alerts resolve 4 5 9
    """
    ids = sorted(set(alert_ids))
    changed = alert_service.resolve_alerts(ids, now=utcnow(), actor=ACTOR)
    already = len(ids) - changed
    click.echo(f"Resolved {changed} alert(s)" + (f"; {already} already resolved" if already else ""))
