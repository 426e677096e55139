"""`flask task ...`: the task catalog: the built-in tasks and the deployer's own (docs/tasks.md).

The group lives here; other modules add their commands to `task_cli` (as `flask task run` does).
"""

from __future__ import annotations

import json
import os
import textwrap

import click
from flask import current_app
from flask.cli import AppGroup

from app.tasks import UnknownTaskError, get_task
from app.tasks.describe import check_catalog, describe_catalog, describe_task
from cli.common import emit_json, json_option
from cli.task_run import run_task

task_cli = AppGroup("task", help="List, show and check the registered tasks, and run one without a job.")


def _env_text(task: dict) -> str:
    if not task["env"]:
        return "none"
    return ", ".join(f"{item['name']} ({'set' if item['set'] else 'NOT SET'})" for item in task["env"])


@task_cli.command("list")
@json_option
def list_tasks(as_json):
    """List every registered task: name, module, async, declared env, config keys.

    \b
    Example:
      flask task list
      flask task list --json | jq '.[] | .name'
    """
    tasks = describe_catalog(os.environ)
    if as_json:
        emit_json(tasks)
        return
    for index, task in enumerate(tasks):
        if index:
            click.echo()
        kind = "async task" if task["async"] else "task"
        click.echo(f"{task['name']}  ({kind} from {task['module']}, version {task['version']})")
        click.echo(textwrap.fill(task["description"], width=96, initial_indent="    ", subsequent_indent="    "))
        keys = ", ".join((task["schema"].get("properties") or {}).keys()) or "none"
        click.echo(f"    config keys: {keys}")
        click.echo(f"    env: {_env_text(task)}")


@task_cli.command("show")
@click.argument("name")
@json_option
def show_task(name, as_json):
    """Show one task: its description, schema, declared env and an example config.

    \b
    Example:
      flask task show http_request
      flask task show nightly_export --json
    """
    try:
        spec = get_task(name)
    except UnknownTaskError as exc:
        raise click.ClickException(str(exc)) from None
    task = describe_task(spec, os.environ)
    if as_json:
        emit_json(task)
        return
    click.echo(task["name"])
    click.echo(textwrap.fill(task["description"], width=96, initial_indent="    ", subsequent_indent="    "))
    click.echo(f"module:  {task['module']} (version {task['version']})")
    click.echo(f"async:   {'yes' if task['async'] else 'no'}")
    click.echo(f"env:     {_env_text(task)}")
    click.echo("schema:")
    click.echo(textwrap.indent(json.dumps(task["schema"], indent=2, sort_keys=True), "    "))
    click.echo("example config:")
    click.echo(textwrap.indent(json.dumps(task["example"], indent=2), "    "))


@task_cli.command("check")
def check_tasks():
    """Import every task module, check every schema is valid JSON Schema, report missing env.

    Exits 1 listing every problem, one a line on stderr; prints a summary and exits 0 when there
    is none.

    \b
    Example:
      CRONWELL_TASK_MODULES=acme.tasks flask task check
    """
    load_errors = current_app.extensions.get("cronwell.task_load_errors") or []
    problems = check_catalog(os.environ, load_errors)
    if problems:
        for problem in problems:
            click.echo(f"Error: {problem}", err=True)
        raise SystemExit(1)
    count = len(describe_catalog(os.environ))
    click.echo(f"ok: {count} tasks, every module imported, every schema valid, every declared variable set")


# A one-off run of a task (cli/task_run.py) is a command of the same group.
task_cli.add_command(run_task)
