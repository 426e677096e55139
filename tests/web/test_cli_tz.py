"""`--tz ZONE` on every CLI list that prints times, from one shared definition: the table's times in
that zone (ISO 8601 with its offset) and its header naming it; `--json` stays UTC; an unknown zone
is one line on stderr and exit 1 before anything is read; and no list that prints times lacks it."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from app.clock import utcnow
from app.extensions import db
from app.services.caller import Caller
from app.services.use_cases import alert_channels, batches, tokens
from cli.common import tz_option
from tests.factories import make_alert, make_execution, make_heartbeat, make_job, make_user

TOKYO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+09:00")
NOON = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def world(app):
    """Something with a time in every list."""
    job = make_job("nightly", task="echo")
    job.next_run_at = NOON
    db.session.commit()
    make_alert(job, make_execution(job, "failed"))
    make_execution(job, "running", exclusive=False, claimed_by="worker-a")
    make_heartbeat("worker-a", "worker", age_seconds=1)
    channel = alert_channels.add_channel(
        {"name": "ops", "kind": "webhook", "target": "http://127.0.0.1:9/hook"}, now=utcnow(), actor="cli"
    )
    alert_channels.send_test(channel.id, now=utcnow(), actor="cli")
    batches.submit_batch(job.id, {"items": [{}]}, now=utcnow(), actor="cli")
    user = make_user("tz-admin", role="admin")
    token = tokens.create_token(
        Caller.cli(),
        name="t",
        project="default/default",
        role="viewer",
        now=utcnow(),
        expires_in_days=30,
        user_id=user.id,
    ).token
    tokens.revoke_token(token.id, Caller.cli(), now=utcnow())
    return job


# Each list that prints times, with the header of one of its time columns under --tz Asia/Tokyo.
LISTS = {
    ("job", "list"): "NEXT RUN (Asia/Tokyo)",
    ("execution", "list"): "SCHEDULED FOR (Asia/Tokyo)",
    ("event", "list"): "Asia/Tokyo",
    ("alerts", "list"): "CREATED (Asia/Tokyo)",
    ("alerts", "deliveries"): "CREATED (Asia/Tokyo)",
    ("audit", "list"): "WHEN (Asia/Tokyo)",
    ("batch", "list"): "CREATED (Asia/Tokyo)",
    ("worker", "list"): "RUNNING (EXECUTION@START, Asia/Tokyo)",
    ("project", "list"): "CREATED (Asia/Tokyo)",
    ("user", "list"): "CREATED (Asia/Tokyo)",
    ("org", "list"): "CREATED (Asia/Tokyo)",
    ("token", "list", "--all"): "REVOKED (Asia/Tokyo)",
}
# Lists that print no instant (ages, names, settings only): no --tz to give them.
WITHOUT_TIMES = {("queue", "list"), ("task", "list"), ("channel", "list"), ("alerts", "channel", "list")}


@pytest.mark.parametrize("command", list(LISTS), ids=" ".join)
def test_times_in_the_zone_and_json_in_utc(cli, world, command):
    shown = cli(*command, "--tz", "Asia/Tokyo")
    assert shown.exit_code == 0, shown.output
    assert LISTS[command] in shown.stdout
    assert TOKYO.search(shown.stdout), shown.stdout
    assert not re.search(r"\d\d:\d\d:\d\dZ", shown.stdout), shown.stdout  # no UTC time left in the table
    plain = cli(*command)
    assert plain.exit_code == 0 and not TOKYO.search(plain.stdout)
    as_json = cli(*command, "--tz", "Asia/Tokyo", "--json")
    assert as_json.exit_code == 0 and "+09:00" not in as_json.stdout and "Z" in as_json.stdout


def test_the_job_list_shows_the_instant_itself_in_the_zone(cli, world):
    shown = cli("job", "list", "--tz", "Asia/Tokyo").stdout
    assert "2026-06-01T21:00:00+09:00" in shown
    assert "2026-06-01T08:00:00-04:00" in cli("job", "list", "--tz", "America/New_York").stdout


@pytest.mark.parametrize("command", list(LISTS), ids=" ".join)
def test_an_unknown_zone_is_one_line_on_stderr_and_exit_1(cli, world, command):
    refused = cli(*command, "--tz", "Mars/Olympus_Mons")
    assert refused.exit_code == 1
    assert refused.stdout == ""
    assert refused.stderr == (
        "Error: --tz: unknown time zone 'Mars/Olympus_Mons'; give an IANA name such as Asia/Tokyo\n"
    )


def _commands(group, path=()):
    for name, command in getattr(group, "commands", {}).items():
        yield (*path, name), command
        yield from _commands(command, (*path, name))


def test_every_list_that_prints_times_has_the_one_tz_option(app):
    shared = tz_option(lambda: None).__click_params__[0]
    found = {}
    for path, command in _commands(app.cli):
        if path[-1] in ("list", "deliveries"):
            found[path] = next((p for p in command.params if p.name == "tz"), None)
    listed = {command[:-1] if command[-1].startswith("--") else command for command in LISTS}
    assert set(found) == listed | WITHOUT_TIMES, set(found) ^ (listed | WITHOUT_TIMES)
    for path in listed:
        option = found[path]
        assert option is not None, path
        assert (option.opts, option.help, option.metavar) == (shared.opts, shared.help, shared.metavar), path
        assert option.callback.__qualname__ == shared.callback.__qualname__, path  # the same check
    assert all(found[path] is None for path in WITHOUT_TIMES)
