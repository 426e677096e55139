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
