"""`flask event list`: read the event log (what the scheduler, the workers and operators did)."""

from __future__ import annotations

import json

import click
from flask.cli import AppGroup

from app.domain.event_kinds import EVENT_KINDS
from app.models import Event
from app.models.ids import key_max
from app.services import audit_trail
from app.services.read import events as event_log
from cli.common import JOB_ID, emit_json, fmt_instant, handle_errors, json_option, print_table, tz_option

event_cli = AppGroup("event", help="Read the event log: misfires, overlap skips, recovered leases, changes.")

PAYLOAD_WIDTH = 70


@event_cli.command("list")
@click.option("--kind", metavar="K", help="Only events of this kind (misfire_coalesced, overlap_skipped, ...).")
@click.option("--job", "job_id", type=JOB_ID, metavar="ID", help="Only events of this job.")
@click.option("--worker", metavar="ID", help="Only events naming this worker (lease recovery, cancels).")
@click.option("--since", metavar="ISO", help="Only events at or after this instant (UTC unless it says).")
@click.option("--until", metavar="ISO", help="Only events before this instant.")
@click.option(
    "--before",
    "cursor",
    type=click.IntRange(1, key_max(Event)),
    metavar="ID",
    help="Only events older than event ID (paging).",
)
@click.option("--limit", type=click.IntRange(1, event_log.PAGE_MAX), default=event_log.PAGE_DEFAULT, show_default=True)
@tz_option
@json_option
@handle_errors
def list_events(kind, job_id, worker, since, until, cursor, limit, tz, as_json):
    """List events, newest first: when, the kind, the job, execution and worker it concerns, and
    its details. `--json` prints them as a list (instants as ISO 8601 UTC).

    \b
    Examples:
      flask event list --kind misfire_coalesced --since 2026-06-01
      flask event list --job 3 --limit 20 --json
      flask event list --tz Asia/Tokyo
    """
    if kind is not None and kind not in EVENT_KINDS:
        raise click.ClickException(f"unknown event kind {kind[:60]!r}; known kinds: {', '.join(sorted(EVENT_KINDS))}")
    filters = event_log.EventFilters(
        kind=kind,
        job_id=job_id,
        worker=worker[: event_log.WORKER_MAX] if worker else None,
        since=audit_trail.parse_instant(since, "--since") if since is not None else None,
        until=audit_trail.parse_instant(until, "--until") if until is not None else None,
    )
    page = event_log.event_page(filters, cursor=cursor, limit=limit)
    if as_json:
        emit_json([event_log.event_to_dict(event) for event in page.items])
        return
    print_table(
        ["ID", f"WHEN ({tz or 'UTC'})", "KIND", "JOB", "EXECUTION", "WORKER", "ACTOR", "DETAILS"],
        [
            [
                event.id,
                fmt_instant(event.created_at, tz),
                event.type,
                event.job_id or "-",
                event.execution_id or "-",
                event_log.worker_of(event) or "-",
                event.actor,
                _details(event.payload or {}),
            ]
            for event in page.items
        ],
        empty="No events match.",
    )
    if page.next_cursor is not None:
        click.echo(f"More: flask event list --before {page.next_cursor} (with the same filters)")


def _details(payload: dict) -> str:
    """`key=value` pairs on one line, cut to fit a terminal (--json has them whole)."""
    text = " ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in sorted(payload.items()))
    return text if len(text) <= PAYLOAD_WIDTH else text[: PAYLOAD_WIDTH - 3] + "..."
