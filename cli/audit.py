"""`flask audit list`: read the audit log (who changed what). Nothing here, or anywhere, edits it."""

from __future__ import annotations

import json

import click
from flask.cli import AppGroup

from app.services import audit_trail
from app.services.use_cases import tenancy
from cli.common import JOB_ID, emit_json, fmt_instant, handle_errors, json_option, print_table, tz_option

audit_cli = AppGroup("audit", help="Read the audit log: every change, who made it, when and from where.")

CHANGES_WIDTH = 80


@audit_cli.command("list")
@click.option(
    "--since",
    metavar="ISO",
    help="Only changes at or after this instant (UTC unless it says).",
)
@click.option("--until", metavar="ISO", help="Only changes before this instant.")
@click.option("--actor", metavar="A", help="Only changes by this actor (web:alice, cli, api:bob, system).")
@click.option(
    "--job", "job_id", type=JOB_ID, metavar="ID", help="Only changes to this job and its executions (deleted jobs too)."
)
@click.option(
    "--kind",
    "object_kind",
    metavar="KIND",
    help="Only changes to objects of this kind (job, execution, queue, user, ...).",
)
@click.option("--object", "object_id", metavar="ID", help="Only changes to the object with this id (with --kind).")
@click.option("--action", metavar="ACTION", help="Only this action (created, updated, deleted, paused, ...).")
@click.option("--project", "project_name", metavar="ORG/PROJECT", help="Only changes in this project.")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@tz_option
@json_option
@handle_errors
def list_audit(since, until, actor, job_id, object_kind, object_id, action, project_name, limit, tz, as_json):
    """List audit events, newest first: who, when, the object, the action and the before/after of
    each field it changed.

    \b
    Examples:
      flask audit list --since 2026-06-01 --actor web:alice
      flask audit list --job 3 --json
      flask audit list --tz America/New_York
    """
    rows = audit_trail.list_events(
        limit=limit,
        since=audit_trail.parse_instant(since, "--since") if since is not None else None,
        until=audit_trail.parse_instant(until, "--until") if until is not None else None,
        actor=actor,
        job_id=job_id,
        object_kind=object_kind,
        object_id=object_id,
        action=action,
        project_id=tenancy.find_project(project_name).id if project_name else None,
    )
    if as_json:
        emit_json([audit_trail.to_dict(row) for row in rows])
        return
    print_table(
        ["ID", f"WHEN ({tz or 'UTC'})", "ACTOR", "SOURCE", "OBJECT", "ACTION", "CHANGES"],
        [
            [
                row.id,
                fmt_instant(row.created_at, tz),
                row.actor,
                row.source,
                f"{row.object_kind} {row.object_id}" + (f" ({row.object_label})" if row.object_label else ""),
                row.action,
                _changes(row.changes or {}),
            ]
            for row in rows
        ],
        empty="No audit events match.",
    )


def _changes(changes: dict) -> str:
    """`field: before -> after` pairs on one line, cut to fit a terminal (--json has them whole)."""
    parts = []
    for field, change in sorted(changes.items()):
        before, after = (json.dumps(change.get(side), ensure_ascii=False) for side in ("before", "after"))
        parts.append(f"{field}: {before} -> {after}")
    text = "; ".join(parts)
    return text if len(text) <= CHANGES_WIDTH else text[: CHANGES_WIDTH - 3] + "..."
