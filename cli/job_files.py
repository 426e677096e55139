"""`flask job apply|export|schema`: a project's jobs kept as files (YAML, TOML or JSON).

Exit codes of `apply`: 0 done (or, with --dry-run, nothing would change); 1 a handled error
(nothing changed); 2 Click's usage errors, and with --exit-code also "the plan has changes" (like
`terraform plan -detailed-exitcode`), so a CI job can fail on drift.
"""

from __future__ import annotations

import json
import os
import sys

import click

from app.clock import utcnow
from app.definitions.job_file import (
    FORMAT_NAMES,
    DocumentError,
    document_schema,
    format_of,
    parse_document,
    render_document,
)
from app.services.errors import ValidationFailed
from app.services.use_cases import job_files
from app.tasks import all_tasks
from cli.common import ACTOR, emit_json, handle_errors, json_option, mutating
from cli.org import cli_caller, project_option

EXIT_CHANGES = 2


def _source(path: str) -> job_files.Source:
    """A file to apply: its owner name is the path as given (relative paths stay relative, so a
    repository's `jobs/nightly.yaml` is the same source on every checkout)."""
    label = os.path.normpath(path)
    try:
        fmt = format_of(path)
        with open(path, encoding="utf-8") as handle:
            document = parse_document(handle.read(), fmt)
    except DocumentError as exc:
        raise ValidationFailed({label: str(exc)}) from None
    except OSError as exc:
        raise ValidationFailed({label: f"cannot read the file: {exc.strerror}"}) from None
    except UnicodeDecodeError:
        raise ValidationFailed({label: "is not UTF-8 text"}) from None
    return job_files.Source(label=label, managed_by=f"file:{label}", document=document)


@click.command("apply")
@click.argument("files", nargs=-1, required=True, metavar="FILE...")
@click.option("--dry-run", is_flag=True, help="Print the plan and change nothing.")
@click.option(
    "--prune", is_flag=True, help="Delete the jobs these files own but no longer list (never hand-made ones)."
)
@click.option(
    "--exit-code",
    "detailed_exit_code",
    is_flag=True,
    help="Exit 2 when the plan has changes (0 when it has none), for drift checks in CI.",
)
@project_option
@json_option
@mutating
@handle_errors
def apply_command(files, dry_run, prune, detailed_exit_code, project_name, as_json):
    """Make a project's jobs what FILE... say: create, update field by field and, with --prune,
    delete; all in one transaction, or nothing when any job is invalid.

    \b
    Examples:
      flask job apply jobs/nightly.yaml --dry-run
      flask job apply jobs/*.yaml --prune
      flask job apply jobs.toml --dry-run --exit-code   # CI: exit 2 on drift
    """
    sources = [_source(path) for path in files]
    plan = job_files.apply_job_files(
        sources,
        now=utcnow(),
        actor=ACTOR,
        caller=cli_caller(None),
        project_name=project_name,
        dry_run=dry_run,
        prune=prune,
    )
    if as_json:
        emit_json(plan)
    else:
        print_plan(plan)
    if detailed_exit_code and plan["changed"]:
        sys.exit(EXIT_CHANGES)


def print_plan(plan: dict) -> None:
    """The plan, one line per job (`+` create, `~` update with its fields, `-` delete, `=` unchanged)."""
    click.echo(f"Project {plan['project']}:")
    for name in plan["queues"]["created"]:
        click.echo(f"  + queue {name}")
    for item in plan["queues"]["updated"]:
        click.echo(f"  ~ queue {item['name']}")
        _echo_changes(item["changes"])
    for item in plan["created"]:
        click.echo(f"  + {item['name']}")
    for item in plan["updated"]:
        click.echo(f"  ~ {item['name']}")
        _echo_changes(item["changes"])
    for item in plan["deleted"]:
        click.echo(f"  - {item['name']}")
    for item in plan["unchanged"]:
        click.echo(f"  = {item['name']}")
    for item in plan["adopted"]:
        click.echo(f"    {item['name']}: now owned by {item['to']} (was {item['from'] or 'made by hand'})")
    counts = (
        f"{len(plan['created'])} to create, {len(plan['updated'])} to update, "
        f"{len(plan['deleted'])} to delete, {len(plan['unchanged'])} unchanged"
    )
    if plan["dry_run"]:
        click.echo(f"Plan: {counts}. Dry run: nothing changed.")
    else:
        click.echo(f"Applied: {counts}.".replace(" to ", " "))


def _echo_changes(changes: dict) -> None:
    for field, change in changes.items():
        click.echo(f"      {field}: {_shown(change['before'])} -> {_shown(change['after'])}")


def _shown(value) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@click.command("export")
@project_option
@click.option("--format", "fmt", type=click.Choice(FORMAT_NAMES), default=None, help="yaml (default), toml or json.")
@click.option("--job", "names", multiple=True, metavar="NAME", help="Only this job (repeatable).")
@click.option(
    "--output", "output", metavar="FILE", default=None, help="Write to FILE (its extension gives the format)."
)
@handle_errors
def export_command(project_name, fmt, names, output):
    """Write a project's jobs as a job file that `flask job apply` applies with no changes.

    \b
    Examples:
      flask job export --project acme/web > jobs.yaml
      flask job export --format toml --job nightly --output nightly.toml
    """
    document = job_files.export_document(caller=cli_caller(None), project_name=project_name, names=list(names))
    try:
        text = render_document(document, fmt or (format_of(output) if output else "yaml"))
    except DocumentError as exc:
        raise click.ClickException(str(exc)) from None
    if output is None:
        click.echo(text, nl=False)
        return
    with open(output, "w", encoding="utf-8") as handle:
        handle.write(text)
    click.echo(f"Wrote {len(document['jobs'])} jobs of {document['project']} to {output}", err=True)


@click.command("schema")
@handle_errors
def schema_command():
    """Print the JSON Schema of a job file (for editors: YAML, TOML and JSON alike).

    \b
    Example:
      flask job schema > cronwell-jobs.schema.json
    """
    emit_json(document_schema([task.name for task in all_tasks()]))


COMMANDS = (apply_command, export_command, schema_command)
