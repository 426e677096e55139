"""Real processes: `flask scheduler run` delivers a signed webhook from its delivery thread, and a
delivery cut off by a killed scheduler is sent by the next one (nothing lost across a restart)."""

from __future__ import annotations

import json
import signal
import threading
from datetime import timedelta

import pytest
from sqlalchemy import text

from app.clock import utcnow
from app.extensions import db
from app.services.use_cases import alert_channels
from tests.factories import make_alert, make_job
from tests.helpers.processes import wait_for
from tests.helpers.webhooks import Receiver, signature_ok

pytestmark = pytest.mark.slow

FAST = {"ALERT_DELIVERY_TIMEOUT_SECONDS": "1", "ALERT_DELIVERY_BACKOFF_SECONDS": "1", "SCHEDULER_TICK_SECONDS": "1"}


def delivery_state():
    with db.engine.connect() as conn:
        return conn.execute(text("SELECT status, attempts FROM alert_deliveries")).all()


def test_a_killed_scheduler_loses_no_delivery(app, flask_processes):
    hold = threading.Event()
    receiver = Receiver(hold=hold)
    try:
        now = utcnow()
        alert_channels.add_channel(
            {"name": "ops", "kind": "webhook", "target": receiver.url, "secret": "s3cret"},
            now=now - timedelta(minutes=1),
            actor="test",
        )
        alert = make_alert(make_job(now=now), message="process test", now=now)
        db.session.commit()

        first = flask_processes.start("scheduler", "run", "--scheduler-id", "first", env=FAST)
        wait_for(lambda: receiver.requests, within=20, what=lambda: "first request; " + first.describe())
        first.signal(signal.SIGKILL)  # mid-request: the delivery was taken, its result never recorded
        first.wait_exit(10)
        hold.set()
        assert delivery_state() == [("pending", 0)]

        second = flask_processes.start("scheduler", "run", "--scheduler-id", "second", env=FAST)
        wait_for(
            lambda: delivery_state() == [("delivered", 1)],
            within=30,
            what=lambda: f"redelivery ({delivery_state()}); " + second.describe(),
        )
        second.signal(signal.SIGTERM)
        second.wait_exit(20)
    finally:
        receiver.close()
    assert len(receiver.requests) == 2  # the cut-off try and the redelivery: at least once, never lost
    headers, body = receiver.requests[-1]
    assert signature_ok("s3cret", headers, body)
    assert json.loads(body)["alert"]["id"] == alert.id
