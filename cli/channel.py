"""`flask channel ...`: notification channels by name (webhook, Slack, Teams, email).

The same channels as `flask alerts channel` (which names them by id), for people who think in
names: add, list, set (grouping and quiet window), remove, and test, which sends at once and
prints the delivery's result.
"""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup

from app.clock import utcnow
from app.extensions import db
from app.models import AlertDelivery
from app.models.alerting import CHANNEL_KINDS, RECEIVABLE_KINDS, URL_CHANNEL_KINDS
from app.services.engine import deliveries
from app.services.use_cases import alert_channels as channel_service
from cli.common import ACTOR, emit_json, handle_errors, json_option, mutating, print_table

channel_cli = AppGroup("channel", help="Notification channels: webhook, slack, teams and email, per project.")
GROUP_OPTION = click.option(
    "--group-minutes",
    type=int,
    metavar="N",
    help="One message per job and event per N minutes, counting the rest (default 10; 0: every one).",
)
QUIET_OPTION = click.option(
    "--quiet", metavar="HH:MM-HH:MM", help="Hold messages in this daily window, sent when it ends (off: none)."
)
QUIET_ZONE_OPTION = click.option(
    "--quiet-timezone", metavar="ZONE", help="The quiet window's time zone, e.g. Europe/Paris (default UTC)."
)
PROJECT_OPTION = click.option(
    "--project", metavar="ORG/PROJECT", help="The channel's project (default: the default project)."
)


@channel_cli.command("add")
@click.argument("name")
@click.option(
    "--kind", type=click.Choice(CHANNEL_KINDS), help="The channel kind (default: email with --email, else webhook)."
)
@click.option(
    "--url", metavar="URL", help="The webhook, Slack or Teams incoming-webhook URL (a secret: shown masked later)."
)
@click.option("--email", metavar="ADDRESS", help="The address email channels send to.")
@click.option("--kinds", metavar="KIND,...", help=f"Only these kinds (default all): {', '.join(RECEIVABLE_KINDS)}.")
@click.option("--secret", metavar="S", help="A webhook's signing secret (default: a generated one, shown once).")
@GROUP_OPTION
@QUIET_OPTION
@QUIET_ZONE_OPTION
@PROJECT_OPTION
@json_option
@mutating
@handle_errors
def add_channel(name, kind, url, email, kinds, secret, group_minutes, quiet, quiet_timezone, project, as_json):
    """Create a channel called NAME.

    \b
    Examples:
      flask channel add ops-slack --kind slack --url https://hooks.slack.com/services/T0/B0/XXXX
      flask channel add ops-teams --kind teams --url https://example.webhook.office.com/webhookb2/...
      flask channel add oncall --email oncall@example.com --kinds dead_letter,overdue
      flask channel add night-desk --email desk@example.com --quiet 22:00-07:00 --quiet-timezone Europe/Paris
    """
    kind = kind or ("email" if email else "webhook")
    target = email if kind == "email" else url
    if not target or (url and email):
        wanted = "--email ADDRESS" if kind == "email" else "--url URL"
        raise click.UsageError(f"a {kind} channel needs {wanted} (and only that)")
    data = {
        "name": name,
        "kind": kind,
        "target": target,
        "kinds": kinds or "",
        "secret": secret,
        "group_minutes": group_minutes,
        "quiet": quiet,
        "quiet_timezone": quiet_timezone,
    }
    channel = channel_service.add_channel(data, now=utcnow(), actor=ACTOR, project=project)
    if as_json:
        emit_json(channel_service.channel_to_dict(channel, show_secret=True))
        return
    click.echo(f"Created {channel.kind} channel {channel.name!r} ({channel.shown_target})")
    if channel.kind in URL_CHANNEL_KINDS:
        click.echo("The URL is a secret: from now on it is shown masked.")
    if channel.kind == "webhook":
        click.echo(f"Signing secret (shown once): {channel.secret}")


@channel_cli.command("list")
@json_option
@handle_errors
def list_channels(as_json):
    """List channels (URLs masked) and the alert kinds each receives.

    A channel whose stored URL or secret cannot be decrypted is listed with "(unreadable)"; the
    command then says which on stderr, with what to do, and exits 1.

    \b
    Example:
      flask channel list --json
    """
    channels = channel_service.list_channels()
    if as_json:
        emit_json([channel_service.channel_to_dict(c) for c in channels])
    else:
        _print_channels(channels)
    problem = channel_service.unreadable_summary(channels)
    if problem:
        raise click.ClickException(problem)


