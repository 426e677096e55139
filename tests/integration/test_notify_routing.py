"""Notification routing end to end with an injected clock: a loopback receiver plays the webhook,
runs are rows, the alert pass (with its notice pass) and the delivery loop are plain calls.

Failure then recovery is two messages and closes the open alert; twenty failures are one message
that counts them; a quiet window holds messages until it ends; a job's override beats its
project's default; successes notify only when asked; mail goes through a loopback SMTP server."""

from __future__ import annotations

import email
import json
from datetime import timedelta

import jsonschema
import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import Alert, AlertDelivery, Job, Notice
from app.services.engine.deliveries import DeliveryLoop
from app.services.engine.scheduler import Scheduler
from app.services.use_cases import alert_channels, notify_routes
from tests.factories import make_alert, make_execution, make_job, utc
from tests.helpers.message_schemas import WEBHOOK
from tests.helpers.servers import free_port
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


def evaluate(app, now):
    return Scheduler(app, scheduler_id="notify-test", clock=lambda: now).evaluate_alerts(now)


def deliver(app, now, **extra):
    db.session.rollback()
    settings = {**app.config, "ALERT_DELIVERY_TIMEOUT_SECONDS": 5, **extra}
    return DeliveryLoop(db.engine, settings).run_once(now)


def messages(receiver):
    """The documents received, each checked against its kind's schema and signature."""
    documents = []
    for headers, body in receiver.requests:
        assert signature_ok("s3cret", headers, body)
        document = json.loads(body)
        jsonschema.validate(document, WEBHOOK[document["type"]])
        documents.append(document)
    return documents


def run(job, status, at, error=""):
    db.session.rollback()  # a fresh snapshot: the passes wrote on their own connections
    return make_execution(db.session.get(Job, job.id), status, now=at, error=error)


def test_failure_then_recovery_is_two_messages_and_closes_the_open_alert(app, receiver):
    webhook(receiver)
    notify_routes.set_project_routing({"events": "failure,recovery"}, now=NOW, actor="test")
    job = make_job("nightly", now=NOW)
    evaluate(app, NOW)  # the notice pass starts reading here
    failed = run(job, "failed", NOW + timedelta(minutes=1), error="disk full\nTraceback ...")
    alert = make_alert(db.session.get(Job, job.id), failed, "failed for good", now=NOW + timedelta(minutes=1))
    assert evaluate(app, NOW + timedelta(minutes=1, seconds=5)).notices == [f"failure:execution:{failed.id}"]
    assert deliver(app, NOW + timedelta(minutes=1, seconds=6))["delivered"] == 1
    succeeded = run(job, "succeeded", NOW + timedelta(minutes=2))
    report = evaluate(app, NOW + timedelta(minutes=2, seconds=5))
    assert report.notices == [f"recovery:execution:{succeeded.id}"]
    assert deliver(app, NOW + timedelta(minutes=2, seconds=6))["delivered"] == 1

    failure, recovery = [m["notice"] for m in messages(receiver)]
    assert failure["event"] == "failure" and failure["execution_id"] == failed.id and failure["count"] == 1
    assert "disk full Traceback" in failure["message"] and failure["job_name"] == "nightly"
    assert recovery["event"] == "recovery" and recovery["execution_id"] == succeeded.id
    assert recovery["closed_alert_ids"] == [alert.id]
    db.session.rollback()
    closed = db.session.get(Alert, alert.id)
    assert closed.resolved_at is not None and closed.resolved_by == "system"
    # Passes that read the same runs again raise nothing more, and a later success is no recovery.
    assert evaluate(app, NOW + timedelta(minutes=2, seconds=30)).notices == []
    run(job, "succeeded", NOW + timedelta(minutes=3))
    assert evaluate(app, NOW + timedelta(minutes=3, seconds=5)).notices == []
    assert deliver(app, NOW + timedelta(minutes=3, seconds=6))["delivered"] == 0 and len(receiver.requests) == 2


def test_an_overdue_job_that_succeeds_recovers_and_its_alert_closes(app, receiver):
    webhook(receiver)
    job = make_job("heartbeat", now=NOW, expect_success_within_seconds=300)
    evaluate(app, NOW)
    evaluate(app, NOW + timedelta(minutes=6))
    [overdue] = db.session.scalars(select(Alert).where(Alert.kind == "overdue")).all()
    deliver(app, NOW + timedelta(minutes=6, seconds=1))
    succeeded = run(job, "succeeded", NOW + timedelta(minutes=7))
    assert evaluate(app, NOW + timedelta(minutes=7, seconds=5)).notices == [f"recovery:execution:{succeeded.id}"]
    deliver(app, NOW + timedelta(minutes=7, seconds=6))
    kinds = [m["alert"]["kind"] if m["type"] == "alert" else m["notice"]["event"] for m in messages(receiver)]
    assert kinds == ["overdue", "recovery"]  # the default routing: dead letters, overdue, recovery
    assert messages(receiver)[1]["notice"]["closed_alert_ids"] == [overdue.id]
    db.session.rollback()
    assert db.session.get(Alert, overdue.id).resolved_by == "system"


