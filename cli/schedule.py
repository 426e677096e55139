"""`flask schedule preview`: validate and explain a schedule before any job uses it."""

from __future__ import annotations

import json

import click
from flask.cli import AppGroup

from app.clock import utcnow
from app.scheduling import SCHEDULE_INPUTS, ScheduleError, parse_schedule, schedule_value_from_options
from app.scheduling import preview as preview_schedule
from app.scheduling.lint import lint_schedule
from cli.common import emit_json, fmt_utc, handle_errors, json_option, parse_after, print_table, warn

schedule_cli = AppGroup("schedule", help="Validate and preview schedules (no job needed).")

# The schedule type of each key a --schedule-value object may hold, and of each input option.
_TYPE_BY_KEY = {schedule_input.key: kind for kind, schedule_input in SCHEDULE_INPUTS.items()}
_TYPE_BY_FLAG = {schedule_input.flag: kind for kind, schedule_input in SCHEDULE_INPUTS.items()}


def _schedule_type_of(text: str) -> str:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScheduleError(f"--schedule-value is not valid JSON: {exc.msg} (at character {exc.pos})") from None
    if not isinstance(value, dict):
        raise ScheduleError(f"--schedule-value must be a JSON object, got {type(value).__name__}")
    types = {_TYPE_BY_KEY[key] for key in value if key in _TYPE_BY_KEY}
    if len(types) != 1:
        raise ScheduleError(
            '--schedule-value needs exactly one of "expression" (cron), "every" (interval) or "run_at" (one_time)'
        )
    return types.pop()


@schedule_cli.command("preview")
@click.option("--cron", metavar="EXPR", help="A 5-field cron expression or @hourly, @daily, ...")
@click.option("--every", metavar="DURATION", help="An interval: 30s, 5m, 2h, 1d, 1h30m.")
@click.option("--run-at", metavar="ISO", help="A one-time instant; no offset means --timezone local time.")
@click.option("--schedule-value", metavar="JSON", help='A stored schedule, e.g. \'{"expression": "0 9 * * 1-5"}\'.')
@click.option("--timezone", default="UTC", show_default=True, metavar="TZ", help="IANA zone of the schedule.")
@click.option("--after", metavar="ISO", help="Start instant (default now); no offset means --timezone local time.")
@click.option("--count", type=click.IntRange(1, 1000), default=10, show_default=True, help="How many fire times.")
@json_option
@handle_errors
def preview(cron, every, run_at, schedule_value, timezone, after, count, as_json):
    """Show the next fire times of a schedule in UTC and local time, with DST adjustments marked.

    Give exactly one of --cron, --every, --run-at or --schedule-value.

    \b
    Examples:
      flask schedule preview --cron "30 2 * * *" --timezone America/New_York --after 2026-03-07
      flask schedule preview --every 90m --count 3 --json
    """
    given = [
        name
        for name, value in (
            ("--cron", cron),
            ("--every", every),
            ("--run-at", run_at),
            ("--schedule-value", schedule_value),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise click.UsageError(
            "give exactly one of --cron, --every, --run-at or --schedule-value"
            + (f" (got {', '.join(given)})" if given else "")
        )
    if schedule_value is not None:
        schedule_type = _schedule_type_of(schedule_value)
    else:
        schedule_type = _TYPE_BY_FLAG[given[0]]
    value = schedule_value_from_options(
        schedule_type, every=every, cron=cron, run_at=run_at, schedule_value=schedule_value
    )
    start = parse_after(after, timezone, utcnow())
    # An interval without start_at is anchored like a job created at `start`.
    schedule = parse_schedule(schedule_type, value, timezone, anchor=start.replace(microsecond=0))
    items = preview_schedule(schedule, start, count)
    # Warnings go to stderr: the exit code and the JSON on stdout stay as they are.
    for warning in lint_schedule(schedule, now=utcnow()):
        warn(warning.message)
    if as_json:
        emit_json([item.to_json() for item in items])
        return
    click.echo(f"Schedule: {schedule.describe()}")
    click.echo(f"After:    {fmt_utc(start)}")
    print_table(
        ["#", "UTC", f"LOCAL ({schedule.timezone})", "NOTE"],
        [[n, fmt_utc(i.utc), f"{i.local:%Y-%m-%d %H:%M:%S %Z}", i.note] for n, i in enumerate(items, 1)],
        empty="(no fire times after that instant)",
    )
