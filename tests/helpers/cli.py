"""Assertions for the CLI tests (the `cli` fixture that runs `flask ...` lives in tests/web/conftest.py)."""

from __future__ import annotations

import json

from sqlalchemy import func, select

from app.extensions import db
from app.models import Alert, Attempt, DeadLetter, Event, Execution, Job, User


def ok(result) -> str:
    """Assert success and return stdout."""
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result.stdout


def ok_json(result):
    """Assert success and that stdout is exactly one JSON document."""
    return json.loads(ok(result))


def assert_error(result, fragment: str) -> str:
    """A handled error: exit 1, one `Error: ...` line on stderr with `fragment`, nothing on stdout."""
    assert result.exit_code == 1, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert isinstance(result.exception, SystemExit), result.exception  # no traceback
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: "), lines[0]
    assert fragment in lines[0], lines[0]
    assert result.stdout == ""
    return lines[0]


def assert_usage_error(result, fragment: str = "") -> None:
    """Click refused the arguments: exit 2, `fragment` on stderr, nothing on stdout."""
    assert result.exit_code == 2, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert fragment in result.stderr
    assert result.stdout == ""


def row_counts() -> dict[str, int]:
    """How many rows each table holds, to prove a failed command wrote nothing."""
    db.session.rollback()
    return {
        model.__tablename__: db.session.scalar(select(func.count()).select_from(model))
        for model in (Job, Execution, Attempt, Alert, DeadLetter, Event, User)
    }


def cli_events(type_: str | None = None) -> list[Event]:
    """The audit events the CLI wrote (actor `cli`), oldest first, optionally of one type."""
    db.session.expire_all()
    query = select(Event).where(Event.actor == "cli").order_by(Event.id)
    if type_:
        query = query.where(Event.type == type_)
    return list(db.session.scalars(query))
