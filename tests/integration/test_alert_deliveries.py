"""Alert delivery to a loopback webhook receiver started by the test: the signature verifies,
a 500 is retried with backoff, the delivery log is right, nothing is lost across a restart."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import AlertDelivery
from app.services.engine import deliveries
from app.services.engine.deliveries import DeliveryLoop
from app.services.use_cases import alert_channels
from tests.factories import make_alert, make_job, utc
from tests.helpers.webhooks import Receiver, signature_ok

NOW = utc(2026, 6, 1, 12, 0)


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


def webhook(receiver, name="ops", **extra):
    data = {"name": name, "kind": "webhook", "target": receiver.url, "secret": "s3cret", **extra}
    return alert_channels.add_channel(data, now=NOW - timedelta(hours=1), actor="test")


def log_rows():
    db.session.rollback()
    return db.session.scalars(select(AlertDelivery).order_by(AlertDelivery.id)).all()


def loop(app):
    settings = {**app.config, "ALERT_DELIVERY_BACKOFF_SECONDS": 10, "ALERT_DELIVERY_TIMEOUT_SECONDS": 5}
    return DeliveryLoop(db.engine, settings)


def test_signed_delivery_retried_after_a_500(app, receiver):
    channel = webhook(receiver)
    alert = make_alert(make_job(now=NOW), message="it broke", now=NOW)
    db.session.commit()
    receiver.statuses = [500]
    first = loop(app).run_once(NOW)
    assert first == {"queued": 1, "delivered": 0, "retrying": 1, "failed": 0}
    [row] = log_rows()
    assert (row.status, row.attempts, row.response_status, row.last_error) == ("pending", 1, 500, "HTTP 500")
    assert row.next_attempt_at == NOW + timedelta(seconds=10)
    assert loop(app).run_once(NOW + timedelta(seconds=5)) == {"queued": 0, "delivered": 0, "retrying": 0, "failed": 0}
    assert loop(app).run_once(NOW + timedelta(seconds=11))["delivered"] == 1
    [row] = log_rows()
    assert (row.status, row.attempts, row.response_status, row.delivered_at) == (
        "delivered",
        2,
        200,
        NOW + timedelta(seconds=11),
    )
    assert len(receiver.requests) == 2
    headers, body = receiver.requests[-1]
    timestamp = headers["x-cronwell-timestamp"]
    assert signature_ok("s3cret", headers, body)
    assert not signature_ok("another secret", headers, body)
    assert timestamp == str(int((NOW + timedelta(seconds=11)).timestamp()))
    document = json.loads(body)
    assert document["alert"]["id"] == alert.id and document["alert"]["message"] == "it broke"
    assert channel.id == row.channel_id and loop(app).run_once(NOW + timedelta(minutes=5))["queued"] == 0


def test_nothing_lost_across_a_restart(app, receiver):
    webhook(receiver)
    make_alert(make_job(now=NOW), now=NOW)
    db.session.commit()
    # A loop queues the delivery, takes it, and dies before sending (no result recorded).
    with db.engine.begin() as conn:
        deliveries.fan_out(conn, now=NOW)
    taken = deliveries._take_due(db.engine, NOW, 10, timeout=5)
    assert len(taken) == 1 and receiver.requests == []
    # A new process a little later: the row is still pending and its claim has run out.
    assert loop(app).run_once(NOW + timedelta(seconds=1))["delivered"] == 0
    assert loop(app).run_once(NOW + timedelta(seconds=16))["delivered"] == 1
    [row] = log_rows()
    assert row.status == "delivered" and len(receiver.requests) == 1


def test_fails_for_good_after_max_attempts(app, receiver):
    webhook(receiver)
    make_alert(make_job(now=NOW), now=NOW)
    db.session.commit()
    receiver.statuses = [500] * 10
    settings = {**app.config, "ALERT_DELIVERY_MAX_ATTEMPTS": 2, "ALERT_DELIVERY_BACKOFF_SECONDS": 1}
    DeliveryLoop(db.engine, settings).run_once(NOW)
    assert DeliveryLoop(db.engine, settings).run_once(NOW + timedelta(seconds=2))["failed"] == 1
    [row] = log_rows()
    assert (row.status, row.attempts) == ("failed", 2)


def test_routing_by_kind_and_project_and_the_test_message(app, receiver):
    only_overdue = webhook(receiver, name="overdue-only", kinds=["overdue"])
    everything = webhook(receiver, name="everything")
    make_alert(make_job(now=NOW), kind="dead_letter", now=NOW)
    db.session.commit()
    loop(app).run_once(NOW)
    assert [(r.channel_id, r.kind) for r in log_rows()] == [(everything.id, "dead_letter")]
    alert_channels.send_test(only_overdue.id, now=NOW, actor="tester")
    assert loop(app).run_once(NOW)["delivered"] == 1
    headers, body = receiver.requests[-1]
    assert json.loads(body)["type"] == "test" and "tester" in json.loads(body)["message"]
    assert [r.kind for r in alert_channels.delivery_log(channel_id=only_overdue.id)] == ["test"]
