"""Channels whose stored URL or secret cannot be decrypted, on the web and in the CLI: the pages
show them with "(unreadable)" and what to do (never a 500); the edit form repairs them and an
edit of the other fields keeps the stored values; a send test fails with the reason; `flask
channel list` (and `flask alerts channel list`) still list them but say so in one line on stderr
and exit 1, and `flask channel test` fails in one line."""

from __future__ import annotations

import json

from app.extensions import db
from app.models import AlertDelivery
from app.services.use_cases import alert_channels
from tests.factories import utc
from tests.helpers.channel_keys import OTHER_KEY, channel_key, damage, stored
from tests.helpers.cli import assert_error
from tests.helpers.web import signed_in_client

NOW = utc(2026, 6, 1, 12, 0)
URL = "https://hooks.example.com/cronwell/very-secret-path"
HINT = "stored with a different CHANNEL_SECRET_KEY"


def add(name: str = "broken", url: str = URL):
    return alert_channels.add_channel({"name": name, "kind": "webhook", "target": url}, now=NOW, actor="t")


def test_the_pages_show_an_unreadable_channel_with_what_to_do(app):
    channel = add()
    add("fine", "https://hooks.example.com/fine")
    damage(channel.id)
    admin = signed_in_client(app, "admin")
    listing = admin.get("/alerts/channels")
    body = listing.get_data(as_text=True)
    assert listing.status_code == 200 and "(unreadable)" in body and "hooks.example.com/…fine" in body
    assert "the URL cannot be decrypted" in body and HINT in body
    detail = admin.get(f"/alerts/channels/{channel.id}")
    shown = detail.get_data(as_text=True)
    assert detail.status_code == 200 and "This channel cannot send: the URL cannot be decrypted" in shown
    assert f"/alerts/channels/{channel.id}/edit" in shown
    form = admin.get(f"/alerts/channels/{channel.id}/edit")
    assert form.status_code == 200 and HINT in form.get_data(as_text=True)
    viewer = signed_in_client(app, "viewer").get(f"/alerts/channels/{channel.id}")
    assert viewer.status_code == 200 and "(unreadable)" in viewer.get_data(as_text=True)


def test_the_edit_form_keeps_an_unreadable_value_unless_a_new_one_is_given(app):
    channel = add()
    admin = signed_in_client(app, "admin")
    with channel_key(app, OTHER_KEY):
        before = stored(channel.id)
        renamed = admin.post(f"/alerts/channels/{channel.id}/edit", {"name": "renamed", "target": "", "kinds": ""})
        assert renamed.status_code == 303, renamed.get_data(as_text=True)
        after = stored(channel.id)
        assert after["name"] == "renamed" and (after["target"], after["secret"]) == (before["target"], before["secret"])
        repaired = admin.post(
            f"/alerts/channels/{channel.id}/edit",
            {"name": "renamed", "target": "https://hooks.example.com/new", "secret": "new-secret", "kinds": ""},
        )
        assert repaired.status_code == 303, repaired.get_data(as_text=True)
        page = admin.get(f"/alerts/channels/{channel.id}").get_data(as_text=True)
        assert "cannot be decrypted" not in page and "hooks.example.com/…/new" in page


def test_a_send_test_on_the_web_says_why_it_failed(app):
    channel = add()
    damage(channel.id)
    operator = signed_in_client(app, "operator")
    tested = operator.post(f"/alerts/channels/{channel.id}/test", follow_redirects=True)
    shown = tested.get_data(as_text=True)
    assert tested.status_code == 200 and "Test message not delivered" in shown
    assert "not sent: the URL cannot be decrypted" in shown and "it will not be retried" in shown
    db.session.rollback()
    [delivery] = db.session.query(AlertDelivery).all()
    assert delivery.status == "failed" and HINT in delivery.last_error


def test_channel_list_lists_everything_then_fails_in_one_line(app, cli):
    channel = add()
    add("fine", "https://hooks.example.com/fine")
    damage(channel.id)
    listed = cli("channel", "list")
    assert listed.exit_code == 1
    assert "(unreadable)" in listed.stdout and "hooks.example.com/…fine" in listed.stdout
    [line] = listed.stderr.splitlines()
    assert line.startswith("Error: channel 'broken' (project 1): the URL cannot be decrypted: ") and HINT in line

    as_json = cli("channel", "list", "--json")
    assert as_json.exit_code == 1 and len(as_json.stderr.splitlines()) == 1
    documents = {c["name"]: c for c in json.loads(as_json.stdout)}
    assert documents["broken"]["target"] == "(unreadable)" and documents["fine"]["unreadable"] is None

    by_id = cli("alerts", "channel", "list")
    assert by_id.exit_code == 1 and "(unreadable)" in by_id.stdout
    assert by_id.stderr.splitlines() == [line]

    assert_error(cli("channel", "test", "broken"), "not delivered: not sent: the URL cannot be decrypted")


def test_after_a_key_replacement_the_list_names_every_channel_it_cannot_read(app, cli):
    add("a", "https://hooks.example.com/a")
    add("b", "https://hooks.example.com/b")
    with channel_key(app, OTHER_KEY):
        listed = cli("channel", "list")
    assert listed.exit_code == 1 and listed.stdout.count("(unreadable)") == 2
    [line] = listed.stderr.splitlines()
    assert line.startswith("Error: channels 'a' (project 1), 'b' (project 1): their URL") and "set them again" in line
    assert cli("channel", "list").exit_code == 0  # with the key that sealed them
