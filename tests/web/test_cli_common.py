"""What every operator command shares: the CLI secret, one-line errors, --json, --help examples.

The helpers at the top are imported by the other `test_cli_*` modules.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import click
import pytest
from sqlalchemy import func, select

from app.clock import utcnow
from app.extensions import db as database
from app.models import Alert, Attempt, DeadLetter, Event, Execution, Heartbeat, Job, User
from app.services.use_cases import jobs as job_service
from cli.common import fmt_age, fmt_both, fmt_duration, fmt_local, fmt_utc

SECRET = "correct horse battery staple"


# --- helpers shared by the CLI tests ---------------------------------------------------------


@pytest.fixture
def cli(app):
    """Run `flask ARGS...` in-process with Click's runner; stdout and stderr come apart."""
    runner = app.test_cli_runner()

    def invoke(*args: str, **kwargs):
        return runner.invoke(args=[str(a) for a in args], **kwargs)

    return invoke


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
    assert result.exit_code == 2, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert fragment in result.stderr
    assert result.stdout == ""


def row_counts() -> dict[str, int]:
    """How many rows each table holds, to prove a failed command wrote nothing."""
    database.session.rollback()
    return {
        model.__tablename__: database.session.scalar(select(func.count()).select_from(model))
        for model in (Job, Execution, Attempt, Alert, DeadLetter, Event, User)
    }


def cli_events(type_: str | None = None) -> list[Event]:
    database.session.expire_all()
    query = select(Event).where(Event.actor == "cli").order_by(Event.id)
    if type_:
        query = query.where(Event.type == type_)
    return list(database.session.scalars(query))


def make_job(
    name: str = "every-minute",
    task: str = "always_succeed",
    schedule_type: str = "interval",
    schedule: dict | None = None,
    **fields,
) -> Job:
    """A job created through the service (actor `test`), as the CLI would."""
    data = {
        "name": name,
        "task": task,
        "schedule_type": schedule_type,
        "schedule": schedule or {"every": "60s"},
        **fields,
    }
    return job_service.create_job(data, now=utcnow(), actor="test")


def make_execution(
    job: Job,
    status: str = "pending",
    *,
    attempts: int = 0,
    output: str = "",
    error: str = "",
    finished: bool | None = None,
    **fields,
) -> Execution:
    """An execution row in any status (finished_at set exactly for terminal ones)."""
    now = utcnow()
    terminal = status in {"succeeded", "failed", "timed_out", "missed", "cancelled", "dead_lettered"}
    values = dict(
        job_id=job.id,
        scheduled_for=now - timedelta(minutes=1),
        trigger="manual",
        idempotency_key=f"test:{job.id}:{uuid.uuid4().hex}",
        status=status,
        attempts=attempts,
        max_attempts=job.max_attempts,
        queue=job.queue,
        priority=job.priority,
        exclusive=job.overlap_policy != "allow",
        available_at=now - timedelta(minutes=1),
        started_at=now - timedelta(seconds=30) if attempts else None,
        finished_at=now if (terminal if finished is None else finished) else None,
        output=output,
        error=error,
        created_at=now,
        updated_at=now,
    )
    execution = Execution(**{**values, **fields})
    database.session.add(execution)
    database.session.commit()
    return execution


def make_alert(
    job: Job, execution: Execution | None = None, message: str = "retries exhausted", resolved: bool = False
) -> Alert:
    alert = Alert(
        job_id=job.id,
        execution_id=execution.id if execution else None,
        kind="dead_letter",
        message=message,
        created_at=utcnow(),
        resolved_at=utcnow() if resolved else None,
        resolved_by="someone" if resolved else None,
    )
    database.session.add(alert)
    database.session.commit()
    return alert


def make_heartbeat(process_id: str, kind: str, *, age_seconds: float) -> Heartbeat:
    now = utcnow()
    beat = Heartbeat(
        id=process_id,
        kind=kind,
        host="host-a",
        pid=4242,
        started_at=now - timedelta(hours=1),
        last_seen=now - timedelta(seconds=age_seconds),
        info={"busy": 0},
    )
    database.session.add(beat)
    database.session.commit()
    return beat


# --- the CLI secret --------------------------------------------------------------------------

# Every command that writes, with arguments that would succeed on the `seeded` data.
MUTATIONS = [
    ("job", "add", "new-job", "always_succeed", "interval", "--every", "30s"),
    ("job", "edit", "{job}", "--every", "5m"),
    ("job", "trigger", "{job}"),
    ("job", "enable", "{disabled_job}"),
    ("job", "disable", "{job}"),
    ("job", "delete", "{job}", "--yes"),
    ("execution", "retry", "{failed}"),
    ("execution", "cancel", "{pending}"),
    ("alerts", "resolve", "{alert}"),
    ("prune-history",),
    ("ensure-dev-user",),
]
READS = [
    ("job", "list"),
    ("job", "catalog"),
    ("job", "preview", "{job}"),
    ("schedule", "preview", "--every", "5m"),
    ("execution", "list"),
    ("execution", "inspect", "{failed}"),
    ("alerts", "list"),
    ("health",),
    ("prune-history", "--dry-run"),
]