def _print_channels(channels) -> None:
    print_table(
        ["NAME", "KIND", "TARGET", "KINDS", "GROUP", "QUIET", "ENABLED", "PROJECT"],
        [
            [
                c.name,
                c.kind,
                c.shown_target,
                ",".join(c.kinds or []) or "all",
                f"{(c.group_seconds or 0) // 60}m",
                _quiet(c),
                c.enabled,
                c.project_id,
            ]
            for c in channels
        ],
        empty="No channels. Add one with `flask channel add`.",
    )


def _quiet(channel) -> str:
    if not channel.quiet_start:
        return "-"
    return f"{channel.quiet_start}-{channel.quiet_end} {channel.quiet_timezone or 'UTC'}"


@channel_cli.command("set")
@click.argument("name")
@GROUP_OPTION
@QUIET_OPTION
@QUIET_ZONE_OPTION
@PROJECT_OPTION
@json_option
@mutating
@handle_errors
def set_channel(name, group_minutes, quiet, quiet_timezone, project, as_json):
    """Change the grouping or the quiet window of the channel called NAME.

    \b
    Examples:
      flask channel set ops-slack --group-minutes 30
      flask channel set ops-slack --quiet 22:00-07:00 --quiet-timezone America/New_York
      flask channel set ops-slack --quiet off
    """
    if group_minutes is None and quiet is None and quiet_timezone is None:
        raise click.UsageError("say what to change: --group-minutes, --quiet or --quiet-timezone")
    channel = channel_service.find_channel(name, project)
    data = {"group_minutes": group_minutes, "quiet": quiet, "quiet_timezone": quiet_timezone}
    channel = channel_service.update_channel(channel.id, data, now=utcnow(), actor=ACTOR)
    if as_json:
        emit_json(channel_service.channel_to_dict(channel))
        return
    click.echo(
        f"Channel {channel.name!r}: one message per job and event per {(channel.group_seconds or 0) // 60} min, quiet {_quiet(channel)}"
    )


@channel_cli.command("remove")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Confirm: the channel and its delivery log are deleted.")
@PROJECT_OPTION
@mutating
@handle_errors
def remove_channel(name, yes, project):
    """Delete the channel called NAME (needs --yes).

    \b
    Example:
      flask channel remove ops-slack --yes
    """
    channel = channel_service.find_channel(name, project)
    if not yes:
        raise click.ClickException(f"channel {channel.name!r} would be deleted with its delivery log; add --yes")
    channel_service.delete_channel(channel.id, now=utcnow(), actor=ACTOR)
    click.echo(f"Removed channel {name!r}")


@channel_cli.command("reseal")
@mutating
@handle_errors
def reseal_channels():
    """Encrypt every channel's URL, address and secret again with the first CHANNEL_SECRET_KEY.

    To rotate the key: set CHANNEL_SECRET_KEY=NEW,OLD everywhere, run this, then drop OLD. A
    channel that no listed key opens is left as stored, named on stderr, and the command exits 1.

    \b
    Example:
      flask channel reseal
    """
    result = channel_service.reseal_channels(now=utcnow(), actor=ACTOR)
    click.echo(f"Resealed {result.count} channel(s) with the first CHANNEL_SECRET_KEY")
    if result.unreadable:
        names = ", ".join(map(repr, result.unreadable))
        raise click.ClickException(
            f"left as stored, no listed key opens them: {names}; add their old key after the first and run "
            "this again, or set their URL (or secret) again"
        )


@channel_cli.command("test")
@click.argument("name")
@PROJECT_OPTION
@json_option
@mutating
@handle_errors
def test_channel(name, project, as_json):
    """Send a test message to the channel called NAME now and show the result.

    A failed test stays in the delivery log and is retried like any delivery; the command exits 1.
    A channel whose stored URL or secret cannot be decrypted fails its test at once, saying so.

    \b
    Example:
      flask channel test ops-slack
    """
    channel = channel_service.find_channel(name, project)
    now = utcnow()
    delivery = channel_service.send_test(channel.id, now=now, actor=ACTOR)
    deliveries.send_now(db.engine, delivery.id, now=now, settings=current_app.config)
    db.session.rollback()  # end the session's read snapshot: the send was recorded on another connection
    sent = db.session.get(AlertDelivery, delivery.id)
    if as_json:
        emit_json(channel_service.delivery_to_dict(sent))
    elif sent.status == "delivered":
        click.echo(f"Delivered the test message to {channel.name!r} (status {sent.response_status})")
    if sent.status != "delivered":
        reason = sent.last_error or f"status {sent.response_status}"
        raise click.ClickException(f"the test message to {channel.name!r} was not delivered: {reason} ({sent.status})")