def test_twenty_failures_are_one_message_that_counts_them(app, receiver):
    webhook(receiver)
    notify_routes.set_project_routing({"events": ["failure"]}, now=NOW, actor="test")
    job = make_job("flaky", now=NOW)
    evaluate(app, NOW)
    for n in range(20):
        run(job, "failed", NOW + timedelta(seconds=10 + n))
    report = evaluate(app, NOW + timedelta(seconds=40))
    assert len(report.notices) == 20
    assert deliver(app, NOW + timedelta(seconds=41))["delivered"] == 1
    [message] = messages(receiver)
    assert message["notice"]["count"] == 20
    assert message["notice"]["first_at"] == "2026-06-01T12:00:10Z"
    assert message["notice"]["created_at"] == "2026-06-01T12:00:29Z"
    # Within ten minutes of that message, more failures wait for the window and are counted.
    for n in range(3):
        run(job, "failed", NOW + timedelta(minutes=2, seconds=n))
    evaluate(app, NOW + timedelta(minutes=2, seconds=10))
    assert deliver(app, NOW + timedelta(minutes=5))["delivered"] == 0
    [held] = db.session.scalars(select(AlertDelivery).where(AlertDelivery.status == "pending")).all()
    assert held.grouped == 3 and held.next_attempt_at == NOW + timedelta(seconds=41, minutes=10)
    assert deliver(app, NOW + timedelta(seconds=41, minutes=10))["delivered"] == 1
    assert [m["notice"]["count"] for m in messages(receiver)] == [20, 3]
    assert db.session.query(Notice).count() == 23  # every failure is a notice; two messages told of them


def test_a_channel_without_grouping_sends_each_failure(app, receiver):
    webhook(receiver, group_minutes=0)
    notify_routes.set_project_routing({"events": "failure"}, now=NOW, actor="test")
    job = make_job(now=NOW)
    evaluate(app, NOW)
    for n in range(3):
        run(job, "failed", NOW + timedelta(seconds=10 + n))
    evaluate(app, NOW + timedelta(seconds=20))
    assert deliver(app, NOW + timedelta(seconds=21))["delivered"] == 3


def test_a_quiet_window_holds_messages_until_it_ends(app, receiver):
    night = utc(2026, 6, 1, 23, 0)
    channel = webhook(receiver, quiet="22:00-07:00", quiet_timezone="Europe/Paris")
    notify_routes.set_project_routing({"events": "failure,dead_letter"}, now=night, actor="test")
    job = make_job("nightly", now=night)
    evaluate(app, night)
    run(job, "failed", night + timedelta(minutes=1))
    make_alert(db.session.get(Job, job.id), message="dead letter", now=night + timedelta(minutes=1))
    evaluate(app, night + timedelta(minutes=1, seconds=5))
    assert deliver(app, night + timedelta(minutes=2))["delivered"] == 0
    morning = utc(2026, 6, 2, 5, 0)  # 07:00 in Paris (UTC+2 in June)
    due = db.session.scalars(select(AlertDelivery.next_attempt_at).where(AlertDelivery.channel_id == channel.id))
    assert sorted(due) == [morning, morning]
    assert deliver(app, morning - timedelta(seconds=1))["delivered"] == 0 and receiver.requests == []
    assert deliver(app, morning)["delivered"] == 2
    assert sorted(m["type"] for m in messages(receiver)) == ["alert", "notice"]


