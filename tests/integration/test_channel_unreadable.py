"""Channels whose stored URL or secret no listed key opens (sealed under a replaced
CHANNEL_SECRET_KEY, or damaged), on both databases: they still list and read, marked with why and
what to do; a delivery to one fails at once with that reason while the loop sends everyone else's;
an edit of their other fields and a reseal leave the stored values exactly as they were (so the
old key still opens them), and setting the URL again repairs the channel."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.models import AlertDelivery
from app.secret_box import is_unreadable
from app.services.engine.deliveries import DeliveryLoop
from app.services.use_cases import alert_channels
from tests.factories import make_alert, make_job, utc
from tests.helpers.channel_keys import OTHER_KEY, channel_key, damage, stored
from tests.helpers.databases import CHANNEL_SECRET_KEY
from tests.helpers.webhooks import Receiver, signature_ok

NOW = utc(2026, 6, 1, 12, 0)
HINT = "stored with a different CHANNEL_SECRET_KEY"


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.close()


def add_webhook(name: str, url: str, secret: str = "s3cret"):
    return alert_channels.add_channel(
        {"name": name, "kind": "webhook", "target": url, "secret": secret}, now=NOW, actor="t"
    )


def deliver(app) -> dict:
    return DeliveryLoop(db.engine, {**app.config, "ALERT_DELIVERY_TIMEOUT_SECONDS": 5}).run_once(NOW)


def deliveries_of(channel_id: int) -> list[AlertDelivery]:
    db.session.rollback()
    return list(db.session.query(AlertDelivery).filter_by(channel_id=channel_id).order_by(AlertDelivery.id))


def test_under_another_key_a_channel_lists_and_reads_marked_unreadable(app):
    webhook = add_webhook("ops", "https://hooks.example.com/secret-path")
    email = alert_channels.add_channel(
        {"name": "desk", "kind": "email", "target": "desk@example.com"}, now=NOW, actor="t"
    )
    rows = {webhook.id: stored(webhook.id), email.id: stored(email.id)}
    with channel_key(app, OTHER_KEY):
        listed = {c.name: alert_channels.channel_to_dict(c) for c in alert_channels.list_channels()}
        assert listed["ops"]["target"] == "(unreadable)" and listed["desk"]["target"] == "(unreadable)"
        assert listed["ops"]["unreadable"].startswith("the URL and the signing secret cannot be decrypted: ")
        assert HINT in listed["ops"]["unreadable"] and "set them again" in listed["ops"]["unreadable"]
        assert listed["desk"]["unreadable"].startswith("the address cannot be decrypted: ")
        assert "set it again" in listed["desk"]["unreadable"]
        assert is_unreadable(alert_channels.get_channel(webhook.id).target)
    assert {channel_id: stored(channel_id) for channel_id in rows} == rows  # reading changed nothing
    assert alert_channels.get_channel(webhook.id).unreadable is None  # the right key opens them again
    assert alert_channels.get_channel(webhook.id).target == "https://hooks.example.com/secret-path"


def test_a_damaged_secret_alone_is_named(app):
    channel = add_webhook("ops", "https://hooks.example.com/secret-path")
    damage(channel.id, "secret")
    shown = alert_channels.channel_to_dict(alert_channels.get_channel(channel.id))
    assert shown["target"] == "https://hooks.example.com/…path"
    assert shown["unreadable"].startswith("the signing secret cannot be decrypted: ")


def test_a_delivery_to_an_unreadable_channel_fails_at_once_and_the_loop_sends_the_others(app, receiver):
    broken = add_webhook("broken", receiver.url + "/broken")
    healthy = add_webhook("healthy", receiver.url + "/healthy", secret="healthy-secret")
    damaged = damage(broken.id)
    make_alert(make_job(now=NOW), message="it broke", now=NOW)
    db.session.commit()

    assert deliver(app) == {"queued": 2, "delivered": 1, "retrying": 0, "failed": 1}
    [(headers, body)] = receiver.requests  # the healthy channel's, signed with its own secret
    assert signature_ok("healthy-secret", headers, body)
    [failed] = deliveries_of(broken.id)
    assert (failed.status, failed.attempts, failed.response_status) == ("failed", 1, None)
    assert failed.last_error.startswith("not sent: the URL cannot be decrypted: ") and HINT in failed.last_error
    assert [d.status for d in deliveries_of(healthy.id)] == ["delivered"]
    assert stored(broken.id)["target"] == damaged

    # Failed for good: the next passes do not try it again.
    assert deliver(app) == {"queued": 0, "delivered": 0, "retrying": 0, "failed": 0}
    assert deliveries_of(broken.id)[0].attempts == 1


def test_after_a_key_replacement_the_loop_fails_every_delivery_without_crashing(app, receiver):
    channel = add_webhook("ops", receiver.url)
    make_alert(make_job(now=NOW), message="it broke", now=NOW)
    db.session.commit()
    with channel_key(app, OTHER_KEY):
        assert deliver(app) == {"queued": 1, "delivered": 0, "retrying": 0, "failed": 1}
    assert receiver.requests == []
    [failed] = deliveries_of(channel.id)
    assert "the URL and the signing secret cannot be decrypted" in failed.last_error


def test_a_test_send_to_an_unreadable_channel_fails_with_the_reason(app, receiver):
    from app.services.engine import deliveries

    channel = add_webhook("ops", receiver.url)
    damage(channel.id)
    delivery = alert_channels.send_test(channel.id, now=NOW, actor="t")
    assert deliveries.send_now(db.engine, delivery.id, now=NOW, settings=app.config) == "failed"
    [sent] = deliveries_of(channel.id)
    assert sent.status == "failed" and "the URL cannot be decrypted" in sent.last_error
    assert receiver.requests == []


def test_editing_other_fields_keeps_the_stored_values_and_setting_them_again_repairs(app, receiver):
    channel = add_webhook("ops", "https://hooks.example.com/secret-path")
    before = stored(channel.id)
    with channel_key(app, OTHER_KEY):
        alert_channels.change_channel(
            channel.id, {"name": "ops-renamed", "kinds": ["dead_letter"], "enabled": False}, now=NOW, actor="t"
        )
        alert_channels.update_channel(channel.id, {"group_minutes": 30}, now=NOW, actor="t")
        alert_channels.edit_channel(channel.id, {"name": "ops-again", "target": "", "secret": ""}, now=NOW, actor="t")
        after = stored(channel.id)
        assert (after["name"], after["enabled"], after["group_seconds"]) == ("ops-again", False, 1800)
        assert (after["target"], after["secret"]) == (before["target"], before["secret"])  # byte for byte
    # The key they were sealed with still opens them: nothing was lost.
    reread = alert_channels.get_channel(channel.id)
    assert (reread.target, reread.secret, reread.unreadable) == (
        "https://hooks.example.com/secret-path",
        "s3cret",
        None,
    )

    with channel_key(app, OTHER_KEY):
        alert_channels.change_channel(
            channel.id, {"target": receiver.url, "secret": "new-secret", "enabled": True}, now=NOW, actor="t"
        )
        repaired = alert_channels.get_channel(channel.id)
        assert repaired.unreadable is None and repaired.target == receiver.url
        make_alert(make_job(now=NOW), message="it broke", now=NOW)
        db.session.commit()
        assert deliver(app)["delivered"] == 1
    assert signature_ok("new-secret", *receiver.requests[0])


def test_reseal_leaves_an_unreadable_channel_as_stored_and_names_it(app):
    readable = add_webhook("fine", "https://hooks.example.com/fine")
    broken = add_webhook("broken", "https://hooks.example.com/broken")
    damaged = damage(broken.id)
    before_broken, before_fine = stored(broken.id), stored(readable.id)
    with channel_key(app, f"{OTHER_KEY},{CHANNEL_SECRET_KEY}"):
        result = app.test_cli_runner().invoke(args=["channel", "reseal"])
        assert result.exit_code == 1, result.output
        assert result.stdout == "Resealed 1 channel(s) with the first CHANNEL_SECRET_KEY\n"
        [line] = result.stderr.splitlines()
        assert line.startswith("Error: left as stored, no listed key opens them: 'broken';"), line
        assert stored(broken.id) == before_broken and stored(broken.id)["target"] == damaged
        resealed = stored(readable.id)
        assert resealed["target"] != before_fine["target"]
    with channel_key(app, OTHER_KEY):  # the readable one is under the new key alone now
        assert alert_channels.get_channel(readable.id).target == "https://hooks.example.com/fine"
