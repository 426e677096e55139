"""Deployment commands: `flask check-deploy` (is this configuration fit for production?) and
`flask check-heartbeat` (the scheduler and worker container healthchecks).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import timedelta

import click
from flask import current_app
from flask.cli import with_appcontext
from sqlalchemy import select

from app.clock import utcnow
from app.secret_box import key_problem
from cli.common import emit_json, handle_errors, json_option
from config import DEV_SECRET_KEY


@dataclass(frozen=True)
class Finding:
    code: str
    message: str


def check_deployment(config: Mapping) -> list[Finding]:
    """What in these settings is unsafe or will not scale; pure (reads only `config`)."""
    findings: list[Finding] = []
    debug = bool(config.get("CRONWELL_DEBUG", config.get("DEBUG")))
    if not config.get("WEBUI_AUTH", True):
        findings.append(
            Finding(
                "auth_off",
                "WEBUI_AUTH=0: anyone who can reach the web UI can change and run jobs; "
                "keep it on unless an authenticating proxy guards every request",
            )
        )
    if debug:
        findings.append(
            Finding(
                "debug_on",
                "DEBUG is on: development mode (text logs, the default admin password "
                "is accepted); set DEBUG=0 in production",
            )
        )
    if config.get("SECRET_KEY") in (None, "", DEV_SECRET_KEY):
        findings.append(
            Finding(
                "secret_key_default",
                "SECRET_KEY is the development default: anyone can forge a "
                "signed-in session; with DEBUG=0 the web, scheduler and worker "
                "refuse to start",
            )
        )
    elif len(str(config["SECRET_KEY"])) < 32:
        findings.append(
            Finding(
                "secret_key_short",
                "SECRET_KEY is shorter than 32 characters; use a long "
                "random value (python -c 'import secrets; "
                "print(secrets.token_urlsafe(48))')",
            )
        )
    channel_key = key_problem(config)
    if channel_key:
        findings.append(
            Finding("channel_key", channel_key + "; with DEBUG=0 the web and the scheduler refuse to start")
        )
    if not config.get("SCHEDULER_CLI_SECRET"):
        findings.append(
            Finding(
                "cli_secret_unset",
                "SCHEDULER_CLI_SECRET is unset: mutating `flask` commands run "
                "without --cli-secret for anyone with the environment",
            )
        )
    uri = str(config.get("SQLALCHEMY_DATABASE_URI", ""))
    if uri.startswith("sqlite"):
        findings.append(
            Finding(
                "sqlite",
                "the database is SQLite: fine for the web, scheduler and worker on one "
                "machine, not for several hosts (one file, one write lock); use "
                "DATABASE_URL=postgresql://... to spread processes across machines",
            )
        )
    workers = int(config.get("GUNICORN_WORKERS", 1))
    if not config.get("REDIS_URL") and workers > 1:
        findings.append(
            Finding(
                "redis_absent",
                f"REDIS_URL is unset while gunicorn runs {workers} workers: "
                f"login rate limiting (and the dashboard cache) is per process, so "
                f"an attacker gets {workers}x the attempts; set REDIS_URL",
            )
        )
    if not debug and not config.get("SECURE_COOKIES"):
        findings.append(
            Finding(
                "cookies_insecure",
                "SECURE_COOKIES=0 with DEBUG=0: session cookies would also travel "
                "over plain HTTP; set SECURE_COOKIES=1 behind HTTPS",
            )
        )
    if config.get("METRICS_ENABLED") and not config.get("METRICS_TOKEN"):
        findings.append(
            Finding(
                "metrics_open",
                "METRICS_ENABLED=1 without METRICS_TOKEN: /metrics is public; set "
                "METRICS_TOKEN or keep the web port off the internet",
            )
        )
    return findings


@click.command("check-deploy")
@click.option("--strict", is_flag=True, help="Exit 1 when there is any warning (for CI and deploy scripts).")
@json_option
@with_appcontext
def check_deploy_cli(strict: bool, as_json: bool) -> None:
    """Warn about settings unfit for production: auth off, DEBUG on, default SECRET_KEY, no CLI
    secret, SQLite across hosts, no Redis with several gunicorn workers, insecure cookies, open
    /metrics.

    Reads the configuration only (no connections); `flask health` checks the live deployment.

    \b
    Example:
      flask check-deploy
      flask check-deploy --strict        # exit 1 on any warning
    """
    findings = check_deployment(current_app.config)
    if as_json:
        emit_json({"ok": not findings, "strict": strict, "warnings": [asdict(f) for f in findings]})
    else:
        for finding in findings:
            click.echo(f"WARNING {finding.code}: {finding.message}")
        click.echo(f"check-deploy: {len(findings)} warning(s)" if findings else "check-deploy: no warnings")
    if strict and findings:
        raise click.exceptions.Exit(1)


@click.command("check-heartbeat")
@click.argument("kind", type=click.Choice(["scheduler", "worker"]))
@click.option("--any-host", is_flag=True, help="Accept a heartbeat from any host (default: this host only).")
@click.option(
    "--max-age",
    type=click.IntRange(1, 31_536_000),  # a year: beyond it timedelta overflows, and nothing is that fresh
    default=None,
    help="Seconds a heartbeat stays fresh (default HEARTBEAT_STALE_SECONDS).",
)
@with_appcontext
@handle_errors
def check_heartbeat_cli(kind: str, any_host: bool, max_age: int | None) -> None:
    """Exit 0 when a `kind` process on this host has heartbeated recently, else 1.

    The container healthcheck of the scheduler and the worker: their loops heartbeat every few
    seconds, so a stale heartbeat means a stuck or disconnected process even while it still runs.

    \b
    Example:
      flask check-heartbeat scheduler
      flask check-heartbeat worker --any-host --max-age 30
    """
    from app.extensions import db
    from app.models import Heartbeat
    from app.services.engine.heartbeats import not_stopped

    max_age = max_age or current_app.config["HEARTBEAT_STALE_SECONDS"]
    query = select(Heartbeat.id).where(
        Heartbeat.kind == kind, Heartbeat.last_seen >= utcnow() - timedelta(seconds=max_age), not_stopped()
    )
    host = socket.gethostname()
    if not any_host:
        query = query.where(Heartbeat.host == host)
    found = db.session.scalar(query.limit(1))
    if found is None:
        where = "any host" if any_host else f"host {host}"
        raise click.ClickException(f"no {kind} heartbeat from {where} in the last {max_age}s")
    click.echo(f"{kind} {found} alive")
