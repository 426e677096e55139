"""Slack, Teams and email channels end to end: a loopback server plays Slack and Teams (their
payloads checked against each documented shape), an SMTP server on loopback takes the mail, and
`flask channel add|list|test|remove` drive them by name."""

from __future__ import annotations

import email
import json
from datetime import timedelta

import jsonschema
import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import AlertChannel, AlertDelivery
from app.services.engine.deliveries import DeliveryLoop
from app.services.use_cases import alert_channels
from tests.factories import make_alert, make_job, utc
from tests.helpers.message_schemas import SLACK, TEAMS
from tests.helpers.servers import free_port
from tests.helpers.webhooks import Receiver

NOW = utc(2026, 6, 1, 12, 0)
SHAPES = {"slack": SLACK, "teams": TEAMS}


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


def settings(app, **extra):
    return {**app.config, "BASE_URL": "https://cronwell.example.com", "ALERT_DELIVERY_TIMEOUT_SECONDS": 5, **extra}


def add(kind: str, target: str, name: str | None = None) -> AlertChannel:
    data = {"name": name or kind, "kind": kind, "target": target}
    return alert_channels.add_channel(data, now=NOW - timedelta(hours=1), actor="test")


@pytest.mark.parametrize("kind", ["slack", "teams"])
def test_an_alert_reaches_slack_and_teams_in_their_documented_shape(app, receiver, kind):
    add(kind, receiver.url)
    job = make_job("nightly", now=NOW)
    make_alert(job, message="RuntimeError: upstream 503", now=NOW)
    db.session.commit()

    counts = DeliveryLoop(db.engine, settings(app)).run_once(NOW)

    assert counts == {"queued": 1, "delivered": 1, "retrying": 0, "failed": 0}
    [(headers, body)] = receiver.requests
    message = json.loads(body)
    jsonschema.validate(message, SHAPES[kind])
    assert headers["content-type"] == "application/json" and "x-cronwell-signature" not in headers
    text = json.dumps(message)
    assert "nightly" in text and "RuntimeError: upstream 503" in text and f"/jobs/{job.id}" in text


def test_a_refused_slack_post_is_retried_with_backoff_and_logged(app, receiver):
    add("slack", receiver.url)
    make_alert(make_job(now=NOW), now=NOW)
    db.session.commit()
    receiver.statuses = [500]
    loop = DeliveryLoop(db.engine, settings(app, ALERT_DELIVERY_BACKOFF_SECONDS=10))

    assert loop.run_once(NOW)["retrying"] == 1
    assert loop.run_once(NOW + timedelta(seconds=11))["delivered"] == 1
    db.session.rollback()
    [row] = db.session.scalars(select(AlertDelivery)).all()
    assert (row.status, row.attempts, row.response_status) == ("delivered", 2, 200)
    assert len(receiver.requests) == 2 and receiver.requests[0][1] == receiver.requests[1][1]


def test_email_goes_out_with_a_text_and_an_html_part(app):
    controller_module = pytest.importorskip("aiosmtpd.controller")
    inbox = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
            inbox.append(envelope.content)
            return "250 OK"

    port = free_port()
    controller = controller_module.Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        add("email", "oncall@example.com")
        make_alert(make_job("backup", now=NOW), message="disk <full>", now=NOW)
        db.session.commit()
        assert (
            DeliveryLoop(db.engine, settings(app, SMTP_HOST="127.0.0.1", SMTP_PORT=port)).run_once(NOW)["delivered"]
            == 1
        )
    finally:
        controller.stop()
    [content] = inbox
    message = email.message_from_bytes(content)
    assert message.get_content_type() == "multipart/alternative"
    parts = {
        part.get_content_type(): part.get_payload(decode=True).decode()
        for part in message.walk()
        if not part.is_multipart()
    }
    assert "Job: backup" in parts["text/plain"] and "disk <full>" in parts["text/plain"]
    assert "disk &lt;full&gt;" in parts["text/html"] and "https://cronwell.example.com/jobs/" in parts["text/html"]


def test_flask_channel_adds_lists_tests_and_removes_by_name_without_showing_the_url(app, receiver):
    runner = app.test_cli_runner()
    app.config["BASE_URL"] = "https://cronwell.example.com"
    secret_url = receiver.url + "/T000/B000/secretpart"

    added = runner.invoke(args=["channel", "add", "ops", "--kind", "slack", "--url", secret_url])
    assert added.exit_code == 0, added.output
    listed = runner.invoke(args=["channel", "list", "--json"])
    [row] = json.loads(listed.output)
    assert (row["name"], row["kind"]) == ("ops", "slack") and "secretpart" not in listed.output
    assert "secretpart" not in runner.invoke(args=["channel", "list"]).output

    tested = runner.invoke(args=["channel", "test", "ops"])
    assert tested.exit_code == 0, tested.output
    assert "Delivered the test message to 'ops' (status 200)" in tested.output
    jsonschema.validate(json.loads(receiver.requests[-1][1]), SLACK)

    receiver.statuses = [503]
    failed = runner.invoke(args=["channel", "test", "ops"])
    assert failed.exit_code == 1
    assert (
        failed.output.strip().splitlines()[-1]
        == "Error: the test message to 'ops' was not delivered: HTTP 503 (pending)"
    )

    assert runner.invoke(args=["channel", "remove", "ops"]).exit_code == 1  # needs --yes
    removed = runner.invoke(args=["channel", "remove", "ops", "--yes"])
    assert removed.exit_code == 0 and db.session.scalar(select(AlertChannel.id)) is None
    missing = runner.invoke(args=["channel", "test", "ops"])
    assert missing.exit_code == 1 and "no channel named 'ops'" in missing.output


@pytest.mark.parametrize(
    "args,complaint",
    [
        (["channel", "add", "x", "--kind", "slack"], "needs --url URL"),
        (["channel", "add", "x", "--kind", "teams", "--url", "ftp://x/"], "needs an http:// or https:// URL"),
        (["channel", "add", "x", "--email", "not-an-address"], "must be an email address"),
    ],
)
def test_bad_channel_input_is_one_clear_error_and_stores_nothing(app, args, complaint):
    result = app.test_cli_runner().invoke(args=args)
    assert result.exit_code in (1, 2) and complaint in result.output
    assert db.session.scalar(select(AlertChannel.id)) is None