def test_a_jobs_override_beats_its_projects_default(app, receiver):
    other = Receiver()
    try:
        webhook(receiver, name="team")
        alert_channels.add_channel(
            {"name": "owner", "kind": "webhook", "target": other.url, "secret": "s3cret"},
            now=NOW - timedelta(hours=1),
            actor="test",
        )
        notify_routes.set_project_routing({"events": "failure", "channels": ["team"]}, now=NOW, actor="test")
        plain = make_job("plain", now=NOW)
        special = make_job("special", now=NOW)
        shown = notify_routes.set_job_routing(
            special.id, {"events": "failure,recovery", "channels": "owner"}, now=NOW, actor="test"
        )
        assert shown["effective"] == {"events": ["failure", "recovery"], "channels": ["owner"], "source": "job"}
        evaluate(app, NOW)
        run(plain, "failed", NOW + timedelta(seconds=10))
        run(special, "failed", NOW + timedelta(seconds=11))
        run(special, "succeeded", NOW + timedelta(seconds=12))
        evaluate(app, NOW + timedelta(seconds=20))
        deliver(app, NOW + timedelta(seconds=21))
        team = [(m["notice"]["job_name"], m["notice"]["event"]) for m in messages(receiver)]
        owner = [json.loads(body)["notice"] for _, body in other.requests]
        assert team == [("plain", "failure")]
        assert [(n["job_name"], n["event"]) for n in owner] == [("special", "failure"), ("special", "recovery")]
        # Dropping the override: the job follows its project again.
        back = notify_routes.set_job_routing(special.id, None, now=NOW, actor="test")
        assert back["override"] is None and back["effective"]["channels"] == ["team"]
    finally:
        other.close()


def test_successes_are_notified_only_when_asked(app, receiver):
    webhook(receiver)
    job = make_job("hourly", now=NOW)
    evaluate(app, NOW)
    run(job, "succeeded", NOW + timedelta(seconds=10))
    assert evaluate(app, NOW + timedelta(seconds=20)).notices == []
    evaluate(app, NOW + timedelta(seconds=90))  # past the re-read of the first run
    notify_routes.set_job_routing(job.id, {"events": ["success"]}, now=NOW, actor="test")
    done = run(job, "succeeded", NOW + timedelta(seconds=100))
    assert evaluate(app, NOW + timedelta(seconds=110)).notices == [f"success:execution:{done.id}"]
    deliver(app, NOW + timedelta(seconds=111))
    [message] = messages(receiver)
    assert message["notice"]["event"] == "success" and message["notice"]["execution_id"] == done.id


def test_nothing_is_noticed_with_routing_set_to_none(app, receiver):
    webhook(receiver)
    notify_routes.set_project_routing({"events": "none"}, now=NOW, actor="test")
    job = make_job(now=NOW)
    evaluate(app, NOW)
    run(job, "failed", NOW + timedelta(seconds=10))
    make_alert(db.session.get(Job, job.id), now=NOW + timedelta(seconds=10))
    evaluate(app, NOW + timedelta(seconds=20))
    assert deliver(app, NOW + timedelta(seconds=21))["delivered"] == 0


def test_a_failure_notice_by_email_through_a_loopback_smtp_server(app):
    controller_module = pytest.importorskip("aiosmtpd.controller")
    inbox = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
            inbox.append(envelope.content)
            return "250 OK"

    port = free_port()
    controller = controller_module.Controller(Handler(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        alert_channels.add_channel(
            {"name": "mail", "kind": "email", "target": "oncall@example.com"}, now=NOW - timedelta(hours=1), actor="t"
        )
        notify_routes.set_project_routing({"events": "failure"}, now=NOW, actor="test")
        job = make_job("backup", now=NOW)
        evaluate(app, NOW)
        for n in range(2):
            run(job, "failed", NOW + timedelta(seconds=10 + n), error="disk <full>")
        evaluate(app, NOW + timedelta(seconds=20))
        assert deliver(app, NOW + timedelta(seconds=21), SMTP_HOST="127.0.0.1", SMTP_PORT=port)["delivered"] == 1
    finally:
        controller.stop()
    [content] = inbox
    parts = {
        part.get_content_type(): part.get_payload(decode=True).decode()
        for part in email.message_from_bytes(content).walk()
        if not part.is_multipart()
    }
    assert "Job: backup" in parts["text/plain"] and "Count: 2" in parts["text/plain"]
    assert "disk &lt;full&gt;" in parts["text/html"]


def test_a_muted_jobs_failures_are_recorded_but_not_sent(app, receiver):
    from app.services.use_cases import alert_mutes

    webhook(receiver)
    notify_routes.set_project_routing({"events": "failure,recovery"}, now=NOW, actor="test")
    job = make_job("noisy", now=NOW)
    alert_mutes.mute(job.id, hours=1, now=NOW, actor="test")
    evaluate(app, NOW)
    failed = run(job, "failed", NOW + timedelta(seconds=10))
    assert evaluate(app, NOW + timedelta(seconds=20)).notices == [f"failure:execution:{failed.id}"]
    assert deliver(app, NOW + timedelta(seconds=21))["delivered"] == 0 and receiver.requests == []
