"""`flask token ...`: API tokens for machines (create: the secret is printed once; list; revoke)."""

from __future__ import annotations

import click
from flask.cli import AppGroup
from sqlalchemy import select

from app.clock import utcnow
from app.extensions import db
from app.models import ApiToken, User
from app.services.caller import Caller
from app.services.errors import NotFound
from app.services.use_cases import tokens
from cli.common import (
    IdType,
    emit_json,
    fmt_instant,
    handle_errors,
    json_option,
    mutating,
    print_table,
    tz_header,
    tz_option,
)

token_cli = AppGroup("token", help="Create, list and revoke API tokens.")

TOKEN_ID = IdType("token", ApiToken)
ROLES = click.Choice(["viewer", "operator", "admin"])


def _user(username: str) -> User:
    user = db.session.scalar(select(User).where(User.username == username)) if "\x00" not in username else None
    if user is None:
        raise NotFound(f"user {username!r} does not exist")
    return user


@token_cli.command("create")
@click.option("--user", "username", required=True, metavar="NAME", help="The user the token acts for.")
@click.option(
    "--project", metavar="ORG/PROJECT", help="The one project the token may touch (default: default/default)."
)
@click.option("--role", type=ROLES, required=True, help="The token's role; no higher than the user's in the project.")
@click.option("--name", "name", required=True, metavar="TEXT", help="What the token is for (shown in lists).")
@click.option(
    "--expires-in-days", type=click.IntRange(1, tokens.EXPIRES_DAYS_MAX), metavar="N", help="Expire after N days."
)
@json_option
@mutating
@handle_errors
def create_token(username, project, role, name, expires_in_days, as_json):
    """Create an API token and print its secret (shown this once; only its hash is kept).

    \b
    Examples:
      flask token create --user alice --project default/default --role operator --name ci-deploy
      flask token create --user alice --role viewer --name grafana --expires-in-days 90 --json
    """
    user = _user(username)
    created = tokens.create_token(
        Caller.cli(),
        name=name,
        project=project,
        role=role,
        expires_in_days=expires_in_days,
        user_id=user.id,
        now=utcnow(),
    )
    document = {**tokens.token_to_dict(created.token), "token": created.secret}
    if as_json:
        emit_json(document)
        return
    click.echo(f"Created token {created.token.id} ({name}) for {document['project']} as {role}.")
    click.echo("Its secret, shown this once; send it as 'Authorization: Bearer <secret>':")
    click.echo(created.secret)


@token_cli.command("list")
@click.option("--user", "username", metavar="NAME", help="Only this user's tokens.")
@click.option("--all", "include_revoked", is_flag=True, help="Include revoked tokens.")
@tz_option
@json_option
@handle_errors
def list_tokens(username, include_revoked, tz, as_json):
    """List API tokens (never their secrets), with their last use.

    \b
    Example:
      flask token list --json
      flask token list --tz Asia/Tokyo
    """
    found = tokens.list_tokens(Caller.cli(), include_revoked=include_revoked)
    if username:
        user = _user(username)
        found = [t for t in found if t.user_id == user.id]
    documents = [tokens.token_to_dict(t) for t in found]
    if as_json:
        emit_json(documents)
        return
    print_table(
        (
            "ID",
            "NAME",
            "PREFIX",
            "USER",
            "PROJECT",
            "ROLE",
            tz_header("LAST USED", tz),
            tz_header("EXPIRES", tz),
            tz_header("REVOKED", tz),
        ),
        [
            (
                d["id"],
                d["name"],
                d["prefix"],
                d["user"],
                d["project"],
                d["role"],
                _when(d["last_used_at"], t.last_used_at, tz) or "never",
                _when(d["expires_at"], t.expires_at, tz) or "never",
                _when(d["revoked_at"], t.revoked_at, tz) or "",
            )
            for d, t in zip(documents, found, strict=True)
        ],
        empty="(no tokens)",
    )


def _when(shown: str | None, instant, tz: str | None) -> str | None:
    """A token's instant as the list has always shown it (its JSON form), or in --tz."""
    return fmt_instant(instant, tz) if tz else shown


@token_cli.command("revoke")
@click.argument("token_id", type=TOKEN_ID)
@json_option
@mutating
@handle_errors
def revoke_token(token_id, as_json):
    """Revoke token TOKEN_ID: it stops working at once (revoking twice changes nothing).

    \b
    Example:
      flask token revoke 3
    """
    token = tokens.revoke_token(token_id, Caller.cli(), now=utcnow())
    if as_json:
        emit_json(tokens.token_to_dict(token))
    else:
        click.echo(f"Token {token.id} ({token.name}) revoked.")
