"""What every operator command shares: the CLI secret, one-line errors, --json, --help examples."""

from __future__ import annotations

from datetime import UTC, datetime

import click
import pytest

from cli.common import fmt_age, fmt_both, fmt_duration, fmt_local, fmt_utc
from tests.factories import make_alert, make_execution, make_job
from tests.helpers.cli import assert_error, ok, ok_json, row_counts

SECRET = "correct horse battery staple"


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


OPERATOR_COMMANDS = (
    "job",
    "execution",
    "alerts",
    "schedule",
    "health",
    "prune-history",
    "ensure-dev-user",
    "queue",
    "batch",
    "org",
    "project",
    "user",
    "audit",
    "token",
)


def test_every_operator_command_has_an_example_in_its_help(app, cli):
    found = [path for path, _ in _leaf_commands(app.cli) if path[0] in OPERATOR_COMMANDS]
    assert len(found) >= 50  # every group's commands were found (a typo above would find none)
    missing = []
    for path in found:
        text = ok(cli(*path, "--help"))
        if not ("Example" in text and f"flask {' '.join(path)}" in text):
            missing.append(" ".join(path))
    assert missing == [], "commands whose --help lacks an Example: " + ", ".join(missing)


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