@pytest.fixture
def seeded(app) -> dict[str, int]:
    app.config["DEV_ADMIN_PASSWORD"] = "a long development password"
    job = make_job("seeded")
    disabled = make_job("seeded-off", enabled=False)
    failed = make_execution(job, "failed", attempts=1, error="boom")
    pending = make_execution(job, "pending")
    alert = make_alert(job, failed)
    return {"job": job.id, "disabled_job": disabled.id, "failed": failed.id, "pending": pending.id, "alert": alert.id}


def _args(command: tuple, ids: dict) -> list[str]:
    return [part.format(**ids) for part in command]


@pytest.mark.parametrize("command", MUTATIONS, ids=lambda c: " ".join(c[:2]))
def test_mutations_need_the_secret_when_one_is_set(app, cli, seeded, command):
    app.config["SCHEDULER_CLI_SECRET"] = SECRET
    before = row_counts()
    assert_error(cli(*_args(command, seeded)), "this command needs --cli-secret")
    assert_error(cli(*_args(command, seeded), "--cli-secret", SECRET + "x"), "wrong --cli-secret")
    assert_error(cli(*_args(command, seeded), "--cli-secret", ""), "wrong --cli-secret")
    assert row_counts() == before
    ok(cli(*_args(command, seeded), "--cli-secret", SECRET))


@pytest.mark.parametrize("command", MUTATIONS, ids=lambda c: " ".join(c[:2]))
def test_mutations_need_no_secret_when_none_is_set(app, cli, seeded, command):
    assert app.config["SCHEDULER_CLI_SECRET"] is None
    ok(cli(*_args(command, seeded)))


def test_reads_never_need_the_secret(app, cli, seeded):
    app.config["SCHEDULER_CLI_SECRET"] = SECRET
    for command in READS:
        ok(cli(*_args(command, seeded)))


def test_the_secret_is_compared_in_constant_time(app, cli, seeded, monkeypatch):
    import cli.common as common

    compared = []
    real = common.hmac.compare_digest
    monkeypatch.setattr(common.hmac, "compare_digest", lambda a, b: compared.append((a, b)) or real(a, b))
    app.config["SCHEDULER_CLI_SECRET"] = SECRET
    ok(cli("job", "trigger", seeded["job"], "--cli-secret", SECRET))
    assert compared == [(SECRET.encode(), SECRET.encode())]


# --- --json and --help everywhere -------------------------------------------------------------

JSON_COMMANDS = READS + [
    ("job", "add", "json-job", "always_succeed", "cron", "--cron", "@daily"),
    ("job", "edit", "{job}", "--priority", "5"),
    ("job", "trigger", "{job}"),
]


def test_every_json_command_prints_exactly_one_document_with_utc_z_times(cli, seeded):
    for command in JSON_COMMANDS:
        document = ok_json(cli(*_args(command, seeded), "--json"))
        for text in _strings(document):
            if len(text) >= 20 and text[4:5] == "-" and text[10:11] == "T" and "local" not in text:
                # every instant is UTC with Z, except preview's `local` (checked in its own test)
                assert text.endswith("Z"), (command, text)


def _strings(value):
    if isinstance(value, dict):
        for key, item in value.items():
            if key != "local":
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def _leaf_commands(group: click.Group, prefix=()):
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _leaf_commands(command, prefix + (name,))
        else:
            yield prefix + (name,), command


OPERATOR_COMMANDS = ("job", "execution", "alerts", "schedule", "health", "prune-history", "ensure-dev-user")


def test_every_operator_command_has_an_example_in_its_help(app, cli):
    found = [path for path, _ in _leaf_commands(app.cli) if path[0] in OPERATOR_COMMANDS]
    assert len(found) == 19
    for path in found:
        text = ok(cli(*path, "--help"))
        assert "Example" in text and f"flask {' '.join(path)}" in text, path


# --- formatting helpers ------------------------------------------------------------------------


def test_time_and_age_formatting():
    instant = datetime(2026, 7, 1, 12, 0, 5, 123456, tzinfo=UTC)
    assert fmt_utc(instant) == "2026-07-01 12:00:05Z"
    assert fmt_local(instant, "America/New_York") == "2026-07-01 08:00:05 EDT"
    assert fmt_both(instant, "UTC") == "2026-07-01 12:00:05Z"
    assert fmt_both(instant, "Europe/Paris") == "2026-07-01 12:00:05Z (2026-07-01 14:00:05 CEST)"
    assert fmt_utc(None) is None
    assert [fmt_age(s) for s in (0, 45.4, 185, 7440, 270000)] == ["0s", "45s", "3m05s", "2h04m", "3d03h"]
    assert [fmt_duration(s) for s in (None, 0.4213, 59.5, 75)] == [None, "0.42s", "59.50s", "1m15s"]
