"""Alert channels' URLs and secrets at rest, on both databases: the rows hold only sealed values
while every reader (the ORM, the delivery loop's Core statements) gets the plaintext; a plaintext
row from before sealing keeps working and is sealed at its next write; a rotation reseals every
row with the new key; a CLI command without a usable key says so in one line."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from app import secret_box
from app.extensions import db
from app.models import AlertChannel
from app.services.engine.deliveries import DeliveryLoop
from app.services.use_cases import alert_channels
from tests.factories import make_alert, make_job, utc
from tests.helpers.databases import CHANNEL_SECRET_KEY
from tests.helpers.webhooks import Receiver, signature_ok

NOW = utc(2026, 6, 1, 12, 0)
NEW_KEY = "3H9NjK_KsCsvBJcGB35pyR-DYTOfPuGNzwIaQgPgorA="


@pytest.fixture
def cli_runner(app):
    runner = app.test_cli_runner()
    return lambda *args: runner.invoke(args=list(args))


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


def stored(channel_id: int) -> tuple[str, str | None]:
    """The row's target and secret as the database holds them."""
    db.session.rollback()
    row = db.session.execute(text("SELECT target, secret FROM alert_channels WHERE id = :id"), {"id": channel_id}).one()
    return row.target, row.secret


def deliver(app) -> dict:
    return DeliveryLoop(db.engine, {**app.config, "ALERT_DELIVERY_TIMEOUT_SECONDS": 5}).run_once(NOW)


def test_rows_hold_sealed_values_and_the_delivery_loop_sends_with_the_plaintext(app, receiver):
    channel = alert_channels.add_channel(
        {"name": "ops", "kind": "webhook", "target": receiver.url, "secret": "s3cret"}, now=NOW, actor="t"
    )
    target, secret = stored(channel.id)
    assert target.startswith("fernet:") and secret.startswith("fernet:")
    assert "127.0.0.1" not in target and "s3cret" not in secret
    assert db.session.get(AlertChannel, channel.id).target == receiver.url
    make_alert(make_job(now=NOW), message="it broke", now=NOW)
    db.session.commit()
    assert deliver(app)["delivered"] == 1
    [(headers, body)] = receiver.requests
    assert signature_ok("s3cret", headers, body)


def test_a_plaintext_row_from_before_sealing_works_and_is_sealed_when_written(app, receiver):
    channel = alert_channels.add_channel(
        {"name": "old", "kind": "webhook", "target": "https://placeholder.example/x", "secret": "x"},
        now=NOW - timedelta(hours=1),
        actor="t",
    )
    db.session.execute(
        text("UPDATE alert_channels SET target = :t, secret = :s WHERE id = :id"),
        {"t": receiver.url, "s": "legacy-secret", "id": channel.id},
    )
    db.session.commit()
    assert stored(channel.id) == (receiver.url, "legacy-secret")
    assert alert_channels.channel_to_dict(alert_channels.get_channel(channel.id))["target"].startswith(
        "http://127.0.0.1"
    )
    make_alert(make_job(now=NOW), message="it broke", now=NOW)
    db.session.commit()
    assert deliver(app)["delivered"] == 1
    assert signature_ok("legacy-secret", *receiver.requests[0])

    alert_channels.edit_channel(channel.id, {"name": "old-renamed"}, now=NOW, actor="t")
    target, secret = stored(channel.id)
    assert target.startswith("fernet:") and secret.startswith("fernet:")
    assert db.session.get(AlertChannel, channel.id).secret == "legacy-secret"


def test_env_references_are_sealed_too_and_read_back_as_the_reference(app):
    channel = alert_channels.add_channel(
        {"name": "env", "kind": "slack", "target": "env:OPS_SLACK_URL"}, now=NOW, actor="t"
    )
    target, secret = stored(channel.id)
    assert target.startswith("fernet:") and secret is None
    assert alert_channels.channel_to_dict(alert_channels.get_channel(channel.id))["target"] == "env:OPS_SLACK_URL"


def test_a_rotation_reseals_every_row_with_the_new_key(app, cli_runner):
    first = alert_channels.add_channel(
        {"name": "a", "kind": "webhook", "target": "https://hooks.example.com/a", "secret": "sa"}, now=NOW, actor="t"
    )
    second = alert_channels.add_channel({"name": "b", "kind": "email", "target": "ops@example.com"}, now=NOW, actor="t")
    before = {channel_id: stored(channel_id) for channel_id in (first.id, second.id)}
    app.config["CHANNEL_SECRET_KEY"] = f"{NEW_KEY},{CHANNEL_SECRET_KEY}"
    secret_box.init_app(app)
    try:
        result = cli_runner("channel", "reseal")
        assert result.exit_code == 0, result.output
        assert "Resealed 2 channel(s)" in result.output
        new_only = secret_box.SecretBox.from_settings({"CHANNEL_SECRET_KEY": NEW_KEY})
        for channel_id in (first.id, second.id):
            target, secret = stored(channel_id)
            assert target != before[channel_id][0]
            assert new_only.open(target) in ("https://hooks.example.com/a", "ops@example.com")
        assert new_only.open(stored(first.id)[1]) == "sa"
    finally:
        app.config["CHANNEL_SECRET_KEY"] = CHANNEL_SECRET_KEY
        secret_box.init_app(app)


def test_without_a_usable_key_a_command_fails_in_one_line(app, cli_runner):
    alert_channels.add_channel(
        {"name": "a", "kind": "webhook", "target": "https://hooks.example.com/a"}, now=NOW, actor="t"
    )
    app.config["CHANNEL_SECRET_KEY"] = None
    secret_box.init_app(app)
    try:
        listed = cli_runner("channel", "list")
        added = cli_runner("channel", "add", "b", "--url", "https://hooks.example.com/b")
    finally:
        app.config["CHANNEL_SECRET_KEY"] = CHANNEL_SECRET_KEY
        secret_box.init_app(app)
    for result in (listed, added):
        assert result.exit_code == 1
        assert result.output.count("\n") == 1 and "CHANNEL_SECRET_KEY is unset" in result.output, result.output
    assert [c.name for c in alert_channels.list_channels()] == ["a"]
