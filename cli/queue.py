"""`flask queue ...`: create, tune, pause and inspect the queues workers serve."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.clock import utcnow
from app.services.read.queue_stats import queue_stats, queue_to_dict
from app.services.use_cases import queues as queue_service
from cli.common import (
    ACTOR,
    emit_json,
    fmt_age,
    fmt_utc,
    handle_errors,
    json_option,
    mutating,
    print_fields,
    print_table,
)
from cli.org import cli_caller, project_option

queue_cli = AppGroup("queue", help="Create, tune, pause and inspect queues.")

LIMIT = click.IntRange(*queue_service.LIMIT_RANGE)
PRIORITY = click.IntRange(*queue_service.PRIORITY_RANGE)


def _emit(queue, as_json: bool, message: str) -> None:
    if as_json:
        emit_json(queue_to_dict(queue, queue_stats(utcnow(), [queue]).get(queue.id)))
    else:
        click.echo(message)


def _limit_text(queue) -> str:
    return str(queue.concurrency_limit) if queue.concurrency_limit is not None else "none"


RATE_HELP = "At most N starts per period across all workers: N/second, N/minute or N/hour (10/minute)."


@queue_cli.command("add")
@click.argument("name")
@click.option("--concurrency-limit", type=LIMIT, metavar="N", help="At most N running at once, across all workers.")
@click.option("--rate-limit", metavar="N/PERIOD", help=RATE_HELP)
@click.option("--priority", type=PRIORITY, metavar="N", help="Default priority of its jobs (lower runs first).")
@click.option("--description", metavar="TEXT")
@project_option
@json_option
@mutating
@handle_errors
def add_queue(name, concurrency_limit, rate_limit, priority, description, project_name, as_json):
    """Create queue NAME.

    \b
    Examples:
      flask queue add reports --concurrency-limit 2 --description "nightly reports"
      flask queue add urgent --priority -10 --json
      flask queue add partner-api --rate-limit 10/minute
    """
    queue = queue_service.add_queue(
        {
            "name": name,
            "concurrency_limit": concurrency_limit,
            "rate_limit": rate_limit,
            "priority": priority,
            "description": description,
        },
        now=utcnow(),
        actor=ACTOR,
        caller=cli_caller(project_name),
    )
    _emit(queue, as_json, f"Created queue {queue.name!r} (limit {_limit_text(queue)}, priority {queue.priority})")


@queue_cli.command("edit")
@click.argument("name")
@click.option("--concurrency-limit", type=LIMIT, metavar="N", help="At most N running at once, across all workers.")
@click.option("--no-limit", is_flag=True, help="Remove the concurrency limit.")
@click.option("--rate-limit", metavar="N/PERIOD", help=RATE_HELP + " `none` removes it.")
@click.option("--priority", type=PRIORITY, metavar="N", help="Default priority of jobs created in it.")
@click.option("--description", metavar="TEXT")
@project_option
@json_option
@mutating
@handle_errors
def edit_queue(name, concurrency_limit, no_limit, rate_limit, priority, description, project_name, as_json):
    """Change queue NAME's limit, priority or description.

    \b
    Examples:
      flask queue edit reports --concurrency-limit 2
      flask queue edit reports --no-limit --priority 5
    """
    if no_limit and concurrency_limit is not None:
        raise click.UsageError("give --concurrency-limit N or --no-limit, not both")
    data = {"priority": priority, "description": description, "no_limit": no_limit, "rate_limit": rate_limit}
    if concurrency_limit is not None:
        data["concurrency_limit"] = concurrency_limit
    queue = queue_service.edit_queue(name, data, now=utcnow(), actor=ACTOR, caller=cli_caller(project_name))
    _emit(queue, as_json, f"Queue {queue.name!r}: limit {_limit_text(queue)}, priority {queue.priority}")


@queue_cli.command("list")
@project_option
@json_option
@handle_errors
def list_queues(project_name, as_json):
    """Every queue with its live statistics (of every project, or of --project ORG/PROJECT).

    \b
    Examples:
      flask queue list
      flask queue list --json
    """
    queues = queue_service.list_queues(cli_caller(project_name) if project_name else None)
    stats = queue_stats(utcnow(), queues)
    if as_json:
        emit_json([queue_to_dict(queue, stats.get(queue.id)) for queue in queues])
        return
    print_table(
        ["NAME", "LIMIT", "PRIO", "STATE", "PENDING", "LATER", "RETRYING", "RUNNING", "OK/1H", "FAILED/1H", "OLDEST"],
        [
            [
                q.name,
                _limit_text(q),
                q.priority,
                "paused" if q.paused else "active",
                s.pending,
                s.scheduled_later,
                s.retrying,
                s.running,
                s.succeeded_last_hour,
                s.failed_last_hour,
                fmt_age(s.oldest_pending_seconds),
            ]
            for q in queues
            for s in [stats[q.id]]
        ],
    )


@queue_cli.command("stats")
@click.argument("name")
@project_option
@json_option
@handle_errors
def queue_statistics(name, project_name, as_json):
    """Live statistics of queue NAME.

    \b
    Example:
      flask queue stats reports --json
    """
    queue = queue_service.get_queue(name, cli_caller(project_name))
    stats = queue_stats(utcnow(), [queue])[queue.id]
    if as_json:
        emit_json(queue_to_dict(queue, stats))
        return
    state = "active"
    if queue.paused:
        state = f"paused since {fmt_utc(queue.paused_at)} by {queue.paused_by}"
        if queue.paused_reason:
            state += f": {queue.paused_reason}"
    print_fields(
        [
            ("Queue", queue.name),
            ("State", state),
            ("Concurrency limit", _limit_text(queue)),
            ("Priority", queue.priority),
            ("Pending (due now)", stats.pending),
            ("Scheduled later", stats.scheduled_later),
            ("Retrying", stats.retrying),
            ("Running", stats.running),
            ("Succeeded, last hour", stats.succeeded_last_hour),
            ("Failed, last hour", stats.failed_last_hour),
            ("Oldest pending", fmt_age(stats.oldest_pending_seconds)),
            ("Throughput (per minute, 15 min)", f"{stats.throughput_per_minute:.1f}"),
            (
                "Fire lateness p50 / p95 (15 min)",
                f"{_seconds(stats.lateness_p50_seconds)} / {_seconds(stats.lateness_p95_seconds)}",
            ),
        ]
    )


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


@queue_cli.command("pause")
@click.argument("name")
@click.option("--reason", metavar="TEXT", help="Why, shown to other operators.")
@project_option
@mutating
@handle_errors
def pause_queue(name, reason, project_name):
    """Stop workers from starting work from queue NAME (running work finishes).

    \b
    Example:
      flask queue pause reports --reason "database maintenance"
    """
    queue = queue_service.pause_queue(name, now=utcnow(), actor=ACTOR, reason=reason, caller=cli_caller(project_name))
    click.echo(f"Queue {queue.name!r} paused" + (f": {queue.paused_reason}" if queue.paused_reason else ""))


@queue_cli.command("resume")
@click.argument("name")
@project_option
@mutating
@handle_errors
def resume_queue(name, project_name):
    """Let workers start work from queue NAME again (they are woken at once).

    \b
    Example:
      flask queue resume reports
    """
    queue = queue_service.resume_queue(name, now=utcnow(), actor=ACTOR, caller=cli_caller(project_name))
    click.echo(f"Queue {queue.name!r} resumed")


@queue_cli.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Confirm the deletion.")
@project_option
@mutating
@handle_errors
def delete_queue(name, yes, project_name):
    """Delete queue NAME (refused for `default`, and while jobs use it or work waits in it).

    \b
    Example:
      flask queue delete reports --yes
    """
    if not yes:
        raise click.UsageError("deleting a queue needs --yes")
    queue_service.delete_queue(name, now=utcnow(), actor=ACTOR, caller=cli_caller(project_name))
    click.echo(f"Deleted queue {name!r}")
