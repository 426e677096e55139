"""Email alert channel: delivered to a loopback SMTP server started by the test (aiosmtpd)."""

from __future__ import annotations

import email
from datetime import timedelta

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import AlertDelivery
from app.services.engine.deliveries import DeliveryLoop
from app.services.use_cases import alert_channels
from tests.factories import make_alert, make_job, utc
from tests.helpers.servers import free_port

aiosmtpd = pytest.importorskip("aiosmtpd.controller")
NOW = utc(2026, 6, 1, 12, 0)


class Inbox:
    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
        self.messages.append((envelope.rcpt_tos, envelope.content))
        return "250 OK"


def test_email_alert_reaches_the_smtp_server(app):
    inbox = Inbox()
    port = free_port()
    controller = aiosmtpd.Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        alert_channels.add_channel(
            {"name": "mail", "kind": "email", "target": "oncall@example.com"}, now=NOW - timedelta(hours=1), actor="t"
        )
        make_alert(make_job(now=NOW), message="disk full", kind="dead_letter", now=NOW)
        db.session.commit()
        settings = {**app.config, "SMTP_HOST": "127.0.0.1", "SMTP_PORT": port, "SMTP_FROM": "cronwell@example.com"}
        assert DeliveryLoop(db.engine, settings).run_once(NOW)["delivered"] == 1
    finally:
        controller.stop()
    [(recipients, content)] = inbox.messages
    message = email.message_from_bytes(content)
    assert recipients == ["oncall@example.com"] and message["From"] == "cronwell@example.com"
    assert "dead_letter" in message["Subject"] and "disk full" in message["Subject"]
    db.session.rollback()
    [row] = db.session.scalars(select(AlertDelivery)).all()
    assert row.status == "delivered" and row.response_status == 250
