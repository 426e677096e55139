"""`flask job set-notify`, `flask project set-notify` and `flask channel set`: routing and channel
settings from the CLI, read back, audited; bad input is one line and changes nothing."""

from __future__ import annotations

import json

from sqlalchemy import select

from app.extensions import db
from app.models import AuditEvent, NotificationRoute
from tests.factories import make_job
from tests.helpers.cli import assert_error, assert_usage_error, ok


def channels(cli):
    ok(cli("channel", "add", "ops-slack", "--kind", "slack", "--url", "https://hooks.slack.com/services/T/B/x"))
    ok(cli("channel", "add", "oncall", "--email", "oncall@example.com"))


def test_project_default_then_job_override_then_back(cli):
    channels(cli)
    job = make_job("nightly")
    shown = json.loads(ok(cli("project", "set-notify", "--json")))
    assert shown["events"] == ["dead_letter", "overdue", "recovery"] and shown["source"] == "default"
    out = ok(cli("project", "set-notify", "--on", "failure,recovery", "--to", "ops-slack"))
    assert "failure, recovery -> ops-slack (project)" in out
    out = ok(cli("job", "set-notify", job.id))
    assert "failure, recovery -> ops-slack (its project's default)" in out
    doc = json.loads(
        ok(cli("job", "set-notify", job.id, "--on", "failure,success", "--to", "oncall", "--to", "ops-slack", "--json"))
    )
    assert doc["override"] == {"events": ["failure", "success"], "channels": ["oncall", "ops-slack"], "source": "job"}
    out = ok(cli("job", "set-notify", job.id, "--on", "none"))
    assert "notifies nothing -> ops-slack (its own setting)" in out
    out = ok(cli("job", "set-notify", job.id, "--follow-project"))
    assert "(its project's default)" in out
    db.session.rollback()
    assert db.session.scalars(select(NotificationRoute.job_id)).all() == [None]
    actions = db.session.scalars(
        select(AuditEvent.action).where(AuditEvent.object_kind == "notify_route").order_by(AuditEvent.id)
    ).all()
    assert actions == ["changed", "changed", "changed", "deleted"]


def test_bad_routing_is_one_clear_error_and_stores_nothing(cli):
    channels(cli)
    job = make_job("nightly")
    assert_error(cli("job", "set-notify", job.id, "--on", "failure,explosion"), "unknown event(s) explosion")
    assert_error(cli("job", "set-notify", job.id, "--on", "failure", "--to", "pager"), "no channel named 'pager'")
    assert_error(cli("job", "set-notify", 9999, "--on", "failure"), "does not exist")
    assert_usage_error(cli("job", "set-notify", job.id, "--to", "oncall"))
    assert_usage_error(cli("job", "set-notify", job.id, "--follow-project", "--on", "failure"))
    assert_error(cli("project", "set-notify", "--project", "nope/nope", "--on", "failure"), "does not exist")
    db.session.rollback()
    assert db.session.scalars(select(NotificationRoute)).all() == []


def test_channel_grouping_and_quiet_window(cli):
    ok(
        cli(
            "channel",
            "add",
            "desk",
            "--email",
            "desk@example.com",
            "--quiet",
            "22:00-07:00",
            "--quiet-timezone",
            "Europe/Paris",
        )
    )
    [listed] = json.loads(ok(cli("channel", "list", "--json")))
    assert listed["quiet"] == "22:00-07:00" and listed["quiet_timezone"] == "Europe/Paris"
    assert listed["group_minutes"] == 10
    doc = json.loads(ok(cli("channel", "set", "desk", "--group-minutes", "30", "--quiet", "off", "--json")))
    assert doc["group_minutes"] == 30 and doc["quiet"] is None
    assert "30m" in ok(cli("channel", "list"))
    assert_error(cli("channel", "set", "desk", "--quiet", "25:00-07:00"), "not a time of day")
    assert_error(cli("channel", "set", "desk", "--quiet-timezone", "Mars/Olympus"), "unknown time zone")
    assert_error(cli("channel", "set", "desk", "--group-minutes", "-1"), "whole number of minutes")
    assert_usage_error(cli("channel", "set", "desk"))
    assert json.loads(ok(cli("channel", "list", "--json")))[0]["group_minutes"] == 30
