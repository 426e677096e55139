"""`flask project ...`: the projects of each organization, named ORG/PROJECT.

The CLI is the host operator's tool and acts as a superuser (`Caller.cli()`).
"""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.clock import utcnow
from app.services.caller import Caller
from app.services.use_cases import tenancy
from cli.common import (
    emit_json,
    fmt_instant,
    handle_errors,
    json_option,
    mutating,
    print_table,
    tz_header,
    tz_option,
)
from cli.notify import project_set_notify
from cli.tenancy_changes import delete_project, rename_project

project_cli = AppGroup("project", help="Create, list, rename and delete projects (ORG/PROJECT).")


@project_cli.command("add")
@click.argument("organization")
@click.argument("name")
@click.option("--description", metavar="TEXT", default="")
@json_option
@mutating
@handle_errors
def add_project(organization, name, description, as_json):
    """Create project NAME in ORGANIZATION, with its `default` queue.

    \b
    Example:
      flask project add acme web --description "the web team's jobs"
      flask job add nightly generate_report cron --cron "0 3 * * *" --project acme/web
    """
    project = tenancy.add_project(organization, name, now=utcnow(), caller=Caller.cli(), description=description)
    if as_json:
        emit_json(tenancy.project_to_dict(project))
    else:
        click.echo(f"Created project {project.full_name} (id {project.id}) with its 'default' queue")


@project_cli.command("list")
@click.option("--org", "organization", metavar="ORG", default=None, help="Only this organization's projects.")
@tz_option
@json_option
@handle_errors
def list_projects(organization, tz, as_json):
    """Every project (ORG/PROJECT).

    \b
    Example:
      flask project list --org acme
      flask project list --tz Europe/Paris
    """
    caller = Caller.cli()
    org = tenancy.get_organization(organization, caller) if organization else None
    projects = tenancy.list_projects(caller, organization=org)
    if as_json:
        emit_json([tenancy.project_to_dict(p) for p in projects])
        return
    print_table(
        ["ID", "PROJECT", "DESCRIPTION", tz_header("CREATED", tz)],
        [[p.id, p.full_name, p.description, fmt_instant(p.created_at, tz)] for p in projects],
    )


project_cli.add_command(project_set_notify)
project_cli.add_command(rename_project)
project_cli.add_command(delete_project)
