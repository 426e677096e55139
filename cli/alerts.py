"""`flask alerts ...`: open alerts and dead letters, and resolving alerts."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup

from app.clock import utcnow
from app.extensions import db
from app.models import AlertChannel
from app.models.alerting import ALERT_KINDS
from app.services.engine.deliveries import DeliveryLoop
from app.services.serialize import alert_to_dict, dead_letter_to_dict
from app.services.use_cases import alert_channels as channel_service
from app.services.use_cases import alerts as alert_service
from cli.common import (
    ACTOR,
    ALERT_ID,
    IdType,
    emit_json,
    fmt_instant,
    handle_errors,
    json_option,
    mutating,
    print_table,
    tz_option,
)

CHANNEL_ID = IdType("alert channel", AlertChannel)

alerts_cli = AppGroup("alerts", help="List and resolve alerts; list dead letters.")


@alerts_cli.command("list")
@click.option("--all", "include_resolved", is_flag=True, help="Include resolved alerts.")
@tz_option
@json_option
@handle_errors
def list_alerts(include_resolved, tz, as_json):
    """List open alerts (all with --all) and the dead letters.

    \b
    Example:
      flask alerts list
      flask alerts list --all --json | jq '.alerts | length'
      flask alerts list --tz Europe/Paris
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
        ["ID", f"CREATED ({tz or 'UTC'})", "KIND", "JOB", "EXECUTION", "MESSAGE", "RESOLVED"],
        [
            [
                a.id,
                fmt_instant(a.created_at, tz),
                a.kind,
                f"{a.job_id} {a.job.name}" if a.job else a.job_id,
                a.execution_id,
                a.message,
                f"{fmt_instant(a.resolved_at, tz)} by {a.resolved_by}" if a.resolved_at else None,
            ]
            for a in alerts
        ],
        empty="  (none)",
    )
    click.echo()
    click.echo("Dead letters:")
    print_table(
        ["ID", f"CREATED ({tz or 'UTC'})", "JOB", "EXECUTION", "REASON"],
        [
            [
                d.id,
                fmt_instant(d.created_at, tz),
                f"{d.job_id} {d.job.name}" if d.job else d.job_id,
                d.execution_id,
                d.reason,
            ]
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


# --- channels and delivery (docs/insight.md) ------------------------------------------------

channel_cli = click.Group("channel", help="Alert channels: signed webhooks and email, routed per project and kind.")
alerts_cli.add_command(channel_cli)


@channel_cli.command("add")
@click.argument("name")
@click.option("--webhook", metavar="URL", help="POST alerts as signed JSON to this http(s) URL.")
@click.option("--email", metavar="ADDRESS", help="Mail alerts to this address (SMTP_HOST, SMTP_PORT, SMTP_FROM).")
@click.option("--kinds", metavar="KIND,...", help=f"Only these alert kinds (default all): {', '.join(ALERT_KINDS)}.")
@click.option("--secret", metavar="S", help="The webhook's signing secret (default: a generated one, shown once).")
@click.option("--project", metavar="ORG/PROJECT", help="The project whose alerts it receives (default: default).")
@json_option
@mutating
@handle_errors
def add_channel(name, webhook, email, kinds, secret, project, as_json):
    """Create an alert channel (give exactly one of --webhook or --email).

    \b
    Examples:
      flask alerts channel add ops --webhook https://hooks.example.com/cronwell --kinds overdue,dead_letter
      flask alerts channel add oncall --email oncall@example.com
    """
    if (webhook is None) == (email is None):
        raise click.UsageError("give exactly one of --webhook URL or --email ADDRESS")
    data = {
        "name": name,
        "kind": "webhook" if webhook else "email",
        "target": webhook or email,
        "kinds": kinds or "",
        "secret": secret,
    }
    channel = channel_service.add_channel(data, now=utcnow(), actor=ACTOR, project=project)
    if as_json:
        emit_json(channel_service.channel_to_dict(channel, show_secret=True))
        return
    click.echo(f"Created alert channel {channel.id} {channel.name!r} ({channel.kind} {channel.target})")
    if channel.kind == "webhook":
        click.echo(f"Signing secret (shown once): {channel.secret}")


@channel_cli.command("list")
@json_option
@handle_errors
def list_channels(as_json):
    """List alert channels and their routing.

    \b
    Examples:
      flask alerts channel list
      flask alerts channel list --json
    """
    channels = channel_service.list_channels()
    if as_json:
        emit_json([channel_service.channel_to_dict(c) for c in channels])
    else:
        print_table(
            ["ID", "NAME", "KIND", "TARGET", "KINDS", "ENABLED"],
            [[c.id, c.name, c.kind, c.shown_target, ",".join(c.kinds or []) or "all", c.enabled] for c in channels],
            empty="No alert channels. Add one with `flask alerts channel add`.",
        )
    problem = channel_service.unreadable_summary(channels)  # listed as "(unreadable)"; exit 1
    if problem:
        raise click.ClickException(problem)


@channel_cli.command("delete")
@click.argument("channel_id", type=CHANNEL_ID)
@click.option("--yes", is_flag=True, help="Confirm: the channel and its delivery log are deleted.")
@mutating
@handle_errors
def delete_channel(channel_id, yes):
    """Delete an alert channel (needs --yes).

    \b
    Example:
      flask alerts channel delete 2
    """
    channel = channel_service.get_channel(channel_id)
    if not yes:
        raise click.ClickException(f"alert channel {channel.id} ({channel.name!r}) would be deleted; add --yes")
    channel_service.delete_channel(channel_id, now=utcnow(), actor=ACTOR)
    click.echo(f"Deleted alert channel {channel_id}")


@channel_cli.command("test")
@click.argument("channel_id", type=CHANNEL_ID)
@json_option
@mutating
@handle_errors
def test_channel(channel_id, as_json):
    """Queue a test message to a channel (sent by the delivery loop within a second or two).

    \b
    Example:
      flask alerts channel test 2
    """
    delivery = channel_service.send_test(channel_id, now=utcnow(), actor=ACTOR)
    if as_json:
        emit_json(channel_service.delivery_to_dict(delivery))
        return
    click.echo(f"Queued test delivery {delivery.id}; see it with: flask alerts deliveries --channel {channel_id}")


@alerts_cli.command("deliveries")
@click.option("--channel", "channel_id", type=CHANNEL_ID, help="Only this channel's deliveries.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@tz_option
@json_option
@handle_errors
def deliveries(channel_id, limit, tz, as_json):
    """The delivery log: each alert or notice sent to each channel (`failure x20`: one message for
    twenty grouped notices), with tries, status and last error.

    \b
    Examples:
      flask alerts deliveries
      flask alerts deliveries --json
    """
    rows = channel_service.delivery_log(channel_id=channel_id, limit=limit)
    if as_json:
        emit_json([channel_service.delivery_to_dict(d) for d in rows])
        return
    print_table(
        ["ID", "CHANNEL", "ALERT", "KIND", "STATUS", "TRIES", "HTTP", "LAST ERROR", f"CREATED ({tz or 'UTC'})"],
        [
            [
                d.id,
                d.channel_id,
                d.alert_id,
                d.kind if (d.grouped or 1) == 1 else f"{d.kind} x{d.grouped}",
                d.status,
                d.attempts,
                d.response_status,
                d.last_error,
                fmt_instant(d.created_at, tz),
            ]
            for d in rows
        ],
        empty="(no deliveries)",
    )


@alerts_cli.command("deliver")
@click.option("--once", is_flag=True, help="One pass, then exit (default: loop until interrupted).")
@handle_errors
def deliver(once):
    """Send pending alert deliveries (the scheduler process does this in a thread; this runs it alone).

    \b
    Example:
      flask alerts deliver
    """
    loop = DeliveryLoop(db.engine, current_app.config)
    if once:
        counts = loop.run_once()
        click.echo(" ".join(f"{key}={value}" for key, value in counts.items()))
        return
    stop = {"now": False}

    def should_stop():
        return stop["now"]

    try:
        loop.run_forever(should_stop)
    except KeyboardInterrupt:
        stop["now"] = True
