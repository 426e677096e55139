"""`flask batch ...`: submit a batch (one run of a job per item), list, inspect and cancel batches."""

from __future__ import annotations

import json

import click
from flask.cli import AppGroup

from app.clock import utcnow
from app.models import Batch
from app.services.read import batches as batch_read
from app.services.serialize import execution_to_dict
from app.services.use_cases import batches as batch_service
from cli.common import (
    ACTOR,
    JOB_ID,
    IdType,
    emit_json,
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

BATCH_ID = IdType("batch", Batch)
MAX_ITEMS_BYTES = 50 * 1024 * 1024

batch_cli = AppGroup("batch", help="Submit, list, inspect and cancel batches (one run of a job per item).")


def _counts(view) -> str:
    return ", ".join(f"{status} {count}" for status, count in view.counts.items() if count) or "no items"


@batch_cli.command("submit")
@click.argument("job_id", type=JOB_ID)
@click.option(
    "--items",
    "items_file",
    required=True,
    type=click.File("rb"),
    metavar="FILE|-",
    help="A JSON list of config overrides, one run each (a file, or - for stdin).",
)
@click.option("--on-complete", metavar="TASK", help="A registered task run once every item has ended.")
@click.option("--on-complete-config", metavar="JSON", help="The on-complete task's config (a JSON object).")
@json_option
@mutating
@handle_errors
def submit(job_id, items_file, on_complete, on_complete_config, as_json):
    """Run job JOB_ID once per item of a JSON list; each item is merged over the job's config.

    \b
    Every item is checked against the task's schema first; one bad item refuses the whole batch
    and nothing is stored. The on-complete task gets the batch's status and counts under `parent`.
    \b
    Examples:
      echo '[{"message": "a"}, {"message": "b"}]' | flask batch submit 3 --items -
      flask batch submit 3 --items items.json --on-complete echo --on-complete-config '{"message": "done"}'
    """
    raw = items_file.read(MAX_ITEMS_BYTES + 1)
    if len(raw) > MAX_ITEMS_BYTES:
        raise click.ClickException(f"--items is larger than {MAX_ITEMS_BYTES // (1024 * 1024)} MB")
    data = {
        "items": raw.decode("utf-8", "replace"),
        "on_complete": on_complete,
        "on_complete_config": on_complete_config,
    }
    batch = batch_service.submit_batch(job_id, data, now=utcnow(), actor=ACTOR)
    view = batch_read.view(batch)
    if as_json:
        emit_json(batch_read.to_dict(view))
        return
    click.echo(f"Submitted batch {batch.id} of job {batch.job_id} {batch.job.name!r}: {batch.item_count} item(s)")
    click.echo(f"Watch it with: flask batch inspect {batch.id}")


@batch_cli.command("list")
@click.option("--job", "job_id", type=JOB_ID, metavar="JOB_ID", help="Only batches of this job.")
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@tz_option
@json_option
@handle_errors
def list_batches(job_id, limit, tz, as_json):
    """List batches, newest first, with their status and counts per status.

    \b
    Examples:
      flask batch list
      flask batch list --job 3 --json | jq '.[] | {id, status}'
      flask batch list --tz Asia/Tokyo
    """
    rows = batch_service.list_batches(job_id=job_id, limit=limit)
    views = batch_read.views(rows)
    if as_json:
        emit_json([batch_read.to_dict(v) for v in views])
        return
    print_table(
        ["ID", "JOB", "STATUS", "ITEMS", "COUNTS", f"CREATED ({tz or 'UTC'})", f"COMPLETED ({tz or 'UTC'})"],
        [
            [
                v.batch.id,
                f"{v.batch.job_id} {v.batch.job.name}",
                v.status.value,
                v.batch.item_count,
                _counts(v),
                fmt_instant(v.batch.created_at, tz),
                fmt_instant(v.batch.completed_at, tz),
            ]
            for v in views
        ],
        empty="No batches yet. Submit one with `flask batch submit JOB_ID --items FILE`.",
    )


@batch_cli.command("inspect")
@click.argument("batch_id", type=BATCH_ID)
@json_option
@handle_errors
def inspect(batch_id, as_json):
    """Show one batch: status, counts per status, its on-complete callback and its items.

    \b
    Example:
      flask batch inspect 4
      flask batch inspect 4 --json | jq .counts
    """
    view = batch_read.view(batch_service.get_batch(batch_id))
    items = batch_read.items(batch_id)
    if as_json:
        emit_json(
            {**batch_read.to_dict(view), "executions": [execution_to_dict(e, include_output=False) for e in items]}
        )
        return
    batch = view.batch
    print_fields(
        [
            ("batch", batch.id),
            ("job", f"{batch.job_id} {batch.job.name!r} ({batch.job.task})"),
            ("status", view.status.value),
            ("items", f"{view.finished} of {view.total} ended"),
            ("counts", _counts(view)),
            ("on complete", batch.on_complete or "none"),
            (
                "callback",
                f"execution {view.callback.id} ({view.callback.status})" if view.callback is not None else None,
            ),
            ("submitted", f"{fmt_utc(batch.created_at)} by {batch.created_by}"),
            ("cancelled", f"{fmt_utc(batch.cancelled_at)} by {batch.cancelled_by}" if batch.cancelled_at else None),
            ("completed", fmt_utc(batch.completed_at)),
        ]
    )
    click.echo()
    click.echo("Items:")
    print_table(
        ["#", "EXECUTION", "STATUS", "ATTEMPTS", "DURATION", "OVERRIDE"],
        [
            [
                n,
                e.id,
                e.status,
                f"{e.attempts}/{e.max_attempts}",
                fmt_duration(e.duration_seconds),
                json.dumps(e.config_override, sort_keys=True),
            ]
            for n, e in enumerate(items, 1)
        ],
        empty="  (none)",
    )


@batch_cli.command("cancel")
@click.argument("batch_id", type=BATCH_ID)
@json_option
@mutating
@handle_errors
def cancel(batch_id, as_json):
    """Cancel a batch: items not started yet are cancelled; running ones finish.

    \b
    Example:
      flask batch cancel 4
    """
    batch, cancelled = batch_service.cancel_batch(batch_id, now=utcnow(), actor=ACTOR)
    view = batch_read.view(batch)
    if as_json:
        emit_json({**batch_read.to_dict(view), "cancelled_executions": cancelled})
        return
    click.echo(f"Batch {batch.id} cancelled; {cancelled} item(s) that had not started were cancelled")
