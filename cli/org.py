"""`flask org ...`: the organizations of the installation; `--project ORG/PROJECT` for other commands.

The CLI is the host operator's tool and acts as a superuser (`Caller.cli()`).
"""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.clock import utcnow
from app.services.caller import Caller
from app.services.use_cases import tenancy
from cli.common import emit_json, fmt_instant, handle_errors, json_option, mutating, print_table, tz_header, tz_option
from cli.tenancy_changes import delete_org, rename_org

org_cli = AppGroup("org", help="Create, list, rename and delete organizations.")


def project_option(func):
    """`--project ORG/PROJECT`: the project a command acts in (default: the default project)."""
    return click.option(
        "--project",
        "project_name",
        metavar="ORG/PROJECT",
        default=None,
        help="The project to act in (default: default/default).",
    )(func)


def cli_caller(project_name: str | None) -> Caller:
    """The host operator, narrowed to `ORG/PROJECT` when one is named."""
    if not project_name:
        return Caller.cli()
    return Caller.cli(project_id=tenancy.find_project(project_name, Caller.cli()).id)


@org_cli.command("add")
@click.argument("name")
@json_option
@mutating
@handle_errors
def add_org(name, as_json):
    """Create organization NAME (lower-case letters, digits, '_', '-', '.'); add projects with
    `flask project add NAME PROJECT` and people with `flask user create USER --org NAME`.

    \b
    Example:
      flask org add acme
    """
    org = tenancy.add_organization(name, now=utcnow(), caller=Caller.cli())
    if as_json:
        emit_json(tenancy.organization_to_dict(org))
    else:
        click.echo(f"Created organization {org.name!r} (id {org.id})")


@org_cli.command("list")
@tz_option
@json_option
@handle_errors
def list_orgs(tz, as_json):
    """Every organization with its numbers of projects and members.

    \b
    Example:
      flask org list --json
      flask org list --tz Europe/Paris
    """
    organizations = tenancy.list_organizations(Caller.cli())
    documents = [tenancy.organization_to_dict(org) for org in organizations]
    if as_json:
        emit_json(documents)
        return
    print_table(
        ["ID", "NAME", "PROJECTS", "MEMBERS", tz_header("CREATED", tz)],
        [
            [
                d["id"],
                d["name"],
                d["projects"],
                d["members"],
                fmt_instant(org.created_at, tz) if tz else d["created_at"],
            ]
            for d, org in zip(documents, organizations, strict=True)
        ],
    )


org_cli.add_command(rename_org)
org_cli.add_command(delete_org)
