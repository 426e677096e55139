"""`flask job set-notify` and `flask project set-notify`: what a job (or a project's jobs)
notify about, and to which channels.

Events: failure, dead_letter, overdue, recovery, success (or none). Channels by name, within the
job's project. A job's setting overrides its project's default; `--follow-project` drops it.
Without --on (or --follow-project) each command prints the routing in effect.
"""

from __future__ import annotations

import click

from app.clock import utcnow
from app.domain.notify_routing import DEFAULT_EVENTS, EVENTS
from app.services.use_cases import notify_routes
from cli.common import ACTOR, JOB_ID, emit_json, handle_errors, json_option, mutating
from cli.org import project_option

EVENTS_HELP = f"Comma-separated events to notify: {', '.join(EVENTS)}; or none."


def _on_option(func):
    return click.option("--on", "events", metavar="EVENT,...", help=EVENTS_HELP)(func)


def _to_option(func):
    return click.option(
        "--to",
        "channels",
        metavar="CHANNEL",
        multiple=True,
        help="A channel to notify, by name (repeat, or comma-separate, for several). "
        "Default: every channel of the project (for a job: its project's choice).",
    )(func)


def _channels(values: tuple[str, ...]) -> list[str] | None:
    names = [n.strip() for value in values for n in value.split(",") if n.strip()]
    return names or None


def _describe(route: dict) -> str:
    events = ", ".join(route["events"]) or "nothing"
    channels = "every channel" if route["channels"] is None else (", ".join(route["channels"]) or "no channel")
    return f"{events} -> {channels}"


@click.command("set-notify")
@click.argument("job_id", type=JOB_ID)
@_on_option
@_to_option
@click.option("--follow-project", is_flag=True, help="Drop this job's setting: it notifies as its project does.")
@json_option
@mutating
@handle_errors
def job_set_notify(job_id, events, channels, follow_project, as_json):
    """Choose what job JOB_ID notifies, and where, over its project's default.

    \b
    Examples:
      flask job set-notify 12 --on failure,recovery --to ops-slack
      flask job set-notify 12 --on failure,dead_letter,overdue,recovery,success --to oncall --to ops-slack
      flask job set-notify 12 --on none
      flask job set-notify 12 --follow-project
      flask job set-notify 12            (prints what it notifies now)
    """
    if follow_project and (events is not None or channels):
        raise click.UsageError("--follow-project drops the job's setting: give it without --on or --to")
    if channels and events is None:
        raise click.UsageError("--to needs --on: say which events go to those channels")
    if follow_project:
        shown = notify_routes.set_job_routing(job_id, None, now=utcnow(), actor=ACTOR)
    elif events is not None:
        data = {"events": events, "channels": _channels(channels)}
        shown = notify_routes.set_job_routing(job_id, data, now=utcnow(), actor=ACTOR)
    else:
        shown = notify_routes.job_routing(job_id)
    if as_json:
        emit_json(shown)
        return
    origin = "its own setting" if shown["override"] is not None else "its project's default"
    click.echo(f"Job {shown['job']!r} (#{shown['job_id']}) notifies {_describe(shown['effective'])} ({origin})")


@click.command("set-notify")
@project_option
@_on_option
@_to_option
@json_option
@mutating
@handle_errors
def project_set_notify(project_name, events, channels, as_json):
    """Choose what the project's jobs notify, and where (a job's own setting overrides it).

    A project nobody has set notifies {defaults} to every channel.

    \b
    Examples:
      flask project set-notify --project acme/web --on failure,dead_letter,overdue,recovery --to ops-slack
      flask project set-notify --on dead_letter,recovery
      flask project set-notify --project acme/web     (prints what it notifies now)
    """
    if channels and events is None:
        raise click.UsageError("--to needs --on: say which events go to those channels")
    if events is not None:
        data = {"events": events, "channels": _channels(channels)}
        shown = notify_routes.set_project_routing(data, now=utcnow(), actor=ACTOR, project=project_name)
    else:
        shown = notify_routes.project_routing(project_name)
    if as_json:
        emit_json(shown)
        return
    click.echo(f"Project {shown['project']} notifies {_describe(shown)} ({shown['source']})")


project_set_notify.help = (project_set_notify.help or "").replace("{defaults}", ", ".join(DEFAULT_EVENTS))
