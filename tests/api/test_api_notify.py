"""The notification routing and channel resources of the API: a project's default and a job's
override set, read back and dropped; an unknown event or channel is a 422 problem; a viewer
reads but may not change; a channel's test answers the delivery's result from a loopback server."""

from __future__ import annotations

from datetime import timedelta

from app.clock import utcnow
from app.services.use_cases import alert_channels
from tests.factories import make_job
from tests.helpers.webhooks import Receiver


def channel(name, url):
    return alert_channels.add_channel(
        {"name": name, "kind": "webhook", "target": url, "secret": "s"}, now=utcnow() - timedelta(minutes=1), actor="t"
    )


def test_routing_set_read_and_dropped(app, api, people):
    channel("ops", "http://127.0.0.1:9/ops")
    job = make_job("nightly")
    api.login("admin")
    project_id = job.project_id
    before = api.get(f"/api/v1/projects/{project_id}/notify").get_json()
    assert before["source"] == "default" and before["events"] == ["dead_letter", "overdue", "recovery"]
    answer = api.request(
        "PUT", f"/api/v1/projects/{project_id}/notify", json={"events": ["failure"], "channels": ["ops"]}
    )
    assert answer.status_code == 200 and answer.get_json()["channels"] == ["ops"]
    answer = api.request("PUT", f"/api/v1/jobs/{job.id}/notify", json={"events": ["success", "failure"]})
    doc = answer.get_json()
    assert doc["override"] == {"events": ["failure", "success"], "channels": None, "source": "job"}
    assert doc["effective"]["channels"] == ["ops"]
    assert api.get(f"/api/v1/jobs/{job.id}/notify").get_json() == doc
    dropped = api.delete(f"/api/v1/jobs/{job.id}/notify").get_json()
    assert dropped["override"] is None and dropped["effective"]["source"] == "project"


def test_bad_routing_is_a_problem_with_the_field(app, api, people):
    job = make_job("nightly")
    api.login("admin")
    answer = api.request("PUT", f"/api/v1/jobs/{job.id}/notify", json={"events": ["failure", "boom"]})
    assert answer.status_code == 422 and "boom" in answer.get_json()["errors"]["events"]
    answer = api.request("PUT", f"/api/v1/jobs/{job.id}/notify", json={"events": ["failure"], "channels": ["nope"]})
    assert answer.status_code == 422 and "nope" in answer.get_json()["errors"]["channels"]
    assert api.get(f"/api/v1/jobs/{job.id}/notify").get_json()["override"] is None


def test_a_viewer_reads_but_may_not_change(app, api, people):
    job = make_job("nightly")
    api.login("viewer")
    assert api.get(f"/api/v1/jobs/{job.id}/notify").status_code == 200
    assert api.request("PUT", f"/api/v1/jobs/{job.id}/notify", json={"events": []}).status_code == 403
    assert api.request("PUT", f"/api/v1/projects/{job.project_id}/notify", json={"events": []}).status_code == 403


def test_a_channels_test_answers_the_delivery(app, api, people):
    receiver = Receiver(statuses=[200, 503])
    try:
        ops = channel("ops", receiver.url)
        api.login("operator")
        [listed] = api.get("/api/v1/channels").get_json()
        assert listed["target"] != receiver.url and listed["group_minutes"] == 10
        sent = api.post(f"/api/v1/channels/{ops.id}/test").get_json()
        assert sent["status"] == "delivered" and sent["response_status"] == 200 and sent["attempts"] == 1
        refused = api.post(f"/api/v1/channels/{ops.id}/test").get_json()
        assert refused["status"] == "pending" and refused["last_error"] == "HTTP 503" and refused["attempts"] == 1
        assert len(receiver.requests) == 2
    finally:
        receiver.close()
