"""The notification pages: a project's routing (admins change it, everyone signed in reads it), a
job's override from its page, a channel's grouping and quiet window, and a send test that shows
the delivery's result from a loopback receiver."""

from __future__ import annotations

from datetime import timedelta

from app.clock import utcnow
from app.extensions import db
from app.models import AlertChannel
from app.services.use_cases import alert_channels, notify_routes
from tests.factories import make_job
from tests.helpers.web import signed_in_client
from tests.helpers.webhooks import Receiver


def channel(name="ops", url="http://127.0.0.1:9/hook"):
    return alert_channels.add_channel(
        {"name": name, "kind": "webhook", "target": url}, now=utcnow() - timedelta(minutes=1), actor="t"
    )


def routing_of(job_id=None):
    db.session.rollback()  # a fresh snapshot: the requests wrote on their own
    return notify_routes.job_routing(job_id) if job_id else notify_routes.project_routing()


def test_an_admin_sets_the_project_routing_and_a_viewer_reads_it(app):
    channel("ops")
    channel("pager")
    admin = signed_in_client(app, role="admin")
    page = admin.get("/alerts/routing").get_data(as_text=True)
    assert 'data-source="default"' in page and "dead_letter" in page
    saved = admin.post(
        "/alerts/routing/save", {"events": ["failure", "recovery"], "channels": ["pager"]}, follow_redirects=True
    )
    body = saved.get_data(as_text=True)
    assert saved.status_code == 200 and "Notification routing of default/default saved." in body
    assert routing_of()["channels"] == ["pager"]
    refused = admin.post("/alerts/routing/save", {"events": ["explode"]})
    assert refused.status_code == 400 and "unknown event(s) explode" in refused.get_data(as_text=True)
    viewer = signed_in_client(app, role="viewer")
    assert "failure, recovery" in viewer.get("/alerts/routing").get_data(as_text=True)
    assert viewer.post("/alerts/routing/save", {"events": ["failure"]}).status_code == 403
    assert routing_of()["events"] == ["failure", "recovery"]


def test_a_jobs_override_from_its_page(app):
    channel("ops")
    job = make_job("nightly")
    operator = signed_in_client(app, role="operator")
    page = operator.get(f"/jobs/{job.id}").get_data(as_text=True)
    assert 'id="notify"' in page and "as its project does" in page
    operator.post(f"/alerts/jobs/{job.id}/notify", {"events": ["failure", "success"], "channels": ["ops"]})
    page = operator.get(f"/jobs/{job.id}").get_data(as_text=True)
    assert "by its own setting" in page and "failure, success" in page
    assert routing_of(job.id)["override"]["channels"] == ["ops"]
    operator.post(f"/alerts/jobs/{job.id}/notify", {"follow": "1"})
    assert routing_of(job.id)["override"] is None
    bad = operator.post(
        f"/alerts/jobs/{job.id}/notify", {"events": ["failure"], "channels": ["gone"]}, follow_redirects=True
    )
    assert "no channel named &#39;gone&#39;" in bad.get_data(as_text=True)
    viewer = signed_in_client(app, role="viewer")
    assert viewer.post(f"/alerts/jobs/{job.id}/notify", {"follow": "1"}).status_code == 403


def test_channel_grouping_and_quiet_window_from_its_page(app):
    ops = channel("ops")
    admin = signed_in_client(app, role="admin")
    bad = admin.post(
        f"/alerts/channels/{ops.id}/settings", {"group_minutes": "5", "quiet": "7pm", "quiet_timezone": ""}
    )
    assert bad.status_code == 400 and "not a quiet window" in bad.get_data(as_text=True)
    admin.post(
        f"/alerts/channels/{ops.id}/settings",
        {"group_minutes": "30", "quiet": "22:00-07:00", "quiet_timezone": "Europe/Paris"},
    )
    db.session.rollback()
    saved = db.session.get(AlertChannel, ops.id)
    assert (saved.group_seconds, saved.quiet_start, saved.quiet_end, saved.quiet_timezone) == (
        1800,
        "22:00",
        "07:00",
        "Europe/Paris",
    )
    assert "22:00–07:00 Europe/Paris" in admin.get(f"/alerts/channels/{ops.id}").get_data(as_text=True)


def test_send_test_shows_the_delivery_result(app):
    receiver = Receiver()
    try:
        ops = channel("ops", receiver.url)
        operator = signed_in_client(app, role="operator")
        shown = operator.post(f"/alerts/channels/{ops.id}/test", follow_redirects=True).get_data(as_text=True)
        assert "Test message delivered" in shown and "answer 200" in shown and len(receiver.requests) == 1
    finally:
        receiver.close()
