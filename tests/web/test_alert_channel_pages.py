"""Alert channel pages and CLI: create (errors inline), send test, the delivery log, delete."""

from __future__ import annotations

import json

from sqlalchemy import select

from app.extensions import db
from app.models import AlertChannel, AlertDelivery
from tests.helpers.cli import assert_error, assert_usage_error, ok
from tests.helpers.web import signed_in_client


def test_create_send_test_and_log(app):
    client = signed_in_client(app, role="admin")
    bad = client.post("/alerts/channels/new", {"name": "ops", "kind": "webhook", "target": "ftp://x", "kinds": ""})
    assert bad.status_code == 400 and "http:// or https://" in bad.get_data(as_text=True)
    created = client.post(
        "/alerts/channels/new",
        {"name": "ops", "kind": "webhook", "target": "http://127.0.0.1:9/hook", "kinds": "overdue, dead_letter"},
        follow_redirects=True,
    )
    body = created.get_data(as_text=True)
    assert created.status_code == 200 and "signing secret (shown once)" in body
    channel = db.session.scalar(select(AlertChannel))
    assert channel.kinds == ["overdue", "dead_letter"] and channel.secret
    tested = client.post(f"/alerts/channels/{channel.id}/test", follow_redirects=True)
    # Sent at once to a closed loopback port: the page says it failed and why; it stays to retry.
    shown = tested.get_data(as_text=True)
    assert tested.status_code == 200 and "Test message not delivered" in shown and "it will be retried" in shown
    db.session.rollback()
    [delivery] = db.session.scalars(select(AlertDelivery)).all()
    assert delivery.kind == "test" and delivery.status == "pending" and delivery.attempts == 1
    page = client.get(f"/alerts/channels/{channel.id}")
    assert "delivery-pending" in page.get_data(as_text=True)
    assert client.post(f"/alerts/channels/{channel.id}/test", csrf=False).status_code in (400, 403)


def test_viewer_reads_but_cannot_create(app):
    client = signed_in_client(app, role="viewer")
    assert client.get("/alerts/channels").status_code == 200
    refused = client.post("/alerts/channels/new", {"name": "x", "kind": "email", "target": "a@example.com"})
    assert refused.status_code == 403


def test_cli_channel_add_list_test_deliveries_delete(cli):
    doc = json.loads(ok(cli("alerts", "channel", "add", "ops", "--webhook", "https://example.com/h", "--json")))
    assert doc["secret"] and doc["kinds"] == []
    ok(cli("alerts", "channel", "add", "mail", "--email", "oncall@example.com", "--kinds", "overdue"))
    listed = json.loads(ok(cli("alerts", "channel", "list", "--json")))
    assert [c["name"] for c in listed] == ["ops", "mail"] and "secret" not in listed[0]
    test = json.loads(ok(cli("alerts", "channel", "test", doc["id"], "--json")))
    assert test["kind"] == "test" and test["status"] == "pending"
    log = json.loads(ok(cli("alerts", "deliveries", "--json")))
    assert [d["id"] for d in log] == [test["id"]]
    assert_usage_error(cli("alerts", "channel", "add", "x"))
    assert_error(cli("alerts", "channel", "add", "y", "--email", "not-an-address"), "email address")
    assert_error(cli("alerts", "channel", "add", "z", "--webhook", "https://e.com", "--kinds", "nope"), "unknown")
    assert_error(cli("alerts", "channel", "delete", doc["id"]), "--yes")
    ok(cli("alerts", "channel", "delete", doc["id"], "--yes"))
    assert_error(cli("alerts", "channel", "test", doc["id"]), "does not exist")


def test_channel_changes_are_in_the_audit_log(cli):
    from app.models import AuditEvent

    doc = json.loads(ok(cli("alerts", "channel", "add", "ops", "--webhook", "https://example.com/h", "--json")))
    ok(cli("alerts", "channel", "delete", doc["id"], "--yes"))
    db.session.rollback()
    rows = db.session.scalars(select(AuditEvent).where(AuditEvent.object_kind == "channel")).all()
    assert [r.action for r in rows] == ["created", "deleted"]
    assert doc["secret"] not in json.dumps([r.changes for r in rows], default=str)  # never the secret itself


def test_an_admin_edits_a_channel_on_the_web_keeping_what_is_left_empty(app):
    from app.clock import utcnow
    from app.extensions import db
    from app.models import AlertChannel
    from app.services.use_cases import alert_channels
    from tests.helpers.web import signed_in_client

    channel = alert_channels.add_channel(
        {"name": "ops", "kind": "webhook", "target": "https://hooks.example.com/secret-path", "kinds": []},
        now=utcnow(),
        actor="test",
    )
    secret = channel.secret
    admin = signed_in_client(app, "admin")
    form = admin.get(f"/alerts/channels/{channel.id}/edit").get_data(as_text=True)
    assert 'value="ops"' in form and "secret-path" not in form
    response = admin.post(
        f"/alerts/channels/{channel.id}/edit", {"name": "ops-renamed", "kinds": "dead_letter", "target": ""}
    )
    assert response.status_code == 303, response.get_data(as_text=True)
    db.session.rollback()
    stored = db.session.get(AlertChannel, channel.id)
    assert (stored.name, stored.kinds, stored.target, stored.secret) == (
        "ops-renamed",
        ["dead_letter"],
        "https://hooks.example.com/secret-path",
        secret,
    )
    bad = admin.post(f"/alerts/channels/{channel.id}/edit", {"name": "", "kinds": "nonsense"})
    assert bad.status_code == 400 and "unknown kind(s) nonsense" in bad.get_data(as_text=True)
    assert signed_in_client(app, "operator").get(f"/alerts/channels/{channel.id}/edit").status_code == 403
