"""A channel URL kept out of the database: `env:NAME` is read from the delivering process's
environment at each send, shown as its name, and never one of Cronwell's own credentials."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import AlertChannel, AlertDelivery
from app.services.engine.deliveries import DeliveryLoop
from app.services.errors import ValidationFailed
from app.services.use_cases import alert_channels
from tests.factories import make_alert, make_job, utc
from tests.helpers.webhooks import Receiver

NOW = utc(2026, 6, 1, 12, 0)


def add(target, kind="slack"):
    return alert_channels.add_channel(
        {"name": "ops", "kind": kind, "target": target}, now=NOW - timedelta(hours=1), actor="test"
    )


def test_an_env_target_is_read_at_each_send_and_shown_by_name(app, monkeypatch):
    receiver = Receiver()
    try:
        channel = add("env:OPS_SLACK_URL")
        assert alert_channels.channel_to_dict(channel)["target"] == "env:OPS_SLACK_URL"
        make_alert(make_job("backup", now=NOW), message="disk full", now=NOW)
        settings = {**app.config, "ALERT_DELIVERY_TIMEOUT_SECONDS": 5}
        monkeypatch.delenv("OPS_SLACK_URL", raising=False)
        assert DeliveryLoop(db.engine, settings).run_once(NOW)["retrying"] == 1
        db.session.rollback()
        [waiting] = db.session.scalars(select(AlertDelivery)).all()
        assert waiting.last_error == "environment variable OPS_SLACK_URL is not set"
        monkeypatch.setenv("OPS_SLACK_URL", receiver.url)
        assert DeliveryLoop(db.engine, settings).run_once(NOW + timedelta(minutes=5))["delivered"] == 1
        [(_, body)] = receiver.requests
        assert "disk full" in json.dumps(json.loads(body))
        db.session.rollback()
        assert receiver.url not in json.dumps([c.target for c in db.session.scalars(select(AlertChannel))])
    finally:
        receiver.close()


@pytest.mark.parametrize(
    ("target", "complaint"),
    [("env:DATABASE_URL", "Cronwell's own credentials"), ("env:SECRET_KEY", "own credentials"), ("env:1-bad", "name")],
)
def test_an_env_target_naming_cronwells_secrets_or_nothing_is_refused(app, target, complaint):
    with pytest.raises(ValidationFailed) as refused:
        add(target, kind="webhook")
    assert complaint in refused.value.errors["target"]
    db.session.rollback()
    assert db.session.scalars(select(AlertChannel)).all() == []


def test_an_env_target_holding_a_malformed_url_fails_its_own_delivery_and_the_others_go_out(app, monkeypatch):
    receiver = Receiver()
    try:
        for name, target in (("broken", "env:OPS_BROKEN_URL"), ("good", receiver.url)):
            alert_channels.add_channel(
                {"name": name, "kind": "slack", "target": target}, now=NOW - timedelta(hours=1), actor="test"
            )
        make_alert(make_job("backup", now=NOW), message="disk full", now=NOW)
        monkeypatch.setenv("OPS_BROKEN_URL", "https://[hooks.example.com/services/T0/B0/XXXX")  # an unclosed [
        settings = {**app.config, "ALERT_DELIVERY_TIMEOUT_SECONDS": 5, "ALERT_DELIVERY_MAX_ATTEMPTS": 2}
        assert DeliveryLoop(db.engine, settings).run_once(NOW) == {
            "queued": 2,
            "delivered": 1,
            "retrying": 1,
            "failed": 0,
        }
        assert len(receiver.requests) == 1
        db.session.rollback()
        by_channel = {d.channel.name: d for d in db.session.scalars(select(AlertDelivery))}
        assert by_channel["good"].status == "delivered"
        broken = by_channel["broken"]
        assert (broken.status, broken.attempts) == ("pending", 1)
        assert broken.last_error == "channel 'broken': environment variable OPS_BROKEN_URL holds an invalid URL"
        assert "hooks.example.com" not in broken.last_error  # the URL is the channel's secret
        # Retried like any delivery, then failed for good at the last attempt.
        assert DeliveryLoop(db.engine, settings).run_once(NOW + timedelta(hours=1))["failed"] == 1
        db.session.rollback()
        broken = db.session.get(AlertDelivery, broken.id)
        assert (broken.status, broken.attempts) == ("failed", 2)
        assert len(receiver.requests) == 1
    finally:
        receiver.close()
