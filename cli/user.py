"""`flask user ...`: people who sign in, their organizations and roles.

The CLI is the host operator's tool and acts as a superuser. Passwords are read from stdin with
`--password-stdin` (scripts) or asked for twice without echo; never taken as an option, so they
stay out of shell history and the process table.
"""

from __future__ import annotations

import sys

import click
from flask.cli import AppGroup

from app.clock import utcnow
from app.domain.states import Role, values
from app.services.caller import Caller
from app.services.use_cases import tenancy, users
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

user_cli = AppGroup("user", help="Create and manage users: organizations, roles, passwords.")

ROLE = click.Choice(values(Role))


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    return click.prompt("Password", hide_input=True, confirmation_prompt=True)


def _organization(name: str | None):
    return tenancy.get_organization(name, Caller.cli()) if name else tenancy.default_organization()


def _emit(user, as_json: bool, message: str, organization_id: int | None = None) -> None:
    if as_json:
        emit_json(users.user_to_dict(user, organization_id))
    else:
        click.echo(message)


@user_cli.command("create")
@click.argument("username")
@click.option(
    "--org", "organization", metavar="ORG", default=None, help="The organization they join (default: default)."
)
@click.option("--role", type=ROLE, default=Role.VIEWER.value, show_default=True, help="Their role there.")
@click.option("--superuser", is_flag=True, help="The installation's operator: every organization, every right.")
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of stdin.")
@json_option
@mutating
@handle_errors
def create_user(username, organization, role, superuser, password_stdin, as_json):
    """Create USERNAME with ROLE in ORG.

    \b
    Examples:
      flask user create alice --org acme --role admin
      printf '%s\\n' "$PASSWORD" | flask user create ci --org acme --role operator --password-stdin
    """
    org = _organization(organization)
    password = _password(password_stdin)
    user = users.create_user(
        username, password=password, role=role, now=utcnow(), caller=Caller.cli(), organization=org, superuser=superuser
    )
    if user.superuser:  # every organization and every right: a role in one of them says nothing more
        message = f"Created superuser {user.username!r}: every organization, every right"
    else:
        message = f"Created user {user.username!r}: {role} of {org.name}"
    _emit(user, as_json, message, org.id)


@user_cli.command("list")
@click.option("--org", "organization", metavar="ORG", default=None, help="Only this organization's members.")
@tz_option
@json_option
@handle_errors
def list_users(organization, tz, as_json):
    """Every user (or ORG's members) with their roles.

    \b
    Example:
      flask user list --json
      flask user list --tz Asia/Tokyo
    """
    org = tenancy.get_organization(organization, Caller.cli()) if organization else None
    found = users.list_users(Caller.cli(), organization=org)
    if as_json:
        emit_json([users.user_to_dict(u, org.id if org else None) for u in found])
        return
    print_table(
        ["ID", "USERNAME", "ACTIVE", "SUPERUSER", "ROLES", tz_header("CREATED", tz)],
        [
            [
                u.id,
                u.username,
                "yes" if u.active else "no",
                "yes" if u.superuser else "no",
                ", ".join(f"{m.role}@{m.organization.name}" for m in u.memberships) or "-",
                fmt_instant(u.created_at, tz),
            ]
            for u in found
        ],
    )


@user_cli.command("set-role")
@click.argument("username")
@click.argument("role_argument", metavar="[ROLE]", required=False, type=ROLE)
@click.option("--role", type=ROLE, default=None, help="The new role (or give it as the second argument).")
@click.option("--org", "organization", metavar="ORG", default=None, help="Where (default: default).")
@json_option
@mutating
@handle_errors
def set_role(username, role_argument, role, organization, as_json):
    """Give USERNAME the role ROLE in ORG (adding them to ORG if needed); their web sessions end.

    \b
    Example:
      flask user set-role alice viewer --org acme
    """
    if role_argument and role and role_argument != role:
        raise click.UsageError("give the role once")
    role = role or role_argument
    if not role:
        raise click.UsageError("give the role: flask user set-role USERNAME ROLE [--org ORG]")
    org = _organization(organization)
    user = users.set_role(username, role, now=utcnow(), caller=Caller.cli(), organization=org)
    _emit(user, as_json, f"User {user.username!r} is now {role} of {org.name}", org.id)


@user_cli.command("set-timezone")
@click.argument("username")
@click.argument("zone")
@json_option
@mutating
@handle_errors
def set_timezone(username, zone, as_json):
    """Show USERNAME's times on every page in ZONE (an IANA name: Asia/Tokyo, Europe/Paris, UTC).

    Stored times stay UTC; the CLI keeps printing ISO 8601 (see `--tz` where a command has it).

    \b
    Example:
      flask user set-timezone alice Asia/Tokyo
    """
    from app.services.use_cases.preferences import set_time_zone

    user = set_time_zone(username, zone, now=utcnow(), caller=Caller.cli())
    if as_json:
        emit_json({"username": user.username, "time_zone": user.time_zone})
    else:
        click.echo(f"User {user.username!r} sees times in {user.time_zone}")


def _set_active(username: str, active: bool, as_json: bool) -> None:
    user = users.set_active(username, active, now=utcnow(), caller=Caller.cli())
    _emit(user, as_json, f"User {user.username!r} {'enabled' if active else 'disabled'}")


@user_cli.command("disable")
@click.argument("username")
@json_option
@mutating
@handle_errors
def disable_user(username, as_json):
    """Stop USERNAME from signing in; their web sessions end at once.

    \b
    Example:
      flask user disable alice
    """
    _set_active(username, False, as_json)


@user_cli.command("enable")
@click.argument("username")
@json_option
@mutating
@handle_errors
def enable_user(username, as_json):
    """Let a disabled USERNAME sign in again.

    \b
    Example:
      flask user enable alice
    """
    _set_active(username, True, as_json)


@user_cli.command("reset-password")
@click.argument("username")
@click.option("--password-stdin", is_flag=True, help="Read the new password from the first line of stdin.")
@json_option
@mutating
@handle_errors
def reset_password(username, password_stdin, as_json):
    """Set USERNAME's password; their web sessions end.

    \b
    Example:
      echo 'a new pass phrase' | flask user reset-password alice --password-stdin
    """
    password = _password(password_stdin)
    user = users.reset_password(username, password, now=utcnow(), caller=Caller.cli())
    _emit(user, as_json, f"Password of {user.username!r} reset; their sessions were ended")
