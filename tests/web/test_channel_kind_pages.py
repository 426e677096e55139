"""The channel pages offer Slack and Teams, and never show a channel URL in full once created."""

from __future__ import annotations

from sqlalchemy import select

from app.extensions import db
from app.models import AlertChannel
from tests.helpers.web import signed_in_client

SLACK_URL = "https://hooks.slack.com/services/T0SECRET/B0SECRET/abcdEFGHsecret9876"


def test_a_slack_channel_is_created_from_the_form_and_its_url_is_masked_on_every_page(app):
    client = signed_in_client(app, role="admin")
    form = client.get("/alerts/channels/new").get_data(as_text=True)
    assert all(f'value="{kind}"' in form for kind in ("webhook", "slack", "teams", "email"))

    created = client.post(
        "/alerts/channels/new",
        {"name": "ops-slack", "kind": "slack", "target": SLACK_URL, "kinds": ""},
        follow_redirects=True,
    )
    assert created.status_code == 200
    channel = db.session.scalar(select(AlertChannel))
    assert (channel.kind, channel.target) == ("slack", SLACK_URL)
    for page in (created, client.get("/alerts/channels"), client.get(f"/alerts/channels/{channel.id}")):
        body = page.get_data(as_text=True)
        assert "T0SECRET" not in body and "hooks.slack.com/…9876" in body


def test_a_teams_channel_needs_a_url(app):
    client = signed_in_client(app, role="admin")
    refused = client.post("/alerts/channels/new", {"name": "t", "kind": "teams", "target": "not a url", "kinds": ""})
    assert refused.status_code == 400 and "a teams channel needs an http:// or https:// URL" in refused.get_data(
        as_text=True
    )
    assert db.session.scalar(select(AlertChannel.id)) is None
