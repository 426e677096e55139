"""`flask org rename|delete` and `flask project rename|delete` (registered on the `org` and
`project` groups): names change, ids never; a delete of anything that still holds work needs
`--cascade`, which says what it will delete and asks (or takes `--yes`)."""

from __future__ import annotations

import click

from app.clock import utcnow
from app.services.caller import Caller
from app.services.use_cases import tenancy
from app.services.use_cases import tenancy_changes as changes
from cli.common import emit_json, handle_errors, json_option, mutating

CASCADE_HELP = "Also delete every job (with its history), queue and execution in it."
YES_HELP = "Do not ask before a --cascade delete."


@click.command("rename")
@click.argument("old")
@click.argument("new")
@json_option
@mutating
@handle_errors
def rename_org(old, new, as_json):
    """Rename organization OLD to NEW. Its id, projects, members, tokens and jobs stay; every
    `OLD/PROJECT` is `NEW/PROJECT` from now on.

    \b
    Example:
      flask org rename acme acme-corp
    """
    org = changes.rename_organization(old, new, now=utcnow(), caller=Caller.cli())
    if as_json:
        emit_json(tenancy.organization_to_dict(org))
    else:
        click.echo(f"Renamed organization {old!r} to {org.name!r} (id {org.id})")


@click.command("delete")
@click.argument("name")
@click.option("--cascade", is_flag=True, help=CASCADE_HELP)
@click.option("--yes", is_flag=True, help=YES_HELP)
@json_option
@mutating
@handle_errors
def delete_org(name, cascade, yes, as_json):
    """Delete organization NAME with its projects and memberships.

    Refused while any of its projects holds jobs, queues besides `default` or running
    executions, unless --cascade (which lists what goes and asks; --yes skips the question).

    \b
    Example:
      flask org delete acme --cascade --yes
    """
    caller = Caller.cli()
    if cascade:
        plan = changes.organization_deletion_plan(name, caller)
        _confirm(f"organization {name!r}", plan, yes)
    plan = changes.delete_organization(name, cascade=cascade, now=utcnow(), caller=caller)
    _done(f"organization {name!r}", plan, as_json)


@click.command("rename")
@click.argument("project")
@click.argument("new")
@json_option
@mutating
@handle_errors
def rename_project(project, new, as_json):
    """Rename project ORG/OLD to NEW (within its organization). Its id, queues, jobs, tokens and
    history stay; the jobs and runs go on while it is renamed.

    \b
    Example:
      flask project rename acme/web frontend
    """
    found = changes.rename_project(project, new, now=utcnow(), caller=Caller.cli())
    if as_json:
        emit_json(tenancy.project_to_dict(found))
    else:
        click.echo(f"Renamed project {project} to {found.full_name} (id {found.id})")


@click.command("delete")
@click.argument("project")
@click.option("--cascade", is_flag=True, help=CASCADE_HELP)
@click.option("--yes", is_flag=True, help=YES_HELP)
@json_option
@mutating
@handle_errors
def delete_project(project, cascade, yes, as_json):
    """Delete project ORG/PROJECT with its default queue, channels and API tokens.

    Refused while it holds jobs, queues besides `default` or running executions, unless
    --cascade (which lists what goes and asks; --yes skips the question).

    \b
    Example:
      flask project delete acme/web --cascade
    """
    caller = Caller.cli()
    if cascade:
        _confirm(f"project {project}", changes.project_deletion_plan(project, caller), yes)
    plan = changes.delete_project(project, cascade=cascade, now=utcnow(), caller=caller)
    _done(f"project {project}", plan, as_json)


def _confirm(what: str, plan: changes.DeletionPlan, yes: bool) -> None:
    click.echo(f"This deletes {what}: {plan.describe()}.", err=True)
    if not yes and not click.confirm("Delete all of it?", err=True):
        raise click.ClickException("nothing deleted")


def _done(what: str, plan: changes.DeletionPlan, as_json: bool) -> None:
    if as_json:
        emit_json({"deleted": what, **plan.to_dict()})
    else:
        click.echo(f"Deleted {what}: {plan.describe()}")
