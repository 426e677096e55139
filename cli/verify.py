"""`flask verify`: the ledger check (is every occurrence accounted for, exactly once?)."""

from __future__ import annotations

import json
import sys

import click

from app.clock import utcnow


@click.command("verify")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
def verify_command(as_json: bool) -> None:
    """Check the ledger: every due occurrence has exactly one execution or a misfire event,
    no expired lease is left unsettled, no key is used twice, attempts stay within max_attempts,
    and every exhausted execution has a dead letter. Exit 1 on any violation.

    \b
    Example:
      flask verify
      flask verify --json | jq .violations
    """
    from app.services.read.ledger import verify

    report = verify(now=utcnow())
    if as_json:
        click.echo(json.dumps(report.to_dict()))
    else:
        click.echo(
            f"jobs={report.jobs} occurrences={report.occurrences} executions={report.executions} "
            f"coalesced_or_skipped={report.coalesced_or_skipped} excused_disabled={report.excused_disabled} "
            f"in_flight={report.in_flight} expired={report.expired} violations={len(report.violations)}"
        )
        for warning in report.warnings:
            click.echo(f"warning: {warning}")
        for violation in report.violations:
            click.echo(f"violation: {violation}")
    if not report.ok:
        click.echo(f"Error: the ledger has {len(report.violations)} violation(s)", err=True)
        sys.exit(1)
